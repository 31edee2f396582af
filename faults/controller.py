"""Controller faults: find the active controller (the ZooKeeper-mode controller broker, or
the KRaft quorum leader), then kill or isolate it and wait for a successor."""

from __future__ import annotations

import json

from faults import network, process
from faults.timeline import Timeline
from fixtures import kraft
from fixtures.cluster import Cluster
from fixtures.errors import LogforkError, NotReached
from fixtures.nodes import Node
from fixtures.waiting import WaitTimeout, wait_until


def active_controller(cluster: Cluster) -> Node:
    if cluster.mode == "kraft":
        return kraft.active_controller(cluster)
    data, _ = cluster.zk_client().get("/controller")
    return cluster.broker(int(json.loads(data)["brokerid"]))


def _await_successor(cluster: Cluster, old: Node, timeout: float) -> Node:
    def probe() -> Node | None:
        try:
            return active_controller(cluster)
        except (LogforkError, OSError, ValueError) as exc:
            raise RuntimeError(f"no controller: {exc}") from None

    try:
        return wait_until(
            probe,
            lambda n: n is not None and n is not old,
            what=f"a controller other than {old.name}",
            timeout=timeout,
            describe=lambda n: n.name if n else None,
        )
    except WaitTimeout as exc:
        raise NotReached(f"a new controller after {old.name} failed", str(exc.last)) from None


def kill_controller(
    cluster: Cluster, *, timeline: Timeline | None = None, timeout: float = 90.0
) -> tuple[Node, Node]:
    """SIGKILL the active controller; returns (old, new)."""
    old = active_controller(cluster)
    process.kill(cluster, old, timeline)
    new = _await_successor(cluster, old, timeout)
    if timeline is not None:
        timeline.record("election", "controller", old=old.name, new=new.name)
    return old, new


def isolate_controller(
    cluster: Cluster, *, timeline: Timeline | None = None, timeout: float = 90.0
) -> tuple[network.Cut, Node, Node]:
    """Cut the active controller off from every other node; returns (cut, old, new)."""
    old = active_controller(cluster)
    cut = network.isolate(cluster, old, timeline=timeline)
    try:
        new = _await_successor(cluster, old, timeout)
    except NotReached:
        cut.heal()
        raise
    if timeline is not None:
        timeline.record("election", "controller", old=old.name, new=new.name)
    return cut, old, new
