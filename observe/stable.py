"""What clients of a transactional partition see: its last stable offset beside its high
watermark, and what a read_committed or read_uncommitted consumer reads.

The last stable offset (KIP-98) is the first offset of the earliest transaction still open
on the leader, or the high watermark when none is: a read_committed consumer reads no
further. ListOffsets for the latest offset answers the one or the other by the request's
isolation level (ListOffsets v2, KIP-98).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, IsolationLevel, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from basics.errors import Refused
from fixtures.waiting import wait_until
from observe.state import partition_state
from runrecord.history import READ_COMMITTED, ReadPass, ReadRecord

if TYPE_CHECKING:
    from fixtures.cluster import Cluster


@dataclass(frozen=True)
class StableOffsets:
    last_stable: int
    high_watermark: int

    @property
    def stuck(self) -> bool:
        """Whether an open transaction holds read_committed consumers back."""
        return self.last_stable < self.high_watermark

    def __str__(self) -> str:
        return f"last stable offset {self.last_stable}, high watermark {self.high_watermark}"


def _latest(admin: AdminClient, tp: TopicPartition, level: IsolationLevel) -> int:
    futures = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=level,
                                 request_timeout=10)  # fmt: skip
    return futures[tp].result(timeout=15).offset


def stable_offsets(cluster: Cluster, topic: str, partition: int = 0) -> StableOffsets:
    """Both ends of the partition as its leader answers them, the stable end first: an
    answer taken between the two can only make the gap look smaller, never invent one."""
    tp = TopicPartition(topic, partition)
    # A client of its own: librdkafka sends the leader epoch of its cached metadata, which a
    # leader elected since refuses (FENCED_LEADER_EPOCH, KIP-320). Held until the answers
    # come: a client collected earlier never completes its futures. Bootstrapped from the
    # leader the controller names: another broker's metadata may lag (one cut off from the
    # quorum still had the leader fenced, and librdkafka found "No leaders found").
    leader = partition_state(cluster, topic, partition).leader
    admin = AdminClient(cluster.client_config(only=leader if leader >= 0 else None))
    lso = _latest(admin, tp, IsolationLevel.READ_COMMITTED)
    hw = _latest(admin, tp, IsolationLevel.READ_UNCOMMITTED)
    return StableOffsets(lso, hw)


def read_partition(
    cluster: Cluster,
    topic: str,
    partition: int = 0,
    *,
    isolation: str = READ_COMMITTED,
    timeout: float = 60.0,
) -> list[ReadRecord]:
    """The records a consumer at `isolation` reads from the start of the partition until it
    reaches the end it is allowed to see (librdkafka signals the end of a partition at the
    last stable offset for read_committed, at the high watermark for read_uncommitted)."""
    consumer = Consumer(
        {
            **cluster.client_config(),
            "group.id": f"logfork-{isolation}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    records: list[ReadRecord] = []

    def poll() -> bool:
        msg = consumer.poll(1.0)
        if msg is None:
            return False
        if msg.error() is None:
            key, value = msg.key(), msg.value()
            records.append(ReadRecord(msg.offset(), key and key.decode(), value and value.decode()))
            return False
        if msg.error().code() == KafkaError._PARTITION_EOF:
            return True
        raise Refused(f"reading {topic}-{partition} {isolation}: {msg.error().str()}")

    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        wait_until(
            poll,
            bool,
            what=f"a {isolation} consumer of {topic}-{partition} to reach its end",
            timeout=timeout,
            interval=0,
            max_interval=0,
            describe=lambda _: f"{len(records)} records read",
        )
    finally:
        consumer.close()
    return records


def read_pass(cluster: Cluster, topic: str, partition: int = 0, *, isolation: str) -> ReadPass:
    """One pass over the partition at `isolation`, with the end it reached: the last stable
    offset or the high watermark, asked for after the pass (neither ever goes back, so
    whatever the consumer was handed lies below it). For the history (`History.add_read`)."""
    started = time.time()
    records = read_partition(cluster, topic, partition, isolation=isolation)
    offsets = stable_offsets(cluster, topic, partition)
    end = offsets.last_stable if isolation == READ_COMMITTED else offsets.high_watermark
    return ReadPass(topic, partition, isolation, end, started, time.time(), records)
