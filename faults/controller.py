"""Controller faults: kill or isolate the active controller (the ZooKeeper-mode controller
broker, or the KRaft quorum leader) and wait for a successor."""

from __future__ import annotations

from basics.errors import LogforkError, NotReached, NotYet
from faults import network, process
from fixtures.cluster import Cluster
from fixtures.nodes import Node
from fixtures.waiting import WaitTimeout, wait_until
from observe.controller import active_controller


def await_successor(cluster: Cluster, old: Node, timeout: float = 90.0) -> Node:
    """A controller other than `old`, once one is active; else not reached."""

    def probe() -> Node | None:
        try:
            return active_controller(cluster)
        except (LogforkError, ValueError) as exc:  # no leader recorded, or a znode mid-change
            raise NotYet(f"no controller: {exc}") from None

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


def _elected(cluster: Cluster, old: Node, new: Node, fault: str) -> None:
    cluster.timeline.record("election", "controller", fault=fault, old=old.name, new=new.name)


def kill_controller(cluster: Cluster, *, timeout: float = 90.0) -> tuple[Node, Node]:
    """SIGKILL the active controller; returns (old, new). The old one stays down."""
    old = active_controller(cluster)
    process.kill(cluster, old)
    new = await_successor(cluster, old, timeout)
    _elected(cluster, old, new, "kill")
    return old, new


def pause_controller(cluster: Cluster, *, timeout: float = 90.0) -> tuple[Node, Node]:
    """Freeze the active controller until another takes over, then resume it; returns
    (old, new)."""
    old = active_controller(cluster)
    process.pause(cluster, old)
    try:
        new = await_successor(cluster, old, timeout)
    finally:
        process.resume(cluster, old)
    _elected(cluster, old, new, "pause")
    return old, new


def isolate_controller(
    cluster: Cluster, peers: list[Node] | None = None, *, timeout: float = 90.0
) -> tuple[network.LinkCut, Node, Node]:
    """Cut the active controller off from `peers` (default: every other node) until
    another takes over; returns (cut, old, new) with the cut still in force."""
    old = active_controller(cluster)
    cut = network.isolate(cluster, old, peers)
    try:
        new = await_successor(cluster, old, timeout)
    except NotReached:
        cut.heal()
        raise
    _elected(cluster, old, new, "partition")
    return cut, old, new
