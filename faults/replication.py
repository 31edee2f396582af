"""Holding a follower back: it stops replicating but stays in the ISR.

A follower leaves the ISR only after `replica.lag.time.max.ms` without catching up, so a cut
between it and its leader that is shorter than that leaves an ISR member that lacks the
leader's newest batches. That is the precondition of KIP-101 scenario 1 and KIP-279
scenario 1. Scenarios set the lag time high; heal verifies the follower never left the ISR,
otherwise the state the scenario relied on did not exist.
"""

from __future__ import annotations

from dataclasses import dataclass

from basics.errors import NotReached
from faults import network
from fixtures.cluster import Cluster
from fixtures.nodes import Node
from observe.state import partition_state


@dataclass
class HeldBack:
    cluster: Cluster
    topic: str
    partition: int
    follower: Node
    cut: network.LinkCut

    def assert_in_isr(self) -> None:
        state = partition_state(self.cluster, self.topic, self.partition)
        if self.follower.node_id not in state.isr:
            raise NotReached(
                f"held-back follower {self.follower.node_id} still in the ISR", str(state)
            )

    def release(self) -> None:
        self.assert_in_isr()
        self.cut.heal()
        self.cluster.timeline.record("heal", "hold-back", follower=self.follower.name)

    def __enter__(self) -> HeldBack:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.release()
        else:
            self.cut.heal()


def hold_back(
    cluster: Cluster,
    topic: str,
    follower: Node,
    leader: Node,
    *,
    partition: int = 0,
    mirror: bool = False,
) -> HeldBack:
    """`mirror`: the cut's rules also go into the leader's namespace (faults.network)."""
    state = partition_state(cluster, topic, partition)
    if state.leader != leader.node_id or follower.node_id not in state.isr:
        raise NotReached(
            f"broker {leader.node_id} leading {topic}-{partition} with follower "
            f"{follower.node_id} in the ISR",
            str(state),
        )
    cut = network.partition(cluster, follower, leader, mirror=mirror)
    cluster.timeline.record("fault", "hold-back", follower=follower.name, leader=leader.name)
    return HeldBack(cluster, topic, partition, follower, cut)
