"""A partition's replicas moved between brokers (KIP-455): the reassignment sent to the
controller, and the replication throttle an operator puts on one.

In KRaft the controller writes the target replicas first, then the replicas being removed,
as the partition's replica list, and the new ones as adding replicas, while those catch up
(PartitionReassignmentReplicas); once they are in the ISR it drops the removed ones and the
adding list in the same change. So the metadata log says where a reassignment stands:
complete once the replica list is the target and nothing is being added."""

from __future__ import annotations

from collections.abc import Sequence

from confluent_kafka import KafkaException
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from basics.errors import NotReached
from fixtures.admin import forwarded
from fixtures.cluster import Cluster
from fixtures.config import EXTERNAL_PORT
from fixtures.nodes import Node
from fixtures.waiting import WaitTimeout, wait_until
from observe import wire
from observe.broker_configs import await_dynamic
from observe.state import assignment, partition_state

# What kafka-reassign-partitions --throttle sets: a rate on every broker, for the replicas
# the topic lists (a follower out of the ISR, and its leader serving it).
BROKER_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
TOPIC_REPLICAS = (
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
)
# The quota is measured over its window, so a first fetch of up to replica.fetch.max.bytes
# goes through before it bites: a schedule's partition, a few batches, is copied at once,
# and a larger one crawls.
THROTTLE_RATE = 4096
ANSWER_WITHIN_MS = 30000  # the request's own timeout, for the controller to answer
REQUEST_WAIT = 45.0  # seconds the socket waits for that answer


def merged(current: Sequence[int], target: Sequence[int]) -> list[int]:
    """The replica list while a reassignment is in flight: the target's, then the replicas
    it removes (KRaft's PartitionReassignmentReplicas)."""
    return [*target, *(b for b in current if b not in target)]


def reassign(
    cluster: Cluster, via: Node, topic: str, partition: int, before: list[int], target: list[int]
) -> None:
    """Ask for the partition, on replicas `before`, to be reassigned to `target` (through
    broker `via`). Proven by the metadata log: the replica list in flight (the target
    first) or the target itself."""
    what = f"the reassignment of {topic}-{partition} to {target}"
    try:
        # The broker answers once the controller has: allow for a quorum electing a leader.
        with wire.Connection("127.0.0.1", via.published[EXTERNAL_PORT], REQUEST_WAIT) as conn:
            answer = conn.alter_partition_reassignment(topic, partition, target, ANSWER_WITHIN_MS)
    except (OSError, wire.ProtocolError) as exc:
        raise NotReached(f"{what}, through broker {via.node_id}", repr(exc)) from None
    if answer.error != "NONE":
        raise NotReached(what, f"{answer.error}: {answer.detail}")
    cluster.timeline.record(
        "fault", "reassignment", topic=topic, partition=partition, replicas=target, before=before
    )
    started = (merged(before, target), list(target))
    try:
        wait_until(
            lambda: assignment(cluster, topic, partition),
            lambda replicas: replicas in started,
            what=f"{what} in the metadata log",
            timeout=30,
        )
    except WaitTimeout as exc:
        raise NotReached(exc.what, str(exc.last)) from None


def await_reassigned(
    cluster: Cluster, topic: str, partition: int, target: list[int], timeout: float = 60.0
) -> None:
    """The reassignment is complete: the replica list is the target, nothing being added."""
    try:
        wait_until(
            lambda: partition_state(cluster, topic, partition),
            lambda s: list(s.replicas) == target and not s.adding,
            describe=lambda s: f"replicas {list(s.replicas)}, adding {list(s.adding)}",
            what=f"the reassignment of {topic}-{partition} to {target} to complete",
            timeout=timeout,
        )
    except WaitTimeout as exc:
        raise NotReached(exc.what, str(exc.last)) from None
    cluster.timeline.record("heal", "reassignment", topic=topic, partition=partition)


def throttle(cluster: Cluster, topic: str, partition: int, brokers: Sequence[int]) -> None:
    """Throttle replication of the partition on `brokers`, as an operator's reassignment
    does. IncrementalAlterConfigs (KIP-339): the topic's other configs stay."""
    replicas = ",".join(f"{partition}:{b}" for b in brokers)
    resources = [ConfigResource(ConfigResource.Type.TOPIC, topic)]
    for name in TOPIC_REPLICAS:
        resources[0].add_incremental_config(
            ConfigEntry(name, replicas, incremental_operation=AlterConfigOpType.SET)
        )
    for b in brokers:
        resource = ConfigResource(ConfigResource.Type.BROKER, str(b))
        for name in BROKER_RATES:
            resource.add_incremental_config(
                ConfigEntry(name, str(THROTTLE_RATE), incremental_operation=AlterConfigOpType.SET)
            )
        resources.append(resource)
    try:
        for resource in resources:  # librdkafka takes one broker resource per call
            forwarded(
                cluster,
                lambda admin, wait, r=resource: admin.incremental_alter_configs(
                    [r], request_timeout=wait
                ),
            )
    except KafkaException as exc:  # a broker or the controller not answering in time
        raise NotReached(f"the replication throttle on {topic}-{partition}", exc) from None
    for b in brokers:  # each broker takes the rates when it replays the config record
        wanted = dict.fromkeys(BROKER_RATES, str(THROTTLE_RATE))
        await_dynamic(cluster, b, wanted, "the replication throttle")
    cluster.timeline.record(
        "fault", "replication-throttle", topic=topic, replicas=replicas, rate=THROTTLE_RATE
    )
