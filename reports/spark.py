"""The process's one SparkSession: started on first use, quiet, stopped at exit.

`get_session()` starts it with the master from its argument, else `$LOGFORK_SPARK_MASTER`,
else ``local[*]``. Asking for another master stops the running session first: a process
holds one SparkContext at a time, and the local[1]/local[2] comparison needs both.

Spark's own console progress bar is off (it rewrites one line with carriage returns, which
CI logs keep as noise); `reports.progress` prints logfork-style progress instead. The JVM
logs nothing short of FATAL (a failed task's error reaches Python, which says it in one
paragraph), through a log4j2 configuration written at start. `$LOGFORK_SPARK_JAVA_OPTS`
adds JVM options.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from basics.errors import LogforkError
from basics.paths import PROJECT_ROOT

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
# Settings of the filesystems the executors read and write (`checkers.storage`); Spark's
# own redaction (spark.redaction.regex) keeps secrets out of its UI and logs.
FORWARDED_ENV = ("AWS_",)
MASTER_ENV = "LOGFORK_SPARK_MASTER"

_LOG4J2 = """\
status = error
rootLogger.level = fatal
rootLogger.appenderRef.stderr.ref = stderr
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = fatal
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [logfork] spark %p %c{1}: %m%n
"""

_lock = threading.Lock()
_session: SparkSession | None = None
_master: str | None = None
_conf: dict[str, str] = {}
_scratch: Path | None = None
_warming: threading.Thread | None = None  # the first query, run ahead (see `_start`)
WARM_UP_GROUP = "logfork-warm-up"


class SparkUnavailable(LogforkError):
    """Spark could not start: no Java, a bad master URL, a cluster that does not answer."""


def quiet_pandas_warning() -> None:
    # PySpark warns about pandas 3 on every pandas UDF; the pipeline is tested with pandas 2
    # and 3 and converts through Arrow itself where types matter.
    warnings.filterwarnings(
        "ignore", message=r"PySpark does not yet fully support pandas", category=FutureWarning
    )


def resolve_master(master: str | None = None) -> str:
    return master or os.environ.get(MASTER_ENV) or DEFAULT_MASTER


def local_cores(master: str) -> int | None:
    """Cores of a local master (``local``, ``local[N]``, ``local[*]``); None for a cluster."""
    if master == "local":
        return 1
    if master.startswith("local[") and master.endswith("]"):
        inner = master[len("local[") : -1].split(",")[0]
        return os.cpu_count() or 1 if inner == "*" else int(inner)
    return None


def get_session(master: str | None = None, conf: dict[str, str] | None = None) -> SparkSession:
    """The running session, or a new one. A different `master`, or Spark settings `conf`
    other than the running session's, replace the running one."""
    global _session, _master, _conf
    wanted = resolve_master(master)
    with _lock:
        same = (master is None or wanted == _master) and (conf is None or conf == _conf)
        if _session is not None and same:
            return _session
        if _session is not None:
            _stop_locked()
        _session = _start(wanted, conf or {})
        _master, _conf = wanted, dict(conf or {})
        return _session


def stop_session() -> None:
    """Stop the session (and its JVM) if one is running."""
    with _lock:
        _stop_locked()


def _stop_locked() -> None:
    global _session, _master, _scratch
    if _session is None:
        return
    session, _session, _master = _session, None, None
    if _warming is not None and _warming.is_alive():
        with contextlib.suppress(Exception):
            session.sparkContext.cancelJobGroup(WARM_UP_GROUP)
        _warming.join(timeout=30)  # its query ends before the session does: no error from it
    try:
        session.stop()
    finally:
        # The py4j gateway and its JVM outlive SparkSession.stop(): the JVM would linger
        # until the interpreter exits, and a new session would reuse it with the old JVM
        # options. The gateway JVM exits when its stdin closes.
        from pyspark import SparkContext

        gateway = SparkContext._gateway
        SparkContext._gateway = None
        SparkContext._jvm = None
        if gateway is not None:
            proc = getattr(gateway, "proc", None)
            with contextlib.suppress(Exception):
                gateway.shutdown()
            if proc is not None:
                if proc.stdin is not None:
                    proc.stdin.close()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        if _scratch is not None:
            shutil.rmtree(_scratch, ignore_errors=True)
            _scratch = None


