"""Peak resident memory of a process tree, by role: the driver (Python and its JVM) and each
executor (its JVM and its Python workers).

A thread polls /proc: every process below the roots is classified by its command line and
its own peak (VmHWM, which the kernel keeps) is remembered, so a Python worker that lives
for one task between two polls still counts with its whole peak.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

DRIVER_PY, DRIVER_JVM = "driver python", "driver JVM"
EXECUTOR_JVM, PY_WORKER = "executor JVM", "python worker"


def _status_kb(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            out.setdefault(ppid, []).append(int(entry.name))
    return out


def role(cmdline: str) -> str | None:
    if "CoarseGrainedExecutorBackend" in cmdline:
        return EXECUTOR_JVM
    if "pyspark.daemon" in cmdline or "pyspark.worker" in cmdline:
        return PY_WORKER
    if "java" in cmdline and "SparkSubmit" in cmdline:
        return DRIVER_JVM
    if "python" in cmdline:
        return DRIVER_PY
    return None


@dataclass
class Peaks:
    """Peak RSS in bytes per process, with its role; an executor's Python workers are
    counted under the executor JVM they descend from."""

    by_pid: dict[int, tuple[str, int]] = field(default_factory=dict)
    executor_of: dict[int, int] = field(default_factory=dict)  # worker pid -> executor pid

    def peak(self, wanted: str) -> int:
        return max((kb for r, kb in self.by_pid.values() if r == wanted), default=0) * 1024

    def executors(self) -> dict[int, dict[str, int]]:
        """Executor JVM pid -> its JVM's peak and its largest Python worker's."""
        out = {
            pid: {"jvm": kb * 1024, "python": 0}
            for pid, (r, kb) in self.by_pid.items()
            if r == EXECUTOR_JVM
        }
        for worker, executor in self.executor_of.items():
            if executor in out:
                kb = self.by_pid[worker][1]
                out[executor]["python"] = max(out[executor]["python"], kb * 1024)
        return out

    def summary(self) -> dict[str, object]:
        return {
            "driver_python": self.peak(DRIVER_PY),
            "driver_jvm": self.peak(DRIVER_JVM),
            "python_worker": self.peak(PY_WORKER),
            "executors_rss": list(self.executors().values()),
        }


class Sampler:
    """Polls the trees under `roots` (pids) until stopped."""

    def __init__(self, roots: Iterable[int], interval: float = 0.25) -> None:
        self.roots = list(roots)
        self.interval = interval
        self.peaks = Peaks()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="rss-sampler")

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval):
                self.sample()
                return

    def sample(self) -> None:
        children = _children()
        pending = [(pid, None) for pid in self.roots]
        while pending:
            pid, executor = pending.pop()
            kind = role(_cmdline(pid))
            if kind == EXECUTOR_JVM:
                executor = pid
            if kind is not None:
                kb = _status_kb(pid, "VmHWM")
                old = self.peaks.by_pid.get(pid, (kind, 0))[1]
                self.peaks.by_pid[pid] = (kind, max(kb, old))
                if kind == PY_WORKER and executor is not None:
                    self.peaks.executor_of[pid] = executor
            pending.extend((child, executor) for child in children.get(pid, []))


def mb(value: int) -> str:
    return f"{value / 2**20:.0f} MB"
