"""Leader elections that land on the broker the script names, or fail saying why.

From 2.4 both kinds go through the Admin API (KIP-460 electLeaders). Older releases use what
they offer: the `/admin/preferred_replica_election` znode for preferred elections, and for
unclean ones the topic's `unclean.leader.election.enable` plus an event that makes the
controller look at offline partitions again (a per-topic config change does that from 2.1,
KAFKA-6835; before, a controller failover does).
"""

from __future__ import annotations

import contextlib
import json
import warnings
from concurrent.futures import TimeoutError as FutureTimeout

from confluent_kafka import ElectionType, KafkaException, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource
from kazoo.exceptions import NodeExistsError, NoNodeError

from basics.errors import NotReached, NotYet, Refused
from fixtures.cluster import Cluster
from fixtures.waiting import STEADY, WaitTimeout, wait_until
from observe.controller import active_controller, controller_bidders_unwatched
from observe.state import PartitionState, assignment, partition_state, wait_state

PREFERRED_ZNODE = "/admin/preferred_replica_election"


# Errors that say "ask again": the request reached a broker that is no longer (or not yet)
# the controller, or the controller is busy failing over.
_RETRIABLE = (
    "NOT_CONTROLLER",
    "REQUEST_TIMED_OUT",
    "_TIMED_OUT",
    "_TRANSPORT",
    "COORDINATOR_NOT_AVAILABLE",
    "LEADER_NOT_AVAILABLE",
    # Matched by the line above too, and meant: before KIP-497 (2.7) the ZooKeeper-mode
    # controller learns an ISR expansion seconds after the znode shows it (a leader
    # propagates ISR changes in batches, ReplicaManager.maybePropagateIsrChanges), and
    # refuses the preferred replica meanwhile. Where the replica really left the ISR, the
    # wait ends not reached (explore then skips the step: suites.explore.live.context).
    "PREFERRED_LEADER_NOT_AVAILABLE",
)


def _admin_elect(
    cluster: Cluster, kind: ElectionType, topic: str, partition: int, timeout: float = 60.0
) -> None:
    tp = TopicPartition(topic, partition)
    what = f"{kind.name.lower()} election of {topic}-{partition}"

    timed_out = False
    # KRaft: a broker forwards the request to the controller (KIP-590); one that cannot
    # reach it is given up on after 5 s rather than librdkafka's minute. (The client's own
    # request_timeout option is refused by confluent-kafka's elect_leaders binding.)
    kraft = cluster.mode == "kraft"
    answer_within = 5.0 if kraft else 30.0

    def attempt() -> str | None:
        nonlocal timed_out
        try:
            result = cluster.admin().elect_leaders(kind, [tp]).result(timeout=answer_within)
            error = next(iter(result.values()), None)
        except FutureTimeout:
            error = "_TIMED_OUT: no answer within the wait"
        except KafkaException as exc:  # it carries the broker's reason
            error = exc
        if error is not None and any(code in str(error) for code in _RETRIABLE):
            timed_out = True
            cluster.timeline.record("note", "election-retried", error=str(error)[:300])
            if kraft or "NOT_CONTROLLER" in str(error) or "waiting for controller" in str(error):
                # Learn who the controller is now. In KRaft brokers name a random live broker
                # as the controller; librdkafka waits for the one it last knew, even when
                # it is down (seen on 4.3.1: "Timed out waiting for controller"). One cut
                # off from the quorum forwards the request into the void until it times out
                # (seen on 3.9.0: 20 s), so a new client asks a broker drawn afresh.
                cluster.admin(fresh=True)
            raise NotYet(str(error))  # wait_until tries again
        if error is not None and timed_out and "ELECTION_NOT_NEEDED" in str(error):
            # A ZooKeeper-mode broker answers ElectLeaders (KIP-460) only once its metadata cache
            # shows the new leader (DelayedElectLeader), so a slow UpdateMetadata times the
            # first request out after the controller already elected. The caller's check of
            # the partition state decides whether the election landed where it should.
            return None
        return None if error is None else str(error)

    try:
        error = wait_until(attempt, lambda _: True, what=what, timeout=timeout)
    except WaitTimeout as exc:
        raise NotReached(what, str(exc.last)) from None
    if error is not None:
        raise NotReached(what, error)


def _await_leader(
    cluster: Cluster,
    topic: str,
    partition: int,
    leader: int,
    before: PartitionState,
    what: str,
    timeout: float,
) -> PartitionState:
    def ok(state: PartitionState) -> bool:
        return state.leader == leader and (state.leader_epoch or 0) > (before.leader_epoch or 0)

    try:
        return wait_state(
            cluster,
            topic,
            ok,
            what=f"{what}: leader {leader} with epoch > {before.leader_epoch}",
            partition=partition,
            timeout=timeout,
        )
    except WaitTimeout as exc:
        raise NotReached(f"{what} to broker {leader}", str(exc.last)) from None


