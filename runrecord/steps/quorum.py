"""Faults of the KRaft controller quorum."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from runrecord.schedule_fields import is_int
from runrecord.steps.base import (
    StepKind,
    checked,
)

if TYPE_CHECKING:
    from runrecord.schedule_cluster import Cluster

QUORUM_ACTIONS = ("kill", "restart", "pause", "resume", "isolate")
ACTIVE = "active"  # the quorum leader when the step runs


def _check_quorum_action(value: Any) -> tuple[Any, str | None]:
    if value in QUORUM_ACTIONS:
        return value, None
    return None, f"must be one of {', '.join(QUORUM_ACTIONS)}"


def _check_voter(value: Any) -> tuple[Any, str | None]:
    if value == ACTIVE or (is_int(value) and 1 <= value <= 3):
        return value, None
    return None, f'must be "{ACTIVE}" or a voter number (1 to 3)'


@dataclass(frozen=True)
class Quorum(StepKind):
    """KRaft: a fault of the controller quorum. `action`: kill (SIGKILL), restart, pause,
    resume, or isolate (cut the voter off from the other voters until a `heal`); `voter`:
    "active" (the quorum leader when the step runs) or a voter by number (1 is c1)."""

    KIND: ClassVar[str] = "quorum"
    action: str = field(metadata=checked(_check_quorum_action))
    voter: str | int = field(default=ACTIVE, metadata=checked(_check_voter))

    def describe(self) -> str:
        who = "the active controller" if self.voter == ACTIVE else f"voter {self.voter}"
        return f"{self.action} {who}"

    def problems(self, cluster: Cluster | None) -> Iterator[tuple[str, str]]:
        if cluster is None:
            return
        if cluster.mode != "kraft":
            yield "kind", "a quorum step needs KRaft (cluster.mode kraft)"
        elif isinstance(self.voter, int) and self.voter > cluster.controllers:
            yield "voter", f"the cluster has {cluster.controllers} controller(s)"
