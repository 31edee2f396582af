"""The run timeline: every fault, heal, election and observed state change, as JSON lines.

Each event carries wall-clock time (to line up with broker logs) and monotonic time (to
measure durations that a clock step cannot distort). Reports draw it next to the partition
state history.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Event:
    kind: str  # "fault", "heal", "election", "state", "phase", "note"
    name: str
    wall: float
    mono: float
    fields: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "wall": self.wall,
            "mono": self.mono,
            **self.fields,
        }


class Timeline:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.events: list[Event] = []
        self._lock = threading.Lock()
        self.started = time.monotonic()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")

    def record(self, kind: str, name: str, **fields: Any) -> Event:
        event = Event(kind, name, time.time(), time.monotonic(), fields)
        with self._lock:
            self.events.append(event)
            if self.path is not None:
                with self.path.open("a") as f:
                    f.write(json.dumps(event.to_json(), default=str) + "\n")
        return event

    def phase(self, name: str, **fields: Any) -> Event:
        """Mark the start of a scenario phase (boot, faults, convergence, check)."""
        return self.record("phase", name, **fields)

    def phase_durations(self) -> dict[str, float]:
        """Seconds spent in each phase, from one phase mark to the next (or to now)."""
        marks = [e for e in self.events if e.kind == "phase"]
        out: dict[str, float] = {}
        for i, mark in enumerate(marks):
            end = marks[i + 1].mono if i + 1 < len(marks) else time.monotonic()
            out[mark.name] = out.get(mark.name, 0.0) + end - mark.mono
        return out