def check_reachable(master: str, timeout: float = 5.0) -> None:
    """A standalone master (``spark://host:port[,host:port]``) must accept connections:
    Spark itself would retry for a minute and then fail in a way that says little."""
    if not master.startswith("spark://"):
        return
    problems = []
    for address in master[len("spark://") :].split(","):
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return
        except (OSError, ValueError) as exc:
            problems.append(f"{address}: {exc.strerror if isinstance(exc, OSError) else exc}")
    raise SparkUnavailable(
        f"the Spark master {master} does not answer ({'; '.join(problems)}). Check the "
        "--spark-master URL, and that the master runs and is reachable from this machine."
    )


def _loopback(master: str) -> bool:
    host = master.removeprefix("spark://").rpartition(":")[0]
    return host in ("127.0.0.1", "localhost", "::1")


def _start(master: str, conf: dict[str, str]) -> SparkSession:
    global _scratch, _warming
    quiet_pandas_warning()
    check_reachable(master)
    # Python workers must run this interpreter (the one with pyarrow, pandas and logfork).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    conf_dir = _scratch = Path(tempfile.mkdtemp(prefix="logfork-spark-"))
    log4j = conf_dir / "log4j2.properties"
    log4j.write_text(_LOG4J2)
    java_opts = f"-Dlog4j2.configurationFile=file:{log4j} -Dlog4j.configurationFile=file:{log4j}"
    cores = local_cores(master)
    # The JVMs' own work is glue between Python tasks (no batch crosses them): a serial
    # collector and the client compiler halve the CPU they burn, and that is CPU the Python
    # tasks get. Measured on the fleet benchmark's standalone cluster: 100 s cold with the
    # JVM defaults, 58 s with these.
    java_opts += " -XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    java_opts = " ".join([java_opts, os.environ.get("LOGFORK_SPARK_JAVA_OPTS", "")]).strip()
    if cores is not None or _loopback(master):
        # A local master, or a cluster on loopback, needs no other interface: bind to
        # loopback, and no warning about which interface the host name resolves to.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    pythonpath = os.pathsep.join(
        p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    builder = (
        SparkSession.builder.master(master)
        .appName("logfork")
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.executor.extraJavaOptions", java_opts)
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.execution.arrow.pyspark.fallback.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.executorEnv.PYTHONPATH", pythonpath)
        .config("spark.local.dir", str(conf_dir / "scratch"))
    )
    for name, value in sorted(conf.items()):
        builder = builder.config(name, value)
    for name, value in sorted(os.environ.items()):
        if name.startswith(FORWARDED_ENV):
            # A cluster's executors were started before this driver: they learn how to
            # reach the filesystems (S3 endpoint and credentials) from the application.
            builder = builder.config(f"spark.executorEnv.{name}", value)
    if cores is not None:
        # Local runs: no web UI (a port and a second of start-up for nothing), and shuffles
        # sized for the cores rather than Spark's 200 partitions.
        builder = builder.config("spark.ui.enabled", "false").config(
            "spark.sql.shuffle.partitions", str(max(2, cores * 2))
        )
    try:
        with _filtered_stderr():
            session = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - py4j and Java errors become one paragraph
        raise SparkUnavailable(
            f"Spark could not start with master {master!r}: {_first_line(exc)}. logfork runs "
            "Spark through PySpark, which needs Java 17 or later on PATH (or JAVA_HOME); "
            "for a cluster, check the --spark-master URL and that logfork is installed on "
            "its workers."
        ) from None
    session.sparkContext.setLogLevel("FATAL")
    # Anything else that connects to the driver's accumulator server (a Kafka client of
    # another run, retrying a port the OS has since given this server) fails its token
    # check, and socketserver prints that traceback to stderr: nothing of this audit's.
    server = getattr(session.sparkContext, "_accumulatorServer", None)
    if server is not None:
        server.handle_error = lambda request, client_address: None
    # Spark's first query loads and compiles its code paths: a second or two of the JVM's
    # time. On a thread, that overlaps whatever the driver does next (listing the log dirs,
    # when the session is started first) instead of holding up the first real query.
    _warming = threading.Thread(target=_warm_up, args=(session,), daemon=True, name="warm-up")
    _warming.start()
    return session


