"""KRaft partition states from the quorum leader's metadata log (see fixtures.kraft)."""

from __future__ import annotations

from checkers.metadata_log import PartitionStateEvent
from faults.observe import RECOVERED, RECOVERING, PartitionState
from fixtures.cluster import Cluster
from fixtures.errors import LogforkError
from fixtures.kraft import METADATA_DIR, active_controller, metadata_log, quorum_state

__all__ = [
    "METADATA_DIR",
    "active_controller",
    "latest_partition_state",
    "metadata_log",
    "partition_history",
    "quorum_state",
]


def to_state(event: PartitionStateEvent, topic: str) -> PartitionState:
    return PartitionState(
        topic,
        event.partition,
        event.leader,
        event.leader_epoch,
        tuple(sorted(event.isr)),
        RECOVERING if event.recovering else RECOVERED,
        event.offset,
        "kraft",
    )


def latest_partition_state(cluster: Cluster, topic: str, partition: int) -> PartitionState:
    log = metadata_log(cluster)
    event = log.current(topic, partition)
    if event is None:
        raise LogforkError(f"{topic}-{partition} is not in the metadata log ({log.path})")
    return to_state(event, topic)


def partition_history(cluster: Cluster, topic: str, partition: int) -> list[PartitionState]:
    return [to_state(e, topic) for e in metadata_log(cluster).history(topic, partition)]
