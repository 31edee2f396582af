"""The workload: producers that keep a history of every send, and a reader of what is there.

The history (`runrecord.history.Send`: every send, its acks setting, and its acknowledged
offset or its error) is what the history checker (`checkers.history`) judges against: a
write the cluster acknowledged and later lost is the failure that matters most.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from basics.errors import Refused
from checkers.history import ReadLog
from checkers.records import Record
from fixtures.cluster import Cluster
from fixtures.waiting import wait_until
from runrecord.history import ReadPass, Send
from runrecord.typed import JsonLines


class History:
    """All sends of a run, appended to producer.jsonl in the run directory as they complete,
    and every consumer's pass over a partition, appended to reads.jsonl (made at the first:
    most runs read nothing)."""

    def __init__(
        self,
        writer: JsonLines | None = None,
        reads_writer: Callable[[], JsonLines] | None = None,
    ) -> None:
        self.writer = writer
        self.sends: list[Send] = []
        self.reads: list[ReadPass] = []
        self._reads_writer = reads_writer
        self._reads_file: JsonLines | None = None
        self._lock = threading.Lock()

    def add_read(self, read: ReadPass) -> ReadPass:
        with self._lock:
            self.reads.append(read)
            if self._reads_file is None and self._reads_writer is not None:
                self._reads_file = self._reads_writer()
        if self._reads_file is not None:
            self._reads_file.append(read)
        return read

    def add(self, send: Send) -> None:
        with self._lock:
            self.sends.append(send)
        if self.writer is not None:
            self.writer.append(send)

    def acknowledged(self, acks: str | None = None) -> list[Send]:
        return [s for s in self.sends if s.ok and (acks is None or s.acks == acks)]


def delivery(history: History, send: Send) -> Any:
    """A producer's delivery callback that completes `send` and records it."""

    def report(err: KafkaError | None, msg: Any) -> None:
        send.acked = time.time()
        if err is not None:
            send.error = err.str()
        else:
            send.offset, send.partition = msg.offset(), msg.partition()
        history.add(send)

    return report


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
        self.only = only
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

    def produce(
        self, topic: str, value: str | None, *, key: str | None = None, partition: int = 0
    ) -> Send:
        """Queue one send (its key is its value unless given; a None value is a
        tombstone); the history gets it once it completes."""
        key = value if key is None else key
        send = Send(
            topic, key, value, self.acks, time.time(), partition=partition, broker=self.only
        )
        while True:
            try:
                self._producer.produce(
                    topic,
                    value=None if value is None else value.encode(),
                    key=None if key is None else key.encode(),
                    partition=partition,
                    on_delivery=delivery(self.history, send),
                )
                break
            except BufferError:  # local queue full: let deliveries drain
                self._producer.poll(0.1)
        self._producer.poll(0)
        return send

    def send(
        self, topic: str, values: Iterable[str], *, partition: int = 0, timeout: float = 90.0
    ) -> list[Send]:
        sends = [self.produce(topic, value, partition=partition) for value in values]
        remaining = self._producer.flush(timeout)
        if remaining:
            raise Refused(
                f"{remaining} of {len(sends)} sends to {topic} were neither acknowledged nor "
                f"failed after {timeout:.0f}s"
            )
        return sends

    def poll(self, timeout: float = 0) -> None:
        self._producer.poll(timeout)

    def close(self, timeout: float = 10) -> None:
        self._producer.flush(timeout)


def read_partition(
    cluster: Cluster, topic: str, partition: int = 0, *, timeout: float = 60.0
) -> ReadLog:
    """Every record of a partition from the start up to its current high watermark, as the
    history checker's final log."""
    consumer = Consumer(
        {
            **cluster.client_config(),
            "group.id": "logfork-reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            # Everything the log holds up to the high watermark, open transactions and
            # aborted ones included: librdkafka's default, read_committed, stops at the last
            # stable offset.
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        # A broker that has just restarted answers metadata requests from its own cache
        # until the controller's UpdateMetadata reaches it, so the client can be sent to a
        # replica that is not the leader (NOT_LEADER_FOR_PARTITION): ask until the leader
        # answers.
        low, high = wait_until(
            lambda: consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10),
            lambda offsets: offsets is not None,
            what=f"the leader of {topic}-{partition} to give its offsets",
            timeout=timeout,
        )
        consumer.assign([TopicPartition(topic, partition, low)])
        records: list[Record] = []
        deadline = time.monotonic() + timeout
        while (not records or records[-1].offset < high - 1) and high > low:
            if time.monotonic() > deadline:
                raise Refused(
                    f"reading {topic}-{partition} stalled at offset "
                    f"{records[-1].offset if records else low} of {high}"
                )
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    # The end reached: the last offsets may hold a transaction marker, which
                    # no consumer is given.
                    if msg.offset() >= high:
                        break
                    continue
                raise Refused(f"reading {topic}-{partition} failed: {msg.error().str()}")
            stamp = msg.timestamp()[1]
            records.append(Record(msg.offset(), stamp, msg.key(), msg.value()))
        return ReadLog(records, log_start=low, log_end=high)
    finally:
        consumer.close()


class Background:
    """Numbered writes to each of `partitions` while a schedule runs, acks=all and acks=1
    apart (a producer each), every send in the history, until `stop`."""

    def __init__(
        self,
        cluster: Cluster,
        history: History,
        topic: str,
        *,
        partitions: tuple[int, ...] = (1,),
        rate: float = 10.0,  # writes per second, producer and partition
    ) -> None:
        self.topic, self.partitions, self.interval = topic, partitions, 1.0 / rate
        # Not idempotent: after the truncations and unclean elections a schedule causes, an
        # idempotent producer ends in a fatal error (UNKNOWN_PRODUCER_ID, OutOfOrderSequence)
        # and writes nothing more. A retried write may then land twice; the invariants judge
        # loss, which duplicates do not hide.
        self.producers = {
            acks: HistoryProducer(cluster, history, acks=acks, **{"enable.idempotence": False})
            for acks in ("all", "1")
        }
        self.sent = dict.fromkeys(self.producers, 0)
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"bg-{topic}")

    def start(self) -> Background:
        self._thread.start()
        return self

    def _run(self) -> None:
        n = 0
        while not self._stop.wait(self.interval):
            for (acks, producer), p in itertools.product(self.producers.items(), self.partitions):
                value = f"{self.topic}-{p}-{acks}-{n:07d}"
                try:
                    producer.produce(self.topic, value, partition=p)
                    self.sent[acks] += 1
                except Exception as exc:  # noqa: BLE001 - a fatal producer error: keep the rest
                    if len(self.errors) < 10:
                        self.errors.append(f"acks={acks}: {exc}")
            n += 1

    def stop(self, timeout: float = 30.0) -> dict[str, int]:
        """Stop writing; wait up to `timeout` for the writes in flight to complete (those
        that do not are in no history: neither acknowledged nor failed)."""
        self._stop.set()
        self._thread.join(timeout=10)
        for acks, producer in self.producers.items():
            try:
                producer.close(timeout)
            except Exception as exc:  # noqa: BLE001 - a fatal producer error, raised on flush
                self.errors.append(f"acks={acks}: {exc}")
        return dict(self.sent)
