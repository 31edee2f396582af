"""A replica's log as the broker holds it on disk, read from the host (each node's log dir
is bind-mounted), for scenarios that check the exact batches a step left behind."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from checkers.lineage import Lineage, list_log_dir, read_partition

if TYPE_CHECKING:
    from fixtures.cluster import Cluster


def replica(cluster: Cluster, broker_id: int, topic: str, partition: int = 0) -> Lineage:
    """One replica's lineage, read from the broker's log dir on the host (an empty one when
    the broker holds no such partition yet)."""
    for log_dir in cluster.broker(broker_id).log_dirs:
        listing = list_log_dir(log_dir, topic=topic)
        for child, tp in listing.partitions:
            if tp == (topic, partition):
                return read_partition(Path(child), broker_id, tp, listing.offsets)
    return Lineage(topic, partition, broker_id)


def spans(lineage: Lineage) -> str:
    if not lineage.batches:
        return "(empty)"
    # v0/v1 messages carry no leader epoch (-1): show just the offsets.
    return " ".join(
        f"[{b.base_offset},{b.last_offset}]" + (f"e{b.leader_epoch}" if b.leader_epoch >= 0 else "")
        for b in lineage.batches
    )
