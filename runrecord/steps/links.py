"""The links between nodes: a follower held back from its leader, a broker's AlterPartition
requests held, a cut, a slow link, a session expired by a cut from the quorum, and heals."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from runrecord.schedule_fields import int_in
from runrecord.steps.base import (
    Endpoint,
    Role,
    StepKind,
    Target,
    checked,
    role_name,
    target_field,
)

if TYPE_CHECKING:
    from runrecord.schedule_cluster import Cluster

MAX_RATE = 100_000  # KB/s: beyond what the cluster's bridge is slowed by

_check_rate = int_in(1, MAX_RATE, f"must be a rate in KB/s from 1 to {MAX_RATE}")


@dataclass(frozen=True)
class HoldBack(StepKind):
    """Cut a follower in the ISR off from the leader; it stays in the ISR as long as
    replica.lag.time.max.ms allows (faults.replication.hold_back)."""

    KIND: ClassVar[str] = "hold-back"
    target: Target = field(default=Role.FOLLOWER_IN_ISR, metadata=target_field())

    def describe(self) -> str:
        return f"hold back {role_name(self.target)}"


@dataclass(frozen=True)
class HoldAlterPartition(StepKind):
    """Hold a broker's AlterPartition requests (its ISR changes) on their way to the
    controller until a `heal` of every cut, while the rest of its traffic flows: the
    controller keeps the ISR it had, and the held request lands late, with what it said
    when it was sent (KIP-903's delayed AlterPartition)."""

    KIND: ClassVar[str] = "hold-alter-partition"
    target: Target = field(default=Role.LEADER, metadata=target_field())

    def describe(self) -> str:
        return f"hold the AlterPartition requests of {role_name(self.target)}"


@dataclass(frozen=True)
class Cut(StepKind):
    """Cut the link between two nodes, both ways; `b` may be "quorum" (ZooKeeper or the
    KRaft controllers)."""

    KIND: ClassVar[str] = "cut"
    a: Target = field(metadata=target_field())
    b: Endpoint = field(metadata=target_field("endpoint"))

    def describe(self) -> str:
        return f"cut {role_name(self.a)} from {role_name(self.b)}"

    def problems(self, cluster: Cluster | None) -> Iterator[tuple[str, str]]:
        if self.a == self.b:
            yield "b", "a link needs two different ends"


@dataclass(frozen=True)
class Slow(StepKind):
    """Shape what broker `a` sends to broker `b` to `rate` KB/s until a heal; nothing is
    lost, only late (faults.slow_link)."""

    KIND: ClassVar[str] = "slow"
    a: Target = field(metadata=target_field())
    b: Target = field(metadata=target_field())
    rate: int = field(metadata=checked(_check_rate))

    def describe(self) -> str:
        return f"slow {role_name(self.a)} to {role_name(self.b)} to {self.rate} KB/s"


@dataclass(frozen=True)
class Heal(StepKind):
    """Heal the link between `a` and `b`, or with neither, every cut (hold-backs, session
    cuts, slow links and held AlterPartition requests included)."""

    KIND: ClassVar[str] = "heal"
    a: Target | None = field(default=None, metadata=target_field())
    b: Endpoint | None = field(default=None, metadata=target_field("endpoint"))

    def describe(self) -> str:
        if self.a is None:
            return "heal every cut"
        return f"heal {role_name(self.a)} - {role_name(self.b)}"

    def problems(self, cluster: Cluster | None) -> Iterator[tuple[str, str]]:
        if (self.a is None) != (self.b is None):
            yield "", "a heal names both ends of a link (a and b) or neither (heal every cut)"
        if self.a is not None and self.a == self.b:
            yield "b", "a link needs two different ends"


@dataclass(frozen=True)
class ExpireSession(StepKind):
    """Cut a broker off from ZooKeeper until its session expires (KRaft: until the
    controller fences it); it stays cut off, a zombie, until healed."""

    KIND: ClassVar[str] = "expire-session"
    target: Target = field(default=Role.LEADER, metadata=target_field())

    def describe(self) -> str:
        return f"expire the session of {role_name(self.target)}"
