"""The workload: producers that keep a history of every send, and a reader of what is there.

The history (every send, its acks setting, and its acknowledged offset or its error) is what
the acknowledged-write checks are judged against: a write the cluster acknowledged and later
lost is the failure that matters most.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from fixtures.cluster import Cluster
from fixtures.errors import LogforkError


@dataclass
class Send:
    topic: str
    key: str
    value: str
    acks: str
    sent: float  # wall-clock time
    acked: float | None = None
    partition: int | None = None
    offset: int | None = None
    error: str | None = None
    broker: int | None = None  # the broker the producer sent to (its believed leader)

    @property
    def ok(self) -> bool:
        return self.error is None and self.offset is not None


class History:
    """All sends of a run, appended to producer.jsonl in the run directory as they complete."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.sends: list[Send] = []
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()

    def add(self, send: Send) -> None:
        self.sends.append(send)
        if self.path is not None:
            with self.path.open("a") as f:
                f.write(json.dumps(asdict(send)) + "\n")

    def acknowledged(self, acks: str | None = None) -> list[Send]:
        return [s for s in self.sends if s.ok and (acks is None or s.acks == acks)]


class HistoryProducer:
    def __init__(
        self,
        cluster: Cluster,
        history: History,
        *,
        acks: str = "all",
        only: int | None = None,
        **conf: Any,
    ) -> None:
        """`only` pins the producer to one broker's listener: a stale client of one leader."""
        self.cluster = cluster
        self.history = history
        self.acks = acks
        release = cluster.release
        settings = {
            **cluster.client_config(only),
            "acks": acks,
            # Idempotence (KIP-98, 0.11+) keeps retries from writing a record twice, so that
            # "exactly once in order" is a fair check of the brokers, not of the client.
            "enable.idempotence": release.at_least(0, 11) and acks == "all",
            "linger.ms": 5,
            "message.timeout.ms": 60000,
            "request.timeout.ms": 15000,
        }
        settings.update(conf)
        self._producer = Producer(settings)

    def send(
        self, topic: str, values: Iterable[str], *, partition: int = 0, timeout: float = 90.0
    ) -> list[Send]:
        sends: list[Send] = []

        def report(err: KafkaError | None, msg: Any, send: Send) -> None:
            send.acked = time.time()
            if err is not None:
                send.error = err.str()
            else:
                send.offset = msg.offset()
                send.partition = msg.partition()
            self.history.add(send)

        for value in values:
            send = Send(topic, value, value, self.acks, time.time(), partition=partition)
            sends.append(send)
            while True:
                try:
                    self._producer.produce(
                        topic,
                        value=value.encode(),
                        key=value.encode(),
                        partition=partition,
                        on_delivery=lambda err, msg, s=send: report(err, msg, s),
                    )
                    break
                except BufferError:  # local queue full: let deliveries drain
                    self._producer.poll(0.1)
            self._producer.poll(0)
        remaining = self._producer.flush(timeout)
        if remaining:
            raise LogforkError(
                f"{remaining} of {len(sends)} sends to {topic} were neither acknowledged nor "
                f"failed after {timeout:.0f}s"
            )
        return sends

    def close(self) -> None:
        self._producer.flush(10)


@dataclass(frozen=True)
class Record:
    offset: int
    key: str
    value: str


def read_partition(
    cluster: Cluster, topic: str, partition: int = 0, *, timeout: float = 60.0
) -> list[Record]:
    """Every record of a partition from the start up to its current high watermark."""
    consumer = Consumer(
        {
            **cluster.client_config(),
            "group.id": "logfork-reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        consumer.assign([TopicPartition(topic, partition, low)])
        records: list[Record] = []
        deadline = time.monotonic() + timeout
        while (not records or records[-1].offset < high - 1) and high > low:
            if time.monotonic() > deadline:
                raise LogforkError(
                    f"reading {topic}-{partition} stalled at offset "
                    f"{records[-1].offset if records else low} of {high}"
                )
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise LogforkError(f"reading {topic}-{partition} failed: {msg.error().str()}")
            records.append(Record(msg.offset(), msg.key().decode(), msg.value().decode()))
        return records
    finally:
        consumer.close()
