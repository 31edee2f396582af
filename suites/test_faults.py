"""Every fault and its heal, shown to take effect on a real cluster.

After each test no iptables rule, paused container or stopped container is left: faults heal
what they did, and the check below is what proves it.
"""

import contextlib

import pytest
from confluent_kafka import Producer
from kazoo.exceptions import NoNodeError

from basics.errors import NotReached
from checkers.checkpoints import read_offset_checkpoint
from checkers.segments import scan_partition
from faults import controller, elections, network, power, process, replication, session
from fixtures.ci import require
from fixtures.waiting import wait_until
from observe.controller import active_controller
from observe.state import partition_state, wait_state

pytestmark = pytest.mark.cluster


def produce(cluster, topic, n, acks="all", only=None):
    producer = Producer({**cluster.client_config(only), "acks": acks, "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, value=f"{i}".encode())
    assert producer.flush(60) == 0


def log_end(node, topic, partition=0):
    scan = scan_partition(node.data_dir / f"{topic}-{partition}")
    return scan.batches[-1].last_offset + 1 if scan.batches else 0


def assert_healed(cluster):
    for node in cluster.nodes.values():
        assert node.status() == "running", f"{node.name} left {node.status()}"
        assert network.rules_in(node) == [], f"{node.name} kept iptables rules"


def test_faults_process_and_network(cluster_factory):
    cluster = cluster_factory()
    b1, b2, b3 = (cluster.broker(i) for i in (1, 2, 3))
    cluster.create_topic("t", [[1, 2, 3]])

    process.pause(cluster, b3)
    assert b3.status() == "paused"
    produce(cluster, "t", 10, acks="1")  # the leader answers while a follower is frozen
    process.resume(cluster, b3)

    with network.partition(cluster, b1, b2):
        assert not network.reachable(cluster, b1, b2)
        assert not network.reachable(cluster, b2, b1)
        assert network.reachable(cluster, b1, b3)
    assert network.reachable(cluster, b1, b2)

    with network.partition(cluster, b1, b2, one_way=True) as cut:
        assert [r[0] for r in cut.rules] == ["INPUT"]
        assert not network.reachable(cluster, b2, b1)

    # Docker runs nothing in a frozen node: a heal meanwhile leaves its rules to its
    # resume, which removes them first.
    cut = network.partition(cluster, b3, b1, mirror=True)
    process.pause(cluster, b3)
    cut.heal()
    assert network.rules_in(b1) == []
    process.resume(cluster, b3)
    assert network.rules_in(b3) == [] and network.reachable(cluster, b3, b1)

    others = [n for n in cluster.nodes.values() if n is not b3]
    with network.isolate(cluster, b3):
        assert not any(network.reachable(cluster, b3, n) for n in others)
    assert all(network.reachable(cluster, b3, n) for n in others)

    for signal, code in (("SIGKILL", 137), ("SIGTERM", 143)):
        process.kill(cluster, b2, signal=signal)
        assert (b2.status(), b2.exit_code()) == ("exited", code)
        process.restart(cluster, b2)
    assert_healed(cluster)


def test_faults_session_expiry(cluster_factory, kafka_target):
    # A short session for the broker whose session expires, a long one for the others: only
    # the cut broker's session may expire.
    # The controller sits on broker 3, which no fault touches: a controller that loses its
    # own session fails over instead of acting on the expiry.
    zk = kafka_target.mode == "zk"
    short = {"zookeeper.session.timeout.ms": 6000} if zk else {}
    cluster = cluster_factory(
        broker_config={"zookeeper.session.timeout.ms": 30000} if zk else {},
        node_config={"b2": short, "b1": short},
        controller=3 if zk else None,
    )
    cluster.create_topic("t", [[1, 2, 3]])

    # A follower's session expires while the leader's does not.
    with session.expire_session(cluster, cluster.broker(2)) as expiry:
        assert 1 in cluster.registered_brokers() and 2 not in cluster.registered_brokers()
        assert expiry.moved[("t", 0)] == 1
        if kafka_target.mode == "kraft":  # a fenced broker cannot rejoin an ISR (KIP-841)
            assert 2 not in partition_state(cluster, "t").isr
    wait_state(cluster, "t", lambda s: s.isr == (1, 2, 3), what="ISR back to 1,2,3")

    # The leader's session expires: the controller moves leadership.
    before = partition_state(cluster, "t")
    with session.expire_session(cluster, cluster.broker(1)) as expiry:
        assert expiry.moved[("t", 0)] in (2, 3)
        after = partition_state(cluster, "t")
        assert after.leader_epoch > before.leader_epoch
    assert_healed(cluster)


def test_faults_elections(cluster_factory, kafka_target):
    # The controller stays on broker 1, which this test never stops.
    cluster = cluster_factory(controller=1 if kafka_target.mode == "zk" else None)
    cluster.create_topic("t", [[2, 3, 1]])
    cluster.create_topic("u", [[2, 3]], {"min.insync.replicas": 1})

    # A fault aimed at something that cannot happen says so.
    with pytest.raises(NotReached, match="leader 2 is alive"):
        elections.elect_unclean(cluster, "t", to=3)

    # Preferred: move leadership off broker 2, then elect it back.
    process.kill(cluster, cluster.broker(2))
    wait_state(
        cluster,
        "t",
        lambda s: s.leader in (1, 3) and 2 not in s.isr,
        what="leader moved",
        timeout=90,
    )
    process.restart(cluster, cluster.broker(2))
    before = wait_state(
        cluster, "t", lambda s: s.isr == (1, 2, 3), what="2 back in the ISR", timeout=90
    )
    after = elections.elect_preferred(cluster, "t")
    assert after.leader == 2 and after.leader_epoch > before.leader_epoch
    assert after.isr == (1, 2, 3)

    # Unclean: broker 3 falls out of the ISR of u, then u's only ISR member dies. Broker 2
    # rejoins u's ISR on its own schedule, not t's: killed before that, 3 would be u's last
    # ISR member and the partition offline (CI saw leader -1, ELR [3] on 4.4.0).
    wait_state(cluster, "u", lambda s: set(s.isr) == {2, 3}, what="2 back in u's ISR", timeout=90)
    process.kill(cluster, cluster.broker(3))
    wait_state(cluster, "u", lambda s: s.isr == (2,), what="ISR {2}", timeout=90)
    produce(cluster, "u", 5, acks="1")
    process.kill(cluster, cluster.broker(2))
    # Releases differ in what the state says once the last ISR member is gone (1.1.1 keeps
    # the dead leader in the znode); what matters is that no ISR member is alive.
    wait_until(
        cluster.registered_brokers, lambda ids: ids == {1}, what="only broker 1 alive", timeout=90
    )
    offline = partition_state(cluster, "u")
    process.restart(cluster, cluster.broker(3))
    if cluster.release.at_least(0, 11):
        after = elections.elect_unclean(cluster, "u", to=3)
    else:  # unclean elections are on by default before 0.11 (KIP-106): 3 is elected as it returns
        after = wait_state(cluster, "u", lambda s: s.leader == 3, what="3 elected", timeout=90)
    assert after.leader == 3 and after.leader_epoch > offline.leader_epoch
    process.restart(cluster, cluster.broker(2))
    if kafka_target.mode == "zk":
        # The controller goes to the broker named, and back (explore's reused clusters).
        for broker in (3, 1):
            elections.move_controller(cluster, broker)
            assert active_controller(cluster).node_id == broker
        # /controller deleted faster than the brokers bid for it can leave every bid lost
        # and no controller (from 1.1, most rounds); the move starts that election again.
        zk = cluster.zk_client()
        for _ in range(5):
            for _ in range(300):
                with contextlib.suppress(NoNodeError):
                    zk.delete("/controller")
            elections.move_controller(cluster, 1)
            assert active_controller(cluster).node_id == 1
            restarts = [e for e in cluster.timeline.events if e.name == "controller-restarted"]
            if restarts:
                break
        assert restarts or not cluster.release.at_least(1, 1)
    assert_healed(cluster)


def test_faults_controller(cluster_factory, kafka_target):
    cluster = cluster_factory(**({"controllers": 3} if kafka_target.mode == "kraft" else {}))
    old, new = controller.kill_controller(cluster)
    assert new is not old
    process.restart(cluster, old)
    old, new = controller.pause_controller(cluster)
    assert new is not old and old.status() == "running"
    cut, old, new = controller.isolate_controller(cluster)
    assert new is not old
    cut.heal()
    assert_healed(cluster)
    # Every fault recorded itself in the cluster's timeline.
    names = [(e.kind, e.name) for e in cluster.timeline.events]
    for event in (("fault", "kill"), ("fault", "pause"), ("heal", "resume"), ("fault", "cut")):
        assert event in names, names


def test_faults_power_loss_and_hold_back(cluster_factory):
    cluster = cluster_factory(broker_config={"replica.lag.time.max.ms": 120000})
    cluster.create_topic("p", [[1, 2, 3]])
    cluster.create_topic("h", [[1, 2]], {"min.insync.replicas": 1})

    # Hold a follower back: it stops replicating but stays in the ISR.
    produce(cluster, "h", 10)
    with replication.hold_back(cluster, "h", cluster.broker(2), cluster.broker(1)) as held:
        produce(cluster, "h", 10, acks="1")
        assert log_end(cluster.broker(1), "h") == 20
        assert log_end(cluster.broker(2), "h") == 10
        held.assert_in_isr()
    wait_state(cluster, "h", lambda s: s.isr == (1, 2), what="ISR {1,2}")

    # Power loss: the log is cut where it says, on a batch boundary at or below it.
    for _ in range(20):
        produce(cluster, "p", 10)  # 20 flushes make 20 small batches
    losses = power.power_loss(cluster, cluster.broker(3), cut_at={("p", 0): 95})
    loss = losses[("p", 0)]
    # Before 0.11 (message format v2, KIP-98) each uncompressed record is a message of its own.
    boundary = 90 if cluster.release.at_least(0, 11) else 95
    assert loss.end_before == 200 and loss.end_after == boundary
    assert log_end(cluster.broker(3), "p") == boundary
    process.restart(cluster, cluster.broker(3))
    wait_state(cluster, "p", lambda s: s.isr == (1, 2, 3), what="3 back in the ISR", timeout=90)

    # By default the tail after the recovery point is lost: the records past the last batch
    # boundary at or below the checkpointed recovery point are gone, and only they.
    produce(cluster, "p", 10)
    b2 = cluster.broker(2)
    wait_until(lambda: log_end(b2, "p"), lambda end: end == 210, what="broker 2 at 210")
    point = read_offset_checkpoint(b2.data_dir / power.RECOVERY_POINT).get(("p", 0), 0)
    before = scan_partition(b2.data_dir / "p-0").batches
    kept = [b for b in before if b.last_offset < point]
    expected = kept[-1].last_offset + 1 if kept else 0
    assert point < 210, "the recovery point caught up with the log end: nothing to lose"
    losses = power.power_loss(cluster, b2, topics={"p"})
    loss = losses[("p", 0)]
    assert (loss.cut_at, loss.end_before, loss.end_after) == (point, 210, expected)
    after = scan_partition(b2.data_dir / "p-0").batches
    assert [b.key for b in after] == [b.key for b in kept]
    process.restart(cluster, b2)
    assert_healed(cluster)


def test_faults_power_loss_on_disks(cluster_factory):
    """On crash-simulating filesystems a power loss keeps what was durable: here the first
    10 records, which the OS wrote back (`writeback`), and not the 10 after them, which no
    one synced; it records, per file, the bytes it dropped."""
    from fixtures.crashfs import unavailable

    require(unavailable())
    cluster = cluster_factory(power_model="unsynced")
    cluster.create_topic("d", [[1, 2, 3]])
    b3 = cluster.broker(3)
    produce(cluster, "d", 10)
    wait_until(lambda: log_end(b3, "d"), lambda end: end == 10, what="broker 3 at 10")
    power.writeback(cluster, b3)
    produce(cluster, "d", 10)
    wait_until(lambda: log_end(b3, "d"), lambda end: end == 20, what="broker 3 at 20")
    segment = scan_partition(b3.data_dir / "d-0").segments[0]
    synced = sum(b.size for b in scan_partition(b3.data_dir / "d-0").batches if b.last_offset < 10)
    losses = power.power_loss(cluster, b3)
    loss = losses[("d", 0)]
    assert (loss.cut_at, loss.end_before, loss.end_after) == (None, 20, 10)
    assert log_end(b3, "d") == 10
    (event,) = [e for e in cluster.timeline.events if e.name == "power-loss"]
    assert event.data["model"] == "unsynced"
    files = {f["path"]: f for d in event.data["dropped"] for f in d["files"]}
    dropped = files[f"d-0/{segment.name}"]
    assert dropped["dropped"] == [[synced, segment.size]] and dropped["size_after"] == synced
    process.restart(cluster, b3)
    wait_state(cluster, "d", lambda s: s.isr == (1, 2, 3), what="3 back in the ISR", timeout=90)
    assert log_end(b3, "d") == 20
    assert_healed(cluster)