def _warm_up(session: SparkSession) -> None:
    import pyarrow as pa

    with contextlib.suppress(Exception):  # only a head start: the real queries say what fails
        # Job groups are per thread: stopping the session cancels this one alone (a cluster
        # that grants no executor would leave it waiting for ever).
        session.sparkContext.setJobGroup(WARM_UP_GROUP, "warm-up", interruptOnCancel=True)
        table = pa.table({"run": pa.array(["warm-up"]), "bucket": pa.array([0], pa.int32())})
        session.createDataFrame(table).groupBy("run", "bucket").count().toArrow()


# Lines the JVM (and the Python workers it starts) print on stderr whatever the log level:
# start-up chatter and PySpark's pandas 3 warning, which says nothing a user can act on.
_NOISE = re.compile(
    r"^(WARNING: Using incubator modules|Setting default log level to|"
    r"To adjust logging level use sc\.setLogLevel|.*FutureWarning: PySpark does not yet fully "
    r"support pandas)"
)
_NOISE_FOLLOWER = re.compile(r"^\s+require_minimum_pandas_version\(\)")


@contextlib.contextmanager
def _filtered_stderr() -> Iterator[None]:
    """Start the JVM with its stderr on a pipe that drops `_NOISE` and passes the rest on.

    The JVM inherits file descriptor 2 when py4j launches it, so fd 2 points at the pipe
    only while the session starts; the relay thread then serves the JVM (and its Python
    workers) for as long as they live.
    """
    try:
        read_fd, write_fd = os.pipe()
        saved = os.dup(2)
    except OSError:
        yield
        return
    sys.stderr.flush()
    os.dup2(write_fd, 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(write_fd)
        threading.Thread(
            target=_relay, args=(read_fd, saved), daemon=True, name="logfork-spark-stderr"
        ).start()


def _relay(read_fd: int, out_fd: int) -> None:
    skip_next = False
    with os.fdopen(read_fd, "rb", buffering=0) as pipe, contextlib.suppress(OSError):
        for raw in iter(pipe.readline, b""):
            line = raw.decode("utf-8", "replace")
            if skip_next and _NOISE_FOLLOWER.match(line):
                skip_next = False
                continue
            skip_next = False
            if _NOISE.match(line):
                skip_next = True
                continue
            os.write(out_fd, raw)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def task_placement(spark: SparkSession, tasks: set[tuple[int, int]]) -> dict[tuple[int, int], str]:
    """(stage, task attempt id) of finished tasks -> "executor ID on HOST", from Spark's own
    status store (the one its web UI shows). Its listener records tasks moments after they
    end, so this waits until every task is there."""
    from fixtures.waiting import WaitTimeout, wait_until

    store = spark.sparkContext._jsc.sc().statusStore()
    stages = sorted({stage for stage, _ in tasks})

    def probe() -> dict[tuple[int, int], str]:
        found: dict[tuple[int, int], str] = {}
        for stage in stages:
            for attempt in range(4):  # a stage retried after a lost executor has attempts
                listed = store.taskList(stage, attempt, 2**31 - 1)
                for i in range(listed.size()):
                    task = listed.apply(i)
                    found[(stage, task.taskId())] = f"executor {task.executorId()} on {task.host()}"
                if listed.size() == 0:
                    break
        return found

    if not tasks:
        return {}
    try:
        return wait_until(
            probe,
            lambda found: tasks <= found.keys(),
            what="Spark's record of its tasks",
            timeout=60,
        )
    except WaitTimeout:  # where a task ran is a diagnosis: never worth failing the audit
        found = probe()
        return {task: found.get(task, "an unrecorded executor") for task in tasks}


def _stop_at_exit() -> None:
    # At interpreter exit py4j may already be half torn down; a JVM left behind exits on
    # its own when its stdin closes with this process.
    with contextlib.suppress(Exception):
        stop_session()


atexit.register(_stop_at_exit)
