"""`logfork explore --spark-master URL`: the search spread over a Spark standalone cluster
whose workers each have a Docker engine.

- The driver ranks the candidates as `logfork explore` does and deals them out in ranked
  order, one shard per task: schedule n (numbered as the whole run ranked it) goes to shard
  (n - 1) mod shards.
- Each shard is a Spark job of one task. The task starts `suites.explore.engine.shard` as a
  process of its own, which runs the shard on its worker's own clusters, then copies the
  shard's directory (its clusters' dirs aside) to the store, `--store` (any URI the audit
  takes: `file://` on a mount every machine shares, `s3://`).
- As each job ends, the driver copies that shard back and merges it into the one explore
  directory: every schedule under its own number, with the worker that ran it. Findings are
  then shrunk on the driver's own Docker engine, as `logfork explore` shrinks them.

A task must never run twice: a second attempt would run its clusters again. So:
- `spark.task.maxFailures=1` and `spark.speculation=false` (no retry, no speculative copy);
- the task itself refuses an attempt number above 0. Spark re-queues a task whose executor
  was lost for a cause outside the application without counting a failure
  (TaskSetManager.executorLost), which no setting turns off;
- a job per shard, so that one shard's failure cancels no other.
A shard whose task failed, was refused or never reported is listed with its schedules as not
run (`ExploreRecord.not_run`), never as passed.
"""

from __future__ import annotations

import itertools
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from basics.errors import SetupError
from basics.paths import PROJECT_ROOT
from basics.threads import run_threads
from fixtures.waiting import WaitTimeout, wait_until
from reports.outputs import as_location, child, get_tree, put_tree, remove
from reports.render import INDEX_JSON, load_entries, write_index
from runrecord.explore import (
    EXPLORE_JSON,
    SHARD_DONE,
    SHARD_FAILED,
    SHARD_LOST,
    SHARD_OUT,
    SHARD_PLAN,
    ClusterBoot,
    ExploreRecord,
    NotRun,
    ShardCandidate,
    ShardPlan,
    ShardRecord,
)
from runrecord.schedule import load_schedule, to_dict, write_schedule
from runrecord.typed import RunRecordError, dumps_record, read_json
from suites.explore.drawing.generate import DrawOptions
from suites.explore.drawing.guide import Candidate
from suites.explore.engine.lines import progress_line

if TYPE_CHECKING:
    from suites.explore.engine.explorer import Explorer

# No retry and no speculative copy of a task (see the module's docstring).
NO_RETRIES = {"spark.task.maxFailures": "1", "spark.speculation": "false"}
# Only what the merge reads goes to the store: the clusters' own dirs stay on the worker.
NOT_STORED = ("clusters",)
# The shard page's own index and explore page: the driver writes the merged ones.
NOT_MERGED = (
    "report/index.html",
    "report/index.json",
    "report/explore.html",
    EXPLORE_JSON,
    "shard.log",
)
LOG_TAIL = 12  # lines of a failed shard's output kept in its record
EXECUTOR_WAIT = 120.0  # for the first executor to register (the cluster grants them)


def deal(ranked: list[Candidate], shards: int) -> list[list[tuple[int, Candidate]]]:
    """(number, candidate) per shard: the ranked order dealt out like cards, so that every
    shard gets its share of the most promising."""
    hands: list[list[tuple[int, Candidate]]] = [[] for _ in range(shards)]
    for n, candidate in enumerate(ranked, start=1):
        hands[(n - 1) % shards].append((n, candidate))
    return [hand for hand in hands if hand]


def shard_plan(explorer: Explorer, index: int, hand: list[tuple[int, Candidate]]) -> ShardPlan:
    o, record = explorer.options, explorer.record
    return ShardPlan(
        index=index,
        kafka=o.kafka,
        mode=record.mode,
        seed=o.seed,
        unclean=o.unclean,
        guided=o.guided,
        power_models=list(o.power_models),
        reuse=o.reuse,
        report=o.report,
        parallel=o.parallel,
        base_image=o.base_image,
        minutes=o.minutes,
        command=o.command,
        candidates=[ShardCandidate(n, c.index, c.score, to_dict(c.schedule)) for n, c in hand],
    )


# --------------------------------------------------------------------------------------
# The task (on an executor)


def run_task(items: Iterator[tuple[int, str, str]]) -> Iterator[dict[str, Any]]:
    """Spark's side of a shard: the one (index, plan JSON, store) of its partition."""
    from pyspark import TaskContext

    context = TaskContext.get()
    for index, plan_json, store in items:
        yield _run_shard(index, plan_json, store, context)


