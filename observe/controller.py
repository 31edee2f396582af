"""The active controller: the ZooKeeper-mode controller broker (the /controller znode), or
the KRaft quorum leader (the controllers' quorum-state files)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from observe import kraft

if TYPE_CHECKING:
    from fixtures.cluster import Cluster
    from fixtures.nodes import Node


def active_controller(cluster: Cluster) -> Node:
    if cluster.mode == "kraft":
        return kraft.quorum_leader_node(cluster.controllers)
    data, _ = cluster.zk_client().get("/controller")
    return cluster.broker(int(json.loads(data)["brokerid"]))


def controller_bidders_unwatched(cluster: Cluster) -> list[int]:
    """ZooKeeper mode: the registered brokers whose session holds no watch on /controller
    (ZooKeeper's `wchp` listing). A broker learns that /controller went, and bids for it,
    only through that watch; each broker sets it again after every change it handles."""
    zk = cluster.zk_client()
    watching: set[int] = set()
    path = None
    for line in zk.command(b"wchp").splitlines():
        if line.startswith("/"):
            path = line.strip()
        elif path == "/controller" and line.strip().startswith("0x"):
            watching.add(int(line.strip(), 16))
    missing = []
    for child in zk.get_children("/brokers/ids"):
        stat = zk.exists(f"/brokers/ids/{child}")
        if stat is not None and stat.ephemeralOwner not in watching:
            missing.append(int(child))
    return sorted(missing)
