"""Reassignments of the schedule's partition (KIP-455; KRaft)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from runrecord.steps.base import (
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
class Reassign(StepKind):
    """Reassign the schedule's partition (KIP-455; KRaft): `add` a broker that holds no
    replica (appended last), `remove` a replica, and or `prefer` a replica (moved first,
    the preferred leader). The controller adds the new replicas, which catch up from the
    leader and join the ISR; then it drops the removed ones (a removed leader resigns). The
    step waits for that where the new replicas can catch up, and otherwise leaves it in
    flight. With `throttle`, replication of the partition's replicas is throttled as an
    operator's reassignment is (`kafka-reassign-partitions --throttle`)."""

    KIND: ClassVar[str] = "reassign"
    add: Target | None = field(default=None, metadata=target_field())
    remove: Target | None = field(default=None, metadata=target_field())
    prefer: Target | None = field(default=None, metadata=target_field())
    throttle: bool | None = field(default=None, metadata=checked(check_flag))

    def describe(self) -> str:
        parts = [f"{what} {role_name(t)}" for what, t in
                 (("add", self.add), ("remove", self.remove), ("prefer", self.prefer))
                 if t is not None]  # fmt: skip
        how = ", throttled" if self.throttle else ""
        return f"reassign: {', '.join(parts)}{how}"

    @property
    def leaves_behind(self) -> str | None:
        return "a reassignment throttled replication on the brokers" if self.throttle else None

    def problems(self, cluster: Cluster | None) -> Iterator[tuple[str, str]]:
        if self.add is None and self.remove is None and self.prefer is None:
            yield "", "a reassignment names at least one of add, remove and prefer"
        if cluster is not None and cluster.mode != "kraft":
            # The ZooKeeper-mode controller bumps the leader epoch at a reassignment's
            # start, end and each removal (KafkaController.onPartitionReassignment), which
            # the model does not follow.
            yield "kind", "a reassignment step needs KRaft (cluster.mode kraft)"