def _run_shard(index: int, plan_json: str, store: str, context: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "shard": index,
        "stage": context.stageId(),
        "task": context.taskAttemptId(),
        "host": socket.gethostname(),
        "status": SHARD_FAILED,
        "detail": "",
        "out": "",
        "seconds": 0.0,
    }
    if context.attemptNumber() > 0:
        row["detail"] = (
            f"attempt {context.attemptNumber()} refused: a second attempt would run the "
            "shard's clusters again"
        )
        return row
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix=f"logfork-shard-{index}-"))
    try:
        out, log = work / SHARD_OUT, work / "shard.log"
        (work / SHARD_PLAN).write_text(plan_json)
        row["out"] = str(out)
        argv = [sys.executable, "-m", "suites.explore.engine.shard", str(work)]
        with open(log, "wb") as sink:
            # stdin is the shard's lifeline (suites/explore/shard.py): kept open until it
            # ends, closed by the kernel if this worker is killed.
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=sink,
                stderr=subprocess.STDOUT,
                cwd=PROJECT_ROOT,
                start_new_session=True,
            )
            code = proc.wait()
        out.mkdir(exist_ok=True)
        shutil.copy(log, out / "shard.log")
        if code == 0:
            put_tree(out, child(as_location(store), f"shard-{index}"), skip=NOT_STORED)
            row["status"] = SHARD_DONE
        else:
            tail = log.read_text(errors="replace").strip().splitlines()[-LOG_TAIL:]
            row["detail"] = f"the shard exited with {code}: " + " | ".join(tail)
    except Exception as exc:  # noqa: BLE001 - a failed task must not fail the job (it would
        # be retried by no one, and the others would be cancelled): its row says why
        row["detail"] = f"{type(exc).__name__}: {exc}"
    finally:
        shutil.rmtree(work, ignore_errors=True)
        row["seconds"] = round(time.monotonic() - started, 1)
    return row


# --------------------------------------------------------------------------------------
# The driver


def search_on_spark(explorer: Explorer, drawing: DrawOptions) -> None:
    """Run the explore's schedules as shards on the Spark cluster and merge them into
    `explorer` (its record, its failing schedules); shrinking is left to the caller."""
    from reports.spark import get_session

    o, say = explorer.options, explorer.say
    assert o.spark_master is not None
    spark = get_session(o.spark_master, conf=NO_RETRIES)
    sc = spark.sparkContext
    # Ranking takes seconds: the cluster's executors register meanwhile.
    ranked = list(itertools.islice(explorer.candidates(drawing), o.budget or o.pool))
    executors = _executors(sc)
    hands = deal(ranked, min(o.shards or executors, len(ranked)))
    store = o.store or (explorer.out / "shards").as_uri()
    explorer.record.spark_master = sc.master
    say(
        f"spark: {len(hands)} shard(s) of {len(ranked)} schedule(s) on {sc.master} "
        f"({executors} executor(s)); store: {store}"
    )
    lock = threading.Lock()
    errors: list[BaseException] = []

    def job(index: int, hand: list[tuple[int, Candidate]]) -> None:
        plan = dumps_record(shard_plan(explorer, index, hand))
        sc.setJobGroup(f"logfork-shard-{index}", f"explore shard {index}", interruptOnCancel=True)
        try:
            got = sc.parallelize([(index, plan, store)], 1).mapPartitions(run_task)
            row = got.collect()[0]
        except Exception as exc:  # noqa: BLE001 - the job failed: the shard is lost
            row = {"shard": index, "status": SHARD_LOST, "detail": _first_line(exc)}
        if explorer.stop.is_set():
            return  # interrupted: the run ends as it stands
        with lock:
            try:
                _merge(explorer, store, hand, row, spark)
            except BaseException as exc:  # noqa: BLE001 - raised in the main thread
                errors.append(exc)

    threads = [
        threading.Thread(target=job, args=(i, hand), name=f"shard-{i}", daemon=True)
        for i, hand in enumerate(hands, start=1)
    ]
    try:
        run_threads(threads)
    except BaseException:
        # Cancelled tasks' workers are killed; each shard's lifeline then removes its
        # clusters (suites/explore/shard.py).
        explorer.stop.set()
        for i in range(1, len(hands) + 1):
            sc.cancelJobGroup(f"logfork-shard-{i}")
        raise
    if errors:
        raise errors[0]
    if o.store is None:
        remove(explorer.out / "shards")


