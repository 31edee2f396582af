"""Process faults: kill with a signal, restart on the same data, pause and resume.

Each returns only once Docker reports the effect (the process is gone, frozen or running
again); a fault that did not take effect raises NotReached.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from basics.errors import NotReached
from faults import network
from fixtures.cluster import Cluster
from fixtures.nodes import Node
from fixtures.waiting import STEADY, Aborted, WaitTimeout, wait_until


class Exited(Aborted):
    """A restarted node exited before it served again: what its release did, which the
    caller may declare (a halt the release is known for) or report."""

    def __init__(self, message: str, node: Node) -> None:
        super().__init__(message)
        self.node = node


def await_status(node: Node, wanted: set[str], what: str, timeout: float = 30.0) -> None:
    try:
        wait_until(
            node.status, lambda s: s in wanted, what=what, timeout=timeout, max_interval=STEADY
        )
    except WaitTimeout as exc:
        raise NotReached(f"{node.name} {what}", f"status {exc.last}") from None


def kill(cluster: Cluster, node: Node, *, signal: str = "SIGKILL") -> None:
    """Deliver a real signal to the node's process. SIGKILL is a crash without any shutdown
    work; SIGTERM runs Kafka's controlled shutdown."""
    if node.status() != "running":
        raise NotReached(f"{node.name} running before {signal}", f"status {node.status()}")
    node.kill(signal)
    # SIGTERM leaves Kafka time for a controlled shutdown (it moves leaders away first).
    await_status(
        node, {"exited"}, f"exited after {signal}", timeout=120 if signal == "SIGTERM" else 30
    )
    cluster.timeline.record(
        "fault", "kill", node=node.name, signal=signal, exit_code=node.exit_code()
    )


def restart(
    cluster: Cluster,
    node: Node,
    *,
    timeout: float = 120.0,
    serving: bool = True,
    on_running: Callable[[], None] | None = None,
) -> None:
    """Start a stopped node again on its own data dirs and wait until it serves
    (`serving=False`: until it registers; a ZooKeeper-mode broker the controller cannot
    reach never learns the cluster's metadata, so it cannot serve). `on_running` is called
    as soon as its container runs, while its process starts: for what its new network
    namespace needs before the process talks to anyone (the rules of a cut).

    A SIGKILLed ZooKeeper-mode broker leaves its ephemeral registration behind until its
    session expires, and a broker that starts meanwhile fails to register and shuts down;
    so the old registration must be gone first, and the new one must be this process's.
    """
    zk_path = f"/brokers/ids/{node.node_id}"
    zk = cluster.zk_client() if cluster.mode == "zk" and node.is_broker else None
    if zk is not None:
        wait_until(
            lambda: zk.exists(zk_path),
            lambda stat: stat is None,
            timeout=timeout,
            what=f"broker {node.node_id}'s previous session to expire",
        )
    node.start()
    await_status(node, {"running"}, "running again")
    if on_running is not None:
        on_running()
    try:
        _await_serving(cluster, node, zk, zk_path, timeout=timeout, serving=serving)
    except Aborted as exc:
        if node.status() == "running":
            raise
        raise Exited(str(exc), node) from None
    cluster.timeline.record("heal", "restart", node=node.name)


def _await_serving(
    cluster: Cluster, node: Node, zk: Any, zk_path: str, *, timeout: float, serving: bool
) -> None:
    """A restarted broker registered again (and serving); each wait gives up at once when
    its process exits."""
    if node.is_broker:

        def dead() -> str | None:
            return None if node.status() == "running" else f"{node.name} exited:\n{node.tail_log()}"

        if zk is not None:
            wait_until(
                lambda: zk.exists(zk_path),
                lambda stat: stat is not None,
                what=f"broker {node.node_id} registered again",
                timeout=timeout,
                max_interval=STEADY,
                abort=dead,
            )
        # Registered is not serving: the broker answers a metadata request listing itself.
        if serving:
            wait_until(
                lambda: cluster.metadata_seen_by(node.node_id).brokers,
                lambda ids: node.node_id in ids,
                what=f"broker {node.node_id} serving again after restart",
                timeout=timeout,
                max_interval=STEADY,
                describe=sorted,
                abort=dead,
            )
        wait_until(
            cluster.registered_brokers,
            lambda ids: node.node_id in ids,
            what=f"broker {node.node_id} registered again after restart",
            timeout=timeout,
            describe=sorted,
            abort=dead,
        )


def pause(cluster: Cluster, node: Node) -> None:
    """Freeze every process of the node (cgroup freezer): no CPU, no timers, no replies.
    Requests sent to it queue in its sockets and are served on resume."""
    node.pause()
    await_status(node, {"paused"}, "paused")
    cluster.timeline.record("fault", "pause", node=node.name)


def resume(cluster: Cluster, node: Node) -> None:
    node.unpause()
    await_status(node, {"running"}, "running after resume")
    network.remove_deferred(node)  # what a heal could not remove while it was frozen
    cluster.timeline.record("heal", "resume", node=node.name)


def crash(cluster: Cluster, node: Node, *, timeout: float = 90.0) -> None:
    """SIGKILL a broker and wait until the cluster counts it gone: its ZooKeeper session
    expired, or the KRaft controller fenced it."""
    kill(cluster, node)
    try:
        wait_until(
            cluster.registered_brokers,
            lambda ids: node.node_id not in ids,
            what=f"broker {node.node_id} gone (session expired or fenced)",
            timeout=timeout,
            describe=sorted,
        )
    except WaitTimeout as exc:
        raise NotReached(exc.what, str(exc.last)) from None
