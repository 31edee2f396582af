"""Faults of the KRaft controller quorum."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from runrecord.schedule_cluster import MAX_SPARES, MAX_VOTERS, Cluster
from runrecord.schedule_fields import is_int
from runrecord.steps.base import (
    StepKind,
    checked,
)

QUORUM_ACTIONS = ("kill", "restart", "pause", "resume", "isolate")
ACTIVE = "active"  # the quorum leader when the step runs


def _check_quorum_action(value: Any) -> tuple[Any, str | None]:
    if value in QUORUM_ACTIONS:
        return value, None
    return None, f"must be one of {', '.join(QUORUM_ACTIONS)}"


MAX_CONTROLLER = MAX_VOTERS + MAX_SPARES


def check_voter(value: Any) -> tuple[Any, str | None]:
    if value == ACTIVE or (is_int(value) and 1 <= value <= MAX_CONTROLLER):
        return value, None
    return None, f'must be "{ACTIVE}" or a controller number (1 to {MAX_CONTROLLER})'


def controller_problems(
    cluster: Cluster | None, number: Any, what: str
) -> Iterator[tuple[str, str]]:
    """What a step about the controller quorum needs of the cluster: KRaft, and the
    controller it names (by number: 1 is c1)."""
    if cluster is None:
        return
    if cluster.mode != "kraft":
        yield "kind", f"{what} needs KRaft (cluster.mode kraft)"
    elif isinstance(number, int) and number > cluster.controller_nodes:
        yield "voter", f"the cluster has {cluster.controller_nodes} controller(s)"


@dataclass(frozen=True)
class Quorum(StepKind):
    """KRaft: a fault of the controller quorum. `action`: kill (SIGKILL), restart, pause,
    resume, or isolate (cut the voter off from the other voters until a `heal`); `voter`:
    "active" (the quorum leader when the step runs) or a voter by number (1 is c1)."""

    KIND: ClassVar[str] = "quorum"
    action: str = field(metadata=checked(_check_quorum_action))
    voter: str | int = field(default=ACTIVE, metadata=checked(check_voter))

    def describe(self) -> str:
        who = "the active controller" if self.voter == ACTIVE else f"voter {self.voter}"
        return f"{self.action} {who}"

    def problems(self, cluster: Cluster | None) -> Iterator[tuple[str, str]]:
        yield from controller_problems(cluster, self.voter, "a quorum step")
