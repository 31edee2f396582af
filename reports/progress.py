"""Progress of long Spark steps on stderr, in the style of `fixtures.progress`.

A background thread polls the SparkContext's status tracker. Nothing is printed for a step
that ends within `quiet_for` seconds; after that, on a terminal one line is rewritten in
place, elsewhere (CI logs) a line is printed every `every` seconds.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import Any


class SparkProgress:
    def __init__(
        self, spark: Any, label: str, *, every: float = 5.0, quiet_for: float = 2.0
    ) -> None:
        self.spark = spark
        self.label = label
        self.every = every
        self.quiet_for = quiet_for
        self.started = time.monotonic()
        self.shown = False
        self._tty = sys.stderr.isatty()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> SparkProgress:
        self.started = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True, name="logfork-progress")
        self._thread.start()
        return self

    def _tasks(self) -> str:
        try:
            tracker = self.spark.sparkContext.statusTracker()
            parts = []
            for stage_id in sorted(tracker.getActiveStageIds()):
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    parts.append(
                        f"stage {stage_id}: {info.numCompletedTasks}/{info.numTasks} tasks"
                    )
            return "; ".join(parts) or "planning"
        except Exception:  # noqa: BLE001 - progress must never break the step it watches
            return "running"

    def _line(self) -> str:
        elapsed = time.monotonic() - self.started
        return f"[logfork] {self.label}: {self._tasks()}, {elapsed:.0f}s"

    def _run(self) -> None:
        if self._stop.wait(self.quiet_for):
            return
        last = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            if self._tty:
                sys.stderr.write("\r\x1b[2K" + self._line()[:160])
                sys.stderr.flush()
                self.shown = True
            elif now - last >= self.every:
                print(self._line(), file=sys.stderr, flush=True)
                self.shown = True
                last = now
            self._stop.wait(0.5)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        elapsed = time.monotonic() - self.started
        if self.shown or exc_type is not None or elapsed >= self.quiet_for:
            status = "done" if exc_type is None else "failed"
            end = "\r\x1b[2K" if self._tty and self.shown else ""
            print(
                f"{end}[logfork] {self.label}: {status} in {elapsed:.1f}s",
                file=sys.stderr,
                flush=True,
            )


def note(message: str) -> None:
    print(f"[logfork] {message}", file=sys.stderr, flush=True)
