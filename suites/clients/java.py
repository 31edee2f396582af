"""The Java client of the release under test, as a transactional producer: `TxnShell.java`,
compiled once per release against that release's own jars (the broker's libs hold
kafka-clients and what it needs) and run on the host, with the cluster's published ports.

The JVM is a child of this process: it reads its requests on stdin and exits when stdin
closes, so it cannot outlive logfork even when logfork is killed.
"""

from __future__ import annotations

import hashlib
import select
import subprocess
from pathlib import Path
from typing import IO, Any

from basics.errors import Refused, SetupError
from fixtures.cluster import Cluster
from fixtures.releases import cache_dir
from suites.clients.api import Result, TxnFailed

SOURCE = Path(__file__).with_name("TxnShell.java")
HEAP = "-Xmx96m"  # a client: several JVMs share two cores and the brokers' memory


def compiled(libs: Path) -> Path:
    """The directory holding TxnShell.class built against `libs`, compiled on first use."""
    digest = hashlib.sha256(SOURCE.read_bytes() + str(libs.resolve()).encode()).hexdigest()
    out = cache_dir() / "clients" / digest[:16]
    if (out / "TxnShell.class").is_file():
        return out
    out.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        ["javac", "-nowarn", "-cp", f"{libs}/*", "-d", str(out), str(SOURCE)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise SetupError(f"javac could not build {SOURCE.name} against {libs}: {result.stderr}")
    return out


class JavaTxnClient:
    def __init__(self, cluster: Cluster, conf: dict[str, Any], log: Path | None) -> None:
        assert cluster.dist is not None, "cluster not started"
        libs = cluster.dist.libs
        settings = {"bootstrap.servers": cluster.bootstrap_servers(), **conf}
        cmd = [
            "java", HEAP, "-cp", f"{compiled(libs)}:{libs}/*", "TxnShell",
            *(f"{k}={v}" for k, v in settings.items()),
        ]  # fmt: skip
        self._log: IO[bytes] | None = open(log, "ab") if log is not None else None  # noqa: SIM115
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log or subprocess.DEVNULL,
            text=True,
        )
        self._call("init", timeout=90)

    def _call(self, *fields: object, timeout: float) -> list[str]:
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write("\t".join(map(str, fields)) + "\n")
            proc.stdin.flush()
        except BrokenPipeError:
            raise Refused(f"the Java client exited ({proc.poll()})") from None
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        line = proc.stdout.readline() if ready else ""
        if not line:
            self.close()
            raise Refused(f"the Java client gave no answer to {fields[0]} in {timeout}s")
        answer = line.rstrip("\n").split("\t")
        if answer[0] != "ok":
            raise TxnFailed(f"{fields[0]}: {' '.join(answer[1:])}")
        return answer[1:]

    def begin(self) -> None:
        self._call("begin", timeout=30)

    def send(self, topic: str, partition: int, key: str, value: str) -> None:
        self._call("send", topic, partition, key, value, timeout=30)

    def flush(self, timeout: float) -> list[Result]:
        return [
            (None, f[2:]) if f.startswith("E:") else (int(f), None)
            for f in self._call("flush", timeout=timeout)
        ]

    def commit(self, timeout: float) -> None:
        self._call("commit", timeout=timeout + 30)  # the client's own max.block.ms comes first

    def abort(self, timeout: float) -> None:
        self._call("abort", timeout=timeout + 30)

    def close(self) -> None:
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            try:
                self._proc.stdin.close()  # the shell exits at end of input
                self._proc.wait(timeout=10)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
