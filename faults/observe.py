"""A partition's state (leader, leader epoch, ISR, leader recovery state) from its source of
truth, and waits on it.

ZooKeeper mode reads the partition's state znode, keeping the znode version so that a missed
write shows up as a gap. KRaft mode reads the controllers' metadata log from disk: its
PartitionRecord and PartitionChangeRecord entries are the state's history.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from fixtures.cluster import Cluster
from fixtures.waiting import wait_until

RECOVERED = "RECOVERED"
RECOVERING = "RECOVERING"


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int  # -1 when the partition has no leader
    leader_epoch: int | None
    isr: tuple[int, ...]
    recovery_state: str  # RECOVERED or RECOVERING (KIP-704); a missing field reads RECOVERED
    version: int | None  # znode version (ZooKeeper) or metadata log offset (KRaft)
    source: str

    def __str__(self) -> str:
        return (
            f"{self.topic}-{self.partition}: leader {self.leader} epoch {self.leader_epoch} "
            f"isr {list(self.isr)} {self.recovery_state} (v{self.version}, {self.source})"
        )


def state_path(topic: str, partition: int) -> str:
    return f"/brokers/topics/{topic}/partitions/{partition}/state"


def parse_zk_state(topic: str, partition: int, data: bytes, version: int) -> PartitionState:
    state = json.loads(data)
    # KIP-704 as implemented writes "leader_recovery_state": 1 only while RECOVERING; an
    # absent field means RECOVERED (KAFKA-13587).
    recovering = state.get("leader_recovery_state", 0) == 1
    return PartitionState(
        topic,
        partition,
        int(state["leader"]),
        int(state["leader_epoch"]),
        tuple(sorted(state["isr"])),
        RECOVERING if recovering else RECOVERED,
        version,
        "zk",
    )


def partition_state(cluster: Cluster, topic: str, partition: int = 0) -> PartitionState:
    if cluster.mode == "zk":
        data, stat = cluster.zk_client().get(state_path(topic, partition))
        return parse_zk_state(topic, partition, data, stat.version)
    return _kraft_state(cluster, topic, partition)


def _kraft_state(cluster: Cluster, topic: str, partition: int) -> PartitionState:
    from faults.metadata import latest_partition_state

    return latest_partition_state(cluster, topic, partition)


def wait_state(
    cluster: Cluster,
    topic: str,
    ok: Callable[[PartitionState], bool],
    *,
    what: str,
    partition: int = 0,
    timeout: float = 60.0,
) -> PartitionState:
    return wait_until(
        lambda: partition_state(cluster, topic, partition),
        ok,
        what=f"{topic}-{partition}: {what}",
        timeout=timeout,
        describe=str,
    )
