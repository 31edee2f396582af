"""Leader elections an operator asks for: preferred, and unclean."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from runrecord.steps.base import (
    Role,
    StepKind,
    Target,
    role_name,
    target_field,
)

if TYPE_CHECKING:
    from runrecord.schedule_cluster import Cluster


@dataclass(frozen=True)
class ElectPreferred(StepKind):
    """Move leadership to the preferred replica (the first of the assignment)."""

    KIND: ClassVar[str] = "elect-preferred"

    def describe(self) -> str:
        return "preferred election"


@dataclass(frozen=True)
class ElectUnclean(StepKind):
    """Elect an out-of-sync replica while no ISR member is alive. Only in schedules whose
    topic config enables unclean leader election."""

    KIND: ClassVar[str] = "elect-unclean"
    target: Target = field(default=Role.OUT_OF_SYNC, metadata=target_field())

    def describe(self) -> str:
        return f"unclean election of {role_name(self.target)}"

    def problems(self, cluster: Cluster | None) -> Iterator[tuple[str, str]]:
        if cluster is not None and not cluster.topic_config.unclean_leader_election_enable:
            yield (
                "kind",
                (
                    "an unclean election needs cluster.topic_config."
                    "unclean.leader.election.enable set to true"
                ),
            )
