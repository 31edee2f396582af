"""production-mix: what every production cluster holds, on healthy brokers. The audit must
call every partition consistent: nothing Kafka does on purpose is a divergence.

- A compacted topic (3 partitions, RF 3, with tombstones) whose replicas each broker's log
  cleaner compacts on its own schedule: broker 3's cleaner backs off far longer than the
  others', and small segments and a near-zero dirty ratio make every cleaner clean often.
- A transactional producer that commits and aborts, into the compacted topic and a plain
  one (so __transaction_state exists), and a consumer group committing its offsets (so
  __consumer_offsets exists).
- Broker 1 has two log dirs (JBOD) and one of its replicas moves between them while
  writes go on (AlterReplicaLogDirs, KIP-113).
- Broker 2 restarts cleanly and a preferred election gives it its leadership back.

No fault breaks safety. The scenario proves the cleaners ran before judging (the
cleaner-offset-checkpoints advanced on at least two brokers, and some batch has different
CRCs on two replicas: one cleaner rewrote it), then stops every broker cleanly so that no
cleaner rewrites a segment while the checker reads it, and audits every log dir.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer

from checkers.checkpoints import CLEANER_OFFSET_CHECKPOINT, read_offset_checkpoint
from checkers.compaction import INTERNAL_COMPACTED
from checkers.errors import LogReadError
from faults import elections, moves, process
from fixtures.cluster import Cluster, ClusterSpec
from fixtures.waiting import WaitTimeout, wait_until
from observe.replicas import replica
from runrecord.outcome import CONSISTENT, VIOLATED, Symptom
from suites import steps
from suites.scenario import Finding, RunContext, Scenario
from suites.workload import HistoryProducer

COMPACTED, PLAIN = "compacted", "plain"
KEYS = 40  # per partition: small enough that keys repeat, and get compacted, often
ASSIGNMENT = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
MOVED = (COMPACTED, 2)  # broker 1's replica that moves to its second log dir
RESTARTED = 2  # the preferred leader of partition 1 restarts cleanly
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    # A segment rolls on the first write 1.5 s after it began, so the cleaner always has
    # closed segments to clean; every write is cleanable at once.
    "segment.ms": 1500,
    "min.cleanable.dirty.ratio": 0.01,
    "min.compaction.lag.ms": 0,
    # Tombstones outlive any follower's lag here, as a healthy cluster's must: a follower
    # that is behind while its leader drops a tombstone (delete.retention.ms) never gets it,
    # and keeps the deleted key's older record for good. Seen with 0 on 3.9.2: broker 2,
    # restarting, fetched past k20's removed tombstone and kept k20, which the audit rightly
    # calls a divergence. A restart under load takes well under a minute.
    "delete.retention.ms": 60000,
    "min.insync.replicas": 2,
}


# Cleaners that look for work every half second, in small heaps; the transaction log
# keeps taking writes with one broker down.
CLEANER_CONFIG = {
    "log.cleaner.backoff.ms": 500,
    "log.cleaner.dedupe.buffer.size": 8 * 1024 * 1024,
    "transaction.state.log.min.isr": 2,
}


def spec(kafka: str, mode: str) -> ClusterSpec:
    return ClusterSpec(
        kafka,
        mode,
        brokers=3,
        broker_config=CLEANER_CONFIG,
        # Broker 3's cleaner looks for work far less often: its replicas lag behind in
        # cleaning, as one broker's always does somewhere.
        node_config={"b3": {"log.cleaner.backoff.ms": 20000}},
        log_dirs={"b1": 2},
    )


class Traffic(threading.Thread):
    """Keyed writes to a compacted topic's partitions, a tombstone every few, until
    stopped."""

    def __init__(
        self,
        ctx: RunContext,
        interval: float = 0.02,
        *,
        topic: str = COMPACTED,
        partitions: int = len(ASSIGNMENT),
    ) -> None:
        super().__init__(daemon=True, name=f"{topic}-traffic")
        self.producer = HistoryProducer(ctx.cluster, ctx.history, acks="all")
        self.interval = interval
        self.topic, self.partitions = topic, partitions
        self.stop_event = threading.Event()
        self.sent = 0

    def run(self) -> None:
        for n in itertools.count():
            if self.stop_event.is_set():
                return
            partition, key = n % self.partitions, (n // self.partitions) % KEYS
            # Every seventh write of a key deletes it: tombstones for the cleaner to keep
            # until their horizon and then remove.
            value = None if n % 7 == 6 else f"v{n}"
            self.producer.produce(self.topic, value, key=f"k{key}", partition=partition)
            self.sent += 1
            self.stop_event.wait(self.interval)  # pacing: a steady rate of writes

    def finish(self) -> None:
        self.stop_event.set()
        self.join(timeout=30)
        self.producer.close(30)


@dataclass
class TxnRounds:
    """How the transactional rounds ended. On healthy brokers every round commits or aborts
    as asked: a fatal error with no fault running is a finding, never renewed away."""

    committed: int = 0
    aborted: int = 0
    renewed: int = 0  # rounds cut short by a fatal error (0 on healthy brokers)
    fatal: str | None = None  # the first fatal error the producer met

    def __add__(self, other: TxnRounds) -> TxnRounds:
        return TxnRounds(
            self.committed + other.committed,
            self.aborted + other.aborted,
            self.renewed + other.renewed,
            self.fatal or other.fatal,
        )

    def counts(self) -> dict[str, int]:
        """What verdict.json keeps (`details.transactions`)."""
        return {"committed": self.committed, "aborted": self.aborted, "renewed": self.renewed}

    def finding(self) -> Finding | None:
        """The fatal error as the verdict, where there was one: healthy brokers gave it with
        no fault running."""
        if self.fatal is None:
            return None
        return Finding(
            Symptom(VIOLATED),
            f"a transactional producer failed fatally with no fault running ({self.fatal}); "
            f"transactions: {self.counts()}",
            {"transactions": self.counts(), "fatal": self.fatal},
        )


def transactions(
    ctx: RunContext,
    rounds: int,
    *,
    compacted: str = COMPACTED,
    partitions: int = len(ASSIGNMENT),
    plain: str | None = PLAIN,
    txn_id: str = "logfork-production-mix",
) -> TxnRounds:
    """Transactions into the compacted topic (and the plain one), committed and aborted in
    turn. A fatal error ends the rounds (seen once on 3.9.2: INVALID_TXN_STATE from an
    abort, with no fault running): on healthy brokers it is a finding, which the caller
    reports (`TxnRounds.finding`), not something to renew the producer past."""
    config = {
        **ctx.cluster.client_config(),
        "transactional.id": txn_id,
        "transaction.timeout.ms": 60000,
    }
    producer = Producer(config)
    producer.init_transactions(60)
    done = TxnRounds()
    for n in range(rounds):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(compacted, key=f"t{i}".encode(), value=f"txn{n}".encode(),
                             partition=n % partitions)  # fmt: skip
            if plain is not None:
                producer.produce(plain, key=f"t{i}".encode(), value=f"txn{n}-{i}".encode())
        try:
            if n % 2:
                producer.abort_transaction(60)
                done.aborted += 1
            else:
                producer.commit_transaction(60)
                done.committed += 1
        except KafkaException as exc:
            if not exc.args[0].fatal():
                raise
            ctx.timeline.record("note", "transactional-producer-fatal", error=str(exc))
            done.renewed, done.fatal = 1, str(exc)
            break
    ctx.timeline.record("note", "transactions", **done.counts())
    return done


def consume_committed(ctx: RunContext, at_least: int) -> int:
    """A consumer group reads the plain topic's committed records and commits its offsets."""
    consumer = Consumer(
        {
            **ctx.cluster.client_config(),
            "group.id": "logfork-production-mix",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([PLAIN])
    read = 0

    def poll() -> int:
        nonlocal read
        for msg in consumer.consume(100, 1.0):
            if msg.error() is None:
                read += 1
        if read:
            with contextlib.suppress(KafkaException):  # nothing new to commit
                consumer.commit(asynchronous=False)
        return read

    try:
        wait_until(poll, lambda n: n >= at_least, what=f"{at_least} committed records read",
                   timeout=90)  # fmt: skip
    finally:
        consumer.close()
    ctx.timeline.record("note", "consumer-group", read=read)
    return read


def move_between_log_dirs(ctx: RunContext) -> str:
    """Broker 1's replica of MOVED goes to its other log dir while writes go on; proven by
    the broker's own view, then by the partition dir leaving the one log dir for the other."""
    node = ctx.broker(1)
    name = f"{MOVED[0]}-{MOVED[1]}"
    holding = [i for i, d in enumerate(node.log_dirs) if (d / name).is_dir()]
    ctx.expect(len(holding) == 1, f"{name} in one of broker 1's log dirs", holding)
    source, target = holding[0], 1 - holding[0]  # the broker chose where it lives
    first, second = node.log_dirs[source], node.log_dirs[target]
    moves.move_to_dir(ctx.cluster, node, *MOVED, target)
    moves.await_moved(ctx.cluster, node, *MOVED, target)
    try:
        wait_until(
            lambda: ((second / name).is_dir(), (first / name).is_dir()),
            lambda found: found == (True, False),
            what=f"{name} moved to {second}",
            timeout=60,
        )
    except WaitTimeout as exc:
        ctx.expect(False, f"{name} moved to broker 1's other log dir", exc.last)
    return f"{name}: {first.name} -> {second.name}"


def cleaned_offsets(cluster: Cluster, topic: str) -> dict[int, dict[int, int]]:
    """Each broker's cleaner-offset-checkpoint entries for the topic: broker -> partition ->
    the offset its cleaner has cleaned up to (only those above 0)."""
    cleaned: dict[int, dict[int, int]] = {}
    for broker_id, node in cluster.brokers.items():
        for log_dir in node.log_dirs:
            path = log_dir / CLEANER_OFFSET_CHECKPOINT
            try:
                entries = read_offset_checkpoint(path) if path.is_file() else {}
            except LogReadError:
                continue  # caught mid-rewrite: read again next time
            for (name, partition), offset in entries.items():
                if name == topic and offset > 0:
                    cleaned.setdefault(broker_id, {})[partition] = offset
    return cleaned


def cleaners_ran(cluster: Cluster) -> dict[str, Any]:
    """Evidence that the cleaners compacted: each broker's cleaner-offset-checkpoint
    entries for the compacted topic, and a batch whose CRCs differ on two replicas."""
    cleaned = cleaned_offsets(cluster, COMPACTED)
    rewritten = None
    for partition, replicas in enumerate(ASSIGNMENT):
        logs = [replica(cluster, b, COMPACTED, partition) for b in replicas]
        for x, y in itertools.combinations(logs, 2):
            for batch in x.batches:
                other = y.batch_containing(batch.base_offset)
                same_place = other is not None and other.key[:3] == batch.key[:3]
                if same_place and other.crc != batch.crc:
                    rewritten = (
                        f"{COMPACTED}-{partition} {batch.span} on brokers "
                        f"{x.broker_id} and {y.broker_id}"
                    )
                    break
    return {"cleaned": cleaned, "rewritten": rewritten}


def body(ctx: RunContext) -> Finding:
    cluster = ctx.cluster
    cluster.create_topic(COMPACTED, ASSIGNMENT, TOPIC_CONFIG)
    cluster.create_topic(PLAIN, [[1, 2, 3]], {"min.insync.replicas": 2})
    traffic = Traffic(ctx)
    traffic.start()
    try:
        txns = transactions(ctx, 10)
        consumed = consume_committed(ctx, 5 * txns.committed)
        moved = move_between_log_dirs(ctx)

        # A clean restart: broker 2's leadership moves away, then comes back by a
        # preferred election once it is in sync again.
        process.kill(cluster, ctx.broker(RESTARTED), signal="SIGTERM")
        process.restart(cluster, ctx.broker(RESTARTED))
        steps.await_isr(cluster, COMPACTED, tuple(sorted(ASSIGNMENT[1])), partition=1,
                        what="broker 2 back in the ISR of compacted-1")  # fmt: skip
        elections.elect_preferred(cluster, COMPACTED, 1)
        txns += transactions(ctx, 4)

        try:
            proof = wait_until(
                lambda: cleaners_ran(cluster),
                lambda p: len(p["cleaned"]) >= 2 and p["rewritten"] is not None,
                what="cleaners on two brokers, and a batch one of them rewrote",
                timeout=120,
            )
        except WaitTimeout as exc:
            ctx.expect(False, "the log cleaners compacting on two brokers", exc.last)
    finally:
        traffic.finish()
    steps.await_isr(cluster, COMPACTED, (1, 2, 3), what="every replica of compacted-0 in sync")
    # Stopped cleanly, one by one: no cleaner rewrites a segment while the checker reads.
    ctx.timeline.phase("check")
    for node in cluster.brokers.values():
        process.kill(cluster, node, signal="SIGTERM")
    # The controllers' dirs too: the metadata log says which topics are compacted.
    nodes = {n.name: n for n in [*cluster.brokers.values(), *cluster.controllers]}
    dirs = [d for node in nodes.values() for d in node.log_dirs]
    result = steps.audit_dirs(ctx, dirs)
    topics = {v.topic for v in result.partitions}
    ctx.expect(set(INTERNAL_COMPACTED) <= topics, "__consumer_offsets and __transaction_state",
               sorted(topics))  # fmt: skip
    diverged = [v for v in result.partitions if v.status == "diverged"]
    compacted = [v for v in result.partitions if v.lenient]
    details = {
        "writes": traffic.sent,
        "transactions": txns.counts(),
        "consumed": consumed,
        "moved": moved,
        "cleaners": proof,
        "partitions": len(result.partitions),
        "compared_leniently": [f"{v.topic}-{v.partition}" for v in compacted],
        "errors": [str(e.error) for e in result.errors],
        "audit": result.to_dict()["summary"],
    }
    # An input the audit could not read leaves its partitions unjudged: no verdict.
    ctx.expect(not result.errors, "the audit reading every log dir",
               "; ".join(str(e.error) for e in result.errors[:3]))  # fmt: skip
    if diverged:
        where = "; ".join(f"{v.topic}-{v.partition} at {v.diverged_at}" for v in diverged)
        return Finding(steps.divergence(diverged[0]), f"the audit says diverged: {where}",
                       details)  # fmt: skip
    if (failed := txns.finding()) is not None:
        return Finding(failed.observed, failed.summary, {**details, **failed.details})
    ctx.expect(txns.committed > 0, "committed transactions to judge", txns.counts())
    return Finding(
        Symptom(CONSISTENT),
        f"all {len(result.partitions)} partitions consistent, {len(compacted)} of them "
        f"compacted and compared as the cleaner leaves them (cleaned on brokers "
        f"{sorted(proof['cleaned'])}; rewritten on one replica: {proof['rewritten']}); "
        f"{moved}",
        details,
    )


SCENARIO = Scenario(
    id="production-mix",
    title="Healthy production traffic: compaction, transactions, consumer groups, JBOD moves",
    body=body,
    cluster=spec,
    min_release="3.8.0",
    min_release_reason="JBOD log-dir moves in KRaft need 3.8 (KIP-858)",
)