def elect_preferred(
    cluster: Cluster,
    topic: str,
    partition: int = 0,
    *,
    timeout: float = 60.0,
) -> PartitionState:
    """Move leadership to the preferred replica; the old leader stays in the ISR."""
    before = partition_state(cluster, topic, partition)
    preferred = assignment(cluster, topic, partition)[0]
    if before.leader == preferred:
        raise NotReached(
            f"preferred election of {topic}-{partition} moving leadership",
            f"broker {preferred} already leads it",
        )
    if preferred not in before.isr:
        raise NotReached(
            f"preferred election of {topic}-{partition} to broker {preferred}",
            f"broker {preferred} is not in the ISR {list(before.isr)}",
        )
    if cluster.release.has_admin_elections:
        _admin_elect(cluster, ElectionType.PREFERRED, topic, partition)
    else:
        zk = cluster.zk_client()
        # One election request at a time: the controller deletes the znode when done.
        wait_until(
            lambda: zk.exists(PREFERRED_ZNODE),
            lambda s: s is None,
            what="a previous preferred election to finish",
            timeout=timeout,
        )
        body = {"version": 1, "partitions": [{"topic": topic, "partition": partition}]}
        zk.create(PREFERRED_ZNODE, json.dumps(body).encode())
    after = _await_leader(
        cluster,
        topic,
        partition,
        preferred,
        before,
        f"preferred election of {topic}-{partition}",
        timeout,
    )
    cluster.timeline.record(
        "election",
        "preferred",
        topic=topic,
        partition=partition,
        leader=after.leader,
        epoch=after.leader_epoch,
        before=str(before),
    )
    return after