def _executors(sc: Any) -> int:
    """Executors registered with the application, once at least one is (a standalone
    worker starts one per application: one shard per worker by default, which runs as many
    clusters as its own machine allows)."""

    def count() -> int:
        # The driver is listed too.
        return max(0, len(sc._jsc.sc().statusTracker().getExecutorInfos()) - 1)

    try:
        return wait_until(count, lambda n: n > 0, what="a Spark executor", timeout=EXECUTOR_WAIT)
    except WaitTimeout:
        raise SetupError(
            f"the Spark cluster granted no executor in {EXECUTOR_WAIT:.0f}s: check that its "
            "workers run and have a free core and memory"
        ) from None


def _merge(
    explorer: Explorer,
    store: str,
    hand: list[tuple[int, Candidate]],
    row: dict[str, Any],
    spark: Any,
) -> None:
    """One shard's results into the explore directory and record (under the caller's lock)."""
    record, out, index = explorer.record, explorer.out, row["shard"]
    worker = _worker(spark, row)
    shard = ShardRecord(
        index,
        [n for n, _ in hand],
        row["status"],
        worker,
        row.get("detail", ""),
        row.get("seconds", 0.0),
    )
    record.shards.append(shard)
    record.shards.sort(key=lambda s: s.index)
    ran: set[int] = set()
    if shard.status == SHARD_DONE:
        source = child(as_location(store), f"shard-{index}")
        try:
            ran = _copy_back(explorer, source, row, worker)
        except RunRecordError as exc:  # not in the store: the worker wrote elsewhere
            shard.status = SHARD_FAILED
            shard.detail = (
                f"its results are not readable in the store {store} ({exc}); workers on "
                "other machines need a --store they all share"
            )
    # A shard that ended well ran its whole share, or as much as --minutes allowed (the
    # rest were never due, as in `logfork explore`); a failed or lost one's are not run.
    for n, candidate in hand if shard.status != SHARD_DONE else ():
        if n in ran:
            continue
        file = out / "schedules" / f"{n:03d}.json"
        write_schedule(file, candidate.schedule)
        why = f"shard {index} {shard.status}: {shard.detail or 'no reason given'}"
        record.not_run.append(
            NotRun(n, candidate.index, len(candidate.schedule.steps), str(file), index, why)
        )
    record.not_run.sort(key=lambda e: e.number)
    explorer.say(f"shard {index} {shard.status} on {worker or 'no worker'}: {len(ran)} run")
    explorer.save()


def _copy_back(explorer: Explorer, source: Any, row: dict[str, Any], worker: str) -> set[int]:
    """The shard's files into the explore directory, its entries into the record (their
    paths made the driver's); the numbers it ran."""
    out = explorer.out
    staging = Path(tempfile.mkdtemp(prefix="logfork-merge-", dir=out))
    try:
        if get_tree(source, staging) == 0:
            raise RunRecordError(f"{source}: nothing there")
        shard = read_json(ExploreRecord, staging / EXPLORE_JSON)
        for path in sorted(staging.rglob("*")):
            rel = path.relative_to(staging).as_posix()
            if path.is_file() and rel not in NOT_MERGED:
                target = out / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(path, target)
        log = staging / "shard.log"
        if log.is_file():  # what the shard printed, as `logfork explore` would have
            (out / "shard-logs").mkdir(exist_ok=True)
            shutil.move(log, out / "shard-logs" / f"{row['shard']}.log")
        # The shard's reports join the run's index, which exists even when no schedule
        # had a report (none found anything: a shard writes none then).
        write_index(out / "report", load_entries(staging / "report" / INDEX_JSON))
        base = row["out"]

        def here(path: str | None) -> str | None:
            return str(out / Path(path).relative_to(base)) if path else path

        for entry in shard.schedules:
            entry.run_dir = here(entry.run_dir) or ""
            entry.schedule_file = here(entry.schedule_file) or ""
            entry.report = here(entry.report)
            entry.cluster = f"{worker} {entry.cluster or 'c1'}"
            explorer.add(entry, load_schedule(entry.schedule_file))
            explorer.say(progress_line(entry, explorer.options.budget))
        explorer.record.boots += [
            ClusterBoot(b.reason, b.schedule, b.seconds, here(b.run_dir) or "") for b in shard.boots
        ]
        return {e.number for e in shard.schedules}
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _worker(spark: Any, row: dict[str, Any]) -> str:
    """ "executor E on HOST" of the task (a worker starts one executor per application)."""
    if "stage" not in row:
        return ""
    from reports.spark import task_placement

    key = (row["stage"], row["task"])
    return task_placement(spark, {key})[key]


def _first_line(exc: BaseException) -> str:
    """What a failed job says: Spark's own reason (a Py4JJavaError's first line names only
    the call that failed)."""
    java = getattr(exc, "java_exception", None)
    text = str(java.getMessage()) if java is not None else str(exc)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    reason = next((line for line in lines if line.startswith("Job aborted")), lines[0])
    return reason[:400]
