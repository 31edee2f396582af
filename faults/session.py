"""Session expiry: a broker loses its ZooKeeper session (or, in KRaft, is fenced).

ZooKeeper mode: the broker is cut off from ZooKeeper until ZooKeeper itself expires the
session. That is proven by the broker's ephemeral `/brokers/ids/<id>` znode disappearing and
by the controller acting on it: every partition the broker led gets another leader. A
broker cannot notice its own expiry while cut off (the client learns it on reconnect), so
the broker keeps believing it leads: exactly the zombie of KAFKA-6361 and KIP-359.

KRaft: the broker is cut off from the controllers until the active controller fences it
(no heartbeat within `broker.session.timeout.ms`), which removes it from the metadata that
brokers serve and moves its leaderships.

Heal removes the cut and waits for the broker to register again.
"""

from __future__ import annotations

from dataclasses import dataclass

from basics.errors import NotReached
from faults import network
from fixtures.cluster import Cluster
from fixtures.nodes import Node
from fixtures.waiting import STEADY, WaitTimeout, wait_until
from observe.controller import active_controller
from observe.state import PartitionState, partition_state, partitions


def partitions_in_isr(cluster: Cluster, broker_id: int) -> list[tuple[str, int]]:
    """Partitions (of user topics) whose ISR includes the broker (as leader or follower)."""
    return [tp for tp in partitions(cluster) if broker_id in partition_state(cluster, *tp).isr]


@dataclass
class Expiry:
    cluster: Cluster
    broker: Node
    cut: network.LinkCut
    moved: dict[tuple[str, int], int]  # partition -> its leader once the controller acted

    def heal(self, timeout: float = 120.0) -> None:
        self.cut.heal()
        broker_id = self.broker.node_id
        what = "registered in ZooKeeper again" if self.cluster.mode == "zk" else "unfenced again"
        try:
            wait_until(
                self.cluster.registered_brokers,
                lambda ids: broker_id in ids,
                what=f"broker {broker_id} {what}",
                timeout=timeout,
                max_interval=STEADY,
                describe=sorted,
            )
        except WaitTimeout as exc:
            raise NotReached(f"broker {broker_id} {what}", f"live brokers {exc.last}") from None
        self.cluster.timeline.record("heal", "session", broker=broker_id)

    def __enter__(self) -> Expiry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.heal()


def await_loss(
    cluster: Cluster,
    broker_id: int,
    before: dict[tuple[str, int], PartitionState],
    what: str,
    *,
    controller: int | None = None,
    timeout: float = 120.0,
) -> dict[tuple[str, int], int]:
    """Wait until the cluster has lost the broker (its session expired, or it was fenced)
    and the controller acted on every partition of `before` (their states when the broker
    was still there); returns each partition's leader then. `controller`: the ZooKeeper-mode
    controller before the loss (`zk_controller`). Raises WaitTimeout."""
    wait_until(
        cluster.registered_brokers,
        lambda ids: broker_id not in ids,
        what=what,
        timeout=timeout,
        max_interval=STEADY,
        describe=sorted,
    )
    if cluster.mode == "zk" and not cluster.registered_brokers():
        # No broker holds a session any more, so none can be the controller: nobody acts.
        return {tp: old.leader for tp, old in before.items()}
    # The controller acts on the loss: partitions the broker led get another leader;
    # where it followed, ZooKeeper mode shows the controller's write as a new state
    # version (the leader may add a still-fetching follower straight back to the ISR),
    # and KRaft keeps a fenced broker out of every ISR (KIP-841).
    moved = {}
    for tp, old in before.items():

        def acted(s: PartitionState, old: PartitionState = old) -> bool:
            if old.leader == broker_id:
                return s.leader != broker_id
            if cluster.mode == "zk" and broker_id == controller:
                # The lost broker was the controller: its successor reads the live brokers
                # from /brokers/ids as it takes over (KafkaController.
                # initializeControllerContext), no BrokerChange reports the loss, and
                # where the broker only followed, nothing is written.
                return True
            if cluster.mode == "zk":
                return (s.version or 0) > (old.version or 0)
            return broker_id not in s.isr

        state = wait_until(
            lambda t=tp: partition_state(cluster, *t),
            acted,
            what=f"the controller to act on {tp[0]}-{tp[1]} after losing broker {broker_id}",
            timeout=timeout,
            max_interval=STEADY,
            describe=str,
        )
        moved[tp] = state.leader
    return moved


def zk_controller(cluster: Cluster) -> int | None:
    """ZooKeeper mode: the broker acting as controller now (None in KRaft mode)."""
    return active_controller(cluster).node_id if cluster.mode == "zk" else None


def states_in_isr(cluster: Cluster, broker_id: int) -> dict[tuple[str, int], PartitionState]:
    """The states of the partitions whose ISR includes the broker, as they are now."""
    return {tp: partition_state(cluster, *tp) for tp in partitions_in_isr(cluster, broker_id)}


def expire_session(
    cluster: Cluster, broker: Node, *, timeout: float = 120.0, mirror: bool = False
) -> Expiry:
    """`mirror`: the cut's rules also go into the quorum's namespaces (faults.network)."""
    broker_id = broker.node_id
    assert broker_id is not None
    before = states_in_isr(cluster, broker_id)
    controller = zk_controller(cluster)
    if cluster.mode == "zk":
        cut = network.isolate(cluster, broker, [cluster.zookeeper], mirror=mirror)
        what = f"ZooKeeper to expire broker {broker_id}'s session (/brokers/ids/{broker_id} gone)"
    else:
        cut = network.isolate(cluster, broker, cluster.controllers, mirror=mirror)
        what = f"the controller to fence broker {broker_id}"
    try:
        moved = await_loss(cluster, broker_id, before, what, controller=controller, timeout=timeout)
    except WaitTimeout as exc:
        cut.heal()
        raise NotReached(exc.what, str(exc.last)) from None
    cluster.timeline.record(
        "fault",
        "session-expired",
        broker=broker_id,
        moved={f"{t}-{p}": leader for (t, p), leader in moved.items()},
    )
    return Expiry(cluster, broker, cut, moved)
