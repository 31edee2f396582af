"""timeline.jsonl: every fault, heal, election, observed state, phase and note of a run.

Each event has a kind, a name, wall-clock time (to line up with broker logs) and monotonic
time (to measure durations a clock step cannot distort). The fields the reports draw from
are typed and named one way (a leader epoch is `epoch`); whatever else a step wants to keep
goes in `data`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class EventKind(StrEnum):
    FAULT = "fault"  # something broken on purpose
    HEAL = "heal"  # a fault undone
    ELECTION = "election"  # a leadership change logfork caused or observed
    STATE = "state"  # an observed partition state
    PHASE = "phase"  # the start of a scenario phase (boot, faults, convergence, check)
    NOTE = "note"  # anything else worth keeping: batches written, the model's prediction, ...
    STEP = "step"  # a schedule's step: done, skipped (with what was observed) or rejected


# A fault event: DeleteRecords moved a partition's log start to `data["offset"]` (KIP-107).
DELETE_RECORDS = "delete-records"


@dataclass
class Event:
    kind: EventKind
    name: str
    wall: float
    mono: float
    node: str | None = None  # a node name: b1, c1, zk
    broker: int | None = None
    topic: str | None = None
    partition: int | None = None
    leader: int | None = None
    epoch: int | None = None  # a leader epoch
    cut: str | None = None  # a network cut, as `faults.network.LinkCut.describe` says it
    signal: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def lines(self) -> list[str]:
        """Text lines a step attached (the model's rounds, say)."""
        lines = self.data.get("lines")
        return [str(x) for x in lines] if isinstance(lines, list) else []


def deleted_below(events: list[Event]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the offset below which the run's DeleteRecords removed its
    records on purpose: what explains a log start past acknowledged writes."""
    out: dict[tuple[str, int], int] = {}
    for e in events:
        if e.kind == EventKind.FAULT and e.name == DELETE_RECORDS and e.topic is not None:
            tp = (e.topic, e.partition or 0)
            out[tp] = max(out.get(tp, 0), int(e.data["offset"]))
    return out
