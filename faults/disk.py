"""Disk faults: a broker's disks replaced by empty ones.

A broker that fails hard and comes back on new disks has lost every replica it held, and
its metadata: `meta.properties` too (a KRaft node's start script formats it again, with
the cluster's id; a ZooKeeper-mode broker writes a new one). KIP-903's scenario is such a
broker joining an ISR on the strength of a request its previous incarnation caused.
"""

from __future__ import annotations

import shutil

from fixtures.cluster import Cluster
from fixtures.errors import NotReached
from fixtures.nodes import Node


def replace_disks(cluster: Cluster, node: Node) -> None:
    """Empty every log dir of a stopped node; checks that nothing is left."""
    if node.status() == "running":
        raise NotReached(f"{node.name} stopped before its disks are replaced", "running")
    for log_dir in node.log_dirs:
        for child in log_dir.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    left = [str(c) for d in node.log_dirs for c in d.iterdir()]
    if left:
        raise NotReached(f"{node.name}'s log dirs empty", f"left: {left[:5]}")
    cluster.timeline.record("fault", "disks-replaced", node=node.name, dirs=len(node.log_dirs))
