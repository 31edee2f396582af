"""The run timeline: every fault, heal, election and observed state, as typed events
(`runrecord.events.Event`) appended to timeline.jsonl.

A cluster always has one (`Cluster.timeline`): in memory for a cluster of a test, written
to the run directory for a scenario run. Faults record into the timeline of the cluster
they act on.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from runrecord.events import Event, EventKind
from runrecord.typed import JsonLines

_TYPED = {f.name for f in dataclasses.fields(Event)} - {"kind", "name", "wall", "mono", "data"}


class Timeline:
    def __init__(self, writer: JsonLines | None = None) -> None:
        self.writer = writer
        self.events: list[Event] = []
        self._lock = threading.Lock()
        self.started = time.monotonic()

    def record(self, kind: EventKind | str, name: str, **fields: Any) -> Event:
        """Record an event: the typed fields (node, broker, topic, partition, leader, epoch,
        cut, signal) by name, anything else into its `data`."""
        typed = {k: fields.pop(k) for k in list(fields) if k in _TYPED}
        event = Event(EventKind(kind), name, time.time(), time.monotonic(), **typed, data=fields)
        with self._lock:
            self.events.append(event)
            if self.writer is not None:
                self.writer.append(event)
        return event

    def phase(self, name: str, **fields: Any) -> Event:
        """Mark the start of a scenario phase (boot, faults, convergence, check, report)."""
        return self.record(EventKind.PHASE, name, **fields)

    def phase_durations(self) -> dict[str, float]:
        """Seconds spent in each phase, from one phase mark to the next (or to now)."""
        marks = [e for e in self.events if e.kind == EventKind.PHASE]
        out: dict[str, float] = {}
        for i, mark in enumerate(marks):
            end = marks[i + 1].mono if i + 1 < len(marks) else time.monotonic()
            out[mark.name] = out.get(mark.name, 0.0) + end - mark.mono
        return out
