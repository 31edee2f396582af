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
