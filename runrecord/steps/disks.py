"""A broker's log dirs (KIP-112, KIP-113): a replica moved into another, a dir failing."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from runrecord.steps.base import (
    Role,
    StepKind,
    Target,
    check_flag,
    checked,
    role_name,
    target_field,
)

if TYPE_CHECKING:
    from runrecord.schedule_cluster import Cluster


@dataclass(frozen=True)
class MoveDir(StepKind):
    """Move the target's replica of the schedule's partition into its broker's other log
    dir (KIP-113), waiting for the swap; with `throttle`, the copy capped and not waited
    for. Needs two log dirs per broker (cluster.log_dirs)."""

    KIND: ClassVar[str] = "move-dir"
    target: Target = field(default=Role.FOLLOWER_IN_ISR, metadata=target_field())
    throttle: bool | None = field(default=None, metadata=checked(check_flag))

    @property
    def leaves_behind(self) -> str | None:
        # The throttle is a broker config, and a move left in flight goes on copying.
        return "a move between log dirs was left throttled, in flight" if self.throttle else None

    def problems(self, cluster: Cluster | None) -> Iterator[tuple[str, str]]:
        yield from _two_log_dirs(cluster, "a move between log dirs")

    def describe(self) -> str:
        how = ", throttled, not waiting for it" if self.throttle else ""
        return f"move {role_name(self.target)}'s replica to its other log dir{how}"


@dataclass(frozen=True)
class FailDir(StepKind):
    """The log dir holding the target's replica of the schedule's partition fails (EIO)
    while its broker runs on (KIP-112, KIP-858). For the schedule the broker is stopped
    until a `restart` (or the heal) brings the disk back. Needs cluster.log_dirs 2."""

    KIND: ClassVar[str] = "fail-dir"
    target: Target = field(default=Role.FOLLOWER_IN_ISR, metadata=target_field())

    @property
    def needs_disks(self) -> bool:
        return True

    def problems(self, cluster: Cluster | None) -> Iterator[tuple[str, str]]:
        yield from _two_log_dirs(cluster, "a failed log dir")

    def describe(self) -> str:
        return f"fail the log dir of {role_name(self.target)}'s replica"


def _two_log_dirs(cluster: Cluster | None, what: str) -> Iterator[tuple[str, str]]:
    if cluster is not None and cluster.log_dirs < 2:
        yield "kind", f"{what} needs cluster.log_dirs 2"