def _enable_unclean(cluster: Cluster, topic: str) -> None:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = cluster.admin()
    if cluster.release.at_least(2, 3):  # IncrementalAlterConfigs (KIP-339)
        resource.add_incremental_config(
            ConfigEntry(
                "unclean.leader.election.enable",
                "true",
                incremental_operation=AlterConfigOpType.SET,
            )
        )
        admin.incremental_alter_configs([resource])[resource].result(timeout=30)
        return
    # AlterConfigs replaces a topic's whole config: carry over what the topic already sets.
    current = admin.describe_configs([resource])[resource].result(timeout=30)
    for name, entry in current.items():
        if ConfigSource(entry.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG:
            resource.set_config(name, entry.value)
    resource.set_config("unclean.leader.election.enable", "true")
    with warnings.catch_warnings():  # deprecated, but the only way before 2.3
        warnings.simplefilter("ignore", DeprecationWarning)
        admin.alter_configs([resource])[resource].result(timeout=30)


def elect_unclean(
    cluster: Cluster,
    topic: str,
    partition: int = 0,
    *,
    to: int,
    timeout: float = 90.0,
    enabled: bool = False,
) -> PartitionState:
    """Elect an out-of-sync replica while no ISR member is alive. `enabled`: the topic's
    config already allows unclean elections (before 2.4 only the controller is made to look
    again; 0.10.2 has no AlterConfigs to enable it with)."""
    what = f"unclean election of {topic}-{partition} to broker {to}"
    before = partition_state(cluster, topic, partition)
    alive = cluster.registered_brokers()
    if before.leader != -1 and before.leader in alive:
        raise NotReached(what, f"leader {before.leader} is alive ({before})")
    if to not in alive:
        raise NotReached(what, f"broker {to} is not alive (alive: {sorted(alive)})")
    if to in before.isr:
        raise NotReached(
            what, f"broker {to} is in the ISR {list(before.isr)}: that is a clean election"
        )
    if cluster.release.has_admin_elections:
        _admin_elect(cluster, ElectionType.UNCLEAN, topic, partition)
    else:
        try:
            if not enabled:
                _enable_unclean(cluster, topic)
        except Exception as exc:  # noqa: BLE001 - KafkaException carries the reason
            raise Refused(f"could not enable unclean election for {topic}: {exc}") from None
        if enabled or not cluster.release.at_least(2, 1):
            # Before KAFKA-6835 a config change triggers nothing; a new controller runs the
            # offline-partition elections when it takes over.
            cluster.zk_client().delete("/controller")
    after = _await_leader(cluster, topic, partition, to, before, what, timeout)
    cluster.timeline.record(
        "election",
        "unclean",
        topic=topic,
        partition=partition,
        leader=after.leader,
        epoch=after.leader_epoch,
        before=str(before),
        recovery_state=str(after.recovery_state),
    )
    return after


def move_controller(cluster: Cluster, broker_id: int, *, attempts: int = 40) -> None:
    """ZooKeeper mode: make `broker_id` the controller again. Nothing places the controller
    (an unclean election before 2.4 moves it on purpose, above); when /controller is
    deleted every live broker races to create it (KafkaController's Reelect), so it is
    deleted until the broker wins. Raises NotReached when it never does. The race is not
    fair under load: a fresh-clone CI run saw broker 3 lose 12 rounds in a row to brokers
    1 and 2 on 3.9.2; each round takes well under a second."""
    zk = cluster.zk_client()
    seen: list[int] = []
    for _ in range(attempts):
        now = _await_controller(cluster)
        seen.append(now)
        if now == broker_id:
            cluster.timeline.record("election", "controller", leader=broker_id, seen=seen)
            return
        _await_watchers(cluster)
        with contextlib.suppress(NoNodeError):  # gone: an election is under way already
            zk.delete("/controller")
    raise NotReached(f"broker {broker_id} elected controller", f"elected in turn: {seen}")


# No broker held /controller for this long: the election stalled. A live one takes
# milliseconds; a resigning 1.1 controller can block seconds on a dead broker's channel.
ELECTION_STALL = 10.0


def _await_watchers(cluster: Cluster) -> None:
    """Wait until every live broker watches /controller, so that each bids again once it is
    deleted. A bid that fails while /controller is absent (its epoch write lost to a
    controller deleted in turn) only sets the watch, counting on "another round of
    election" (KafkaController.elect; ZookeeperLeaderElector before 1.1); if it is deleted
    before every broker set that watch, no broker bids again and none is controller."""
    wait_until(
        lambda: controller_bidders_unwatched(cluster),
        lambda missing: not missing,
        what="every broker watching /controller",
        timeout=30.0,
        interval=0.05,
        max_interval=STEADY,
        describe=lambda missing: f"brokers {missing} not watching",
    )


def _await_controller(cluster: Cluster) -> int:
    """The broker that holds /controller. A stalled election (above) is started again with a
    placeholder: created, watched by every broker again, and deleted. Its broker id -1 names
    no broker, so none takes itself for the controller meanwhile."""

    def elected(timeout: float) -> int:
        return wait_until(
            lambda: active_controller(cluster).node_id,
            lambda c: c is not None,
            what="a controller elected",
            timeout=timeout,
            interval=0.05,
            max_interval=STEADY,
        )

    try:
        return elected(ELECTION_STALL)
    except WaitTimeout:
        zk = cluster.zk_client()
        placeholder = json.dumps({"version": 1, "brokerid": -1}).encode()
        try:
            zk.create("/controller", placeholder, ephemeral=True)
        except NodeExistsError:
            pass  # a broker bid meanwhile
        else:
            try:
                _await_watchers(cluster)
            finally:
                zk.delete("/controller")
            cluster.timeline.record("election", "controller-restarted", stalled=ELECTION_STALL)
        return elected(30.0)


REASSIGN_ZNODE = "/admin/reassign_partitions"


def reorder_replicas(
    cluster: Cluster,
    topic: str,
    order: list[int],
    partition: int = 0,
    *,
    timeout: float = 60.0,
) -> PartitionState:
    """Change which replica is preferred without moving data or leadership (ZooKeeper mode):
    a reassignment to the same replicas in another order. The controller keeps the live
    leader, bumps its epoch and rewrites the assignment."""
    what = f"{topic}-{partition} reassigned to {order}"
    before = partition_state(cluster, topic, partition)
    if sorted(order) != sorted(assignment(cluster, topic, partition)):
        raise NotReached(what, f"replicas are {assignment(cluster, topic, partition)}")
    zk = cluster.zk_client()
    wait_until(
        lambda: zk.exists(REASSIGN_ZNODE),
        lambda s: s is None,
        timeout=timeout,
        what="a previous reassignment to finish",
    )
    body = {
        "version": 1,
        "partitions": [{"topic": topic, "partition": partition, "replicas": order}],
    }
    zk.create(REASSIGN_ZNODE, json.dumps(body).encode())
    try:
        wait_until(
            lambda: (assignment(cluster, topic, partition), zk.exists(REASSIGN_ZNODE)),
            lambda r: r[0] == order and r[1] is None,
            timeout=timeout,
            what=what,
        )
    except WaitTimeout as exc:
        raise NotReached(what, str(exc.last)) from None
    after = partition_state(cluster, topic, partition)
    if after.leader != before.leader:
        raise NotReached(f"{what} with leader {before.leader} kept", str(after))
    cluster.timeline.record(
        "election",
        "reassignment",
        topic=topic,
        partition=partition,
        replicas=order,
        leader=after.leader,
        epoch=after.leader_epoch,
    )
    return after
