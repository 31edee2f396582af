"""KRaft observation from the controllers' own disks.

The metadata log is the source of truth for partition state in KRaft (KIP-631), and its
segments are bind-mounted on the host, so logfork reads them with the checker's decoder
instead of asking a broker whose view may lag. The quorum leader is read from each
controller's `quorum-state` file (KIP-595), keeping the one with the highest epoch.
"""

from __future__ import annotations

import json
from pathlib import Path

from checkers.metadata_log import MetadataLog, PartitionStateEvent, decode_metadata_log
from faults.observe import RECOVERED, RECOVERING, PartitionState
from fixtures.cluster import Cluster
from fixtures.errors import LogforkError
from fixtures.nodes import Node

METADATA_DIR = "__cluster_metadata-0"


def quorum_state(node: Node) -> dict | None:
    path = node.data_dir / METADATA_DIR / "quorum-state"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # not written yet, or caught mid-rewrite


def active_controller(cluster: Cluster) -> Node:
    """The controller that leads the KRaft quorum in the highest epoch any voter recorded."""
    best: tuple[int, int] | None = None
    for node in cluster.controllers:
        state = quorum_state(node)
        if state and state.get("leaderId", -1) >= 0:
            candidate = (int(state["leaderEpoch"]), int(state["leaderId"]))
            best = max(best, candidate) if best else candidate
    if best is None:
        raise LogforkError("no KRaft controller has recorded a quorum leader yet")
    by_id = {n.node_id: n for n in cluster.controllers}
    return by_id[best[1]]


def metadata_log(cluster: Cluster, node: Node | None = None) -> MetadataLog:
    """The metadata log as one controller has it on disk (default: the quorum leader)."""
    node = node or active_controller(cluster)
    return decode_metadata_log(Path(node.data_dir / METADATA_DIR))


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
