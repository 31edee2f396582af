"""A replica moved between one broker's log dirs (KIP-113): the broker creates a `-future`
replica in the target dir, copies the current one into it, and swaps it in once caught up.
A throttle slows the copy, so that the move can be caught half-way."""

from __future__ import annotations

import warnings

from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource

from basics.errors import NotReached
from fixtures.admin import forwarded
from fixtures.cluster import Cluster
from fixtures.config import EXTERNAL_PORT, log_dir_path
from fixtures.nodes import Node
from observe import wire
from observe.broker_configs import await_dynamic
from observe.log_dirs import await_log_dir

# A dynamic broker config only: server.properties cannot set it (KIP-113).
DIR_MOVE_THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"
# Slow enough that a move of a few MB stays in flight for minutes once its first fetch
# (up to replica.fetch.max.bytes) has gone through.
IN_FLIGHT_RATE = 4096


def throttle_dir_moves(cluster: Cluster, node: Node, bytes_per_second: int | None) -> None:
    """Caps what the broker copies between its own log dirs (None: lifts the cap). (Kafka
    suggests no less than 1 MB/s "for accurate behaviour": the quota is measured over its
    window, so a first fetch of up to replica.fetch.max.bytes goes through before it
    bites.)"""
    rate = {} if bytes_per_second is None else {DIR_MOVE_THROTTLE: str(bytes_per_second)}
    resource = ConfigResource(ConfigResource.Type.BROKER, str(node.node_id), set_config=rate)
    # AlterConfigs, not its incremental successor: 1.1 has no IncrementalAlterConfigs
    # (KIP-339, 2.3). It replaces the broker's dynamic configs whole, so a reassignment's
    # throttled rates there go too (faults.reassign): the model follows neither throttle.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            forwarded(
                cluster, lambda admin, wait: admin.alter_configs([resource], request_timeout=wait)
            )
    except KafkaException as exc:  # the broker, or the controller it forwards to, too slow
        raise NotReached(f"the log-dir move throttle on {node.name}", exc) from None
    # In ZooKeeper mode the broker takes the cap when the change notification reaches it: a
    # move asked for before that runs unthrottled.
    wanted = {DIR_MOVE_THROTTLE: None if bytes_per_second is None else str(bytes_per_second)}
    await_dynamic(cluster, node.node_id, wanted, "the log-dir move throttle")
    cluster.timeline.record("fault", "log-dir-throttle", node=node.name, rate=bytes_per_second)


def move_to_dir(cluster: Cluster, node: Node, topic: str, partition: int, index: int) -> None:
    """Ask the broker to move its replica into its log dir `index`. Proven by the broker's
    own view: the future replica in the target dir, or the move already done."""
    path = log_dir_path(index)
    with wire.Connection("127.0.0.1", node.published[EXTERNAL_PORT]) as conn:
        answer = conn.alter_replica_log_dir(topic, partition, path)
    if answer.error != "NONE":
        raise NotReached(f"AlterReplicaLogDirs of {topic}-{partition} to {path}", answer)
    cluster.timeline.record(
        "fault", "log-dir-move", node=node.name, topic=topic, partition=partition, target=path
    )
    started = f"the move of {topic}-{partition} into it started"
    await_log_dir(node, path, lambda s: (topic, partition) in s.future | s.partitions, started)


def await_moved(
    cluster: Cluster, node: Node, topic: str, partition: int, index: int, timeout: float = 120.0
) -> None:
    """The move is done: the replica current in the target dir, and no future left."""
    path = log_dir_path(index)
    tp = (topic, partition)
    done = f"the move of {topic}-{partition} into it done"
    await_log_dir(node, path, lambda s: tp in s.partitions and tp not in s.future, done, timeout)
    cluster.timeline.record(
        "heal", "log-dir-move", node=node.name, topic=topic, partition=partition
    )
