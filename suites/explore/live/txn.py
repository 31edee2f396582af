"""The transactional steps of a schedule on real brokers: one transactional producer per
schedule writes to the schedule's partition, and to background ones where a write spans
them, commits and aborts (the model's side is checkers.simulate.transactions, for the
schedule's partition), and after the heal the run waits for every transaction to end on
every partition it wrote before it judges whether one hangs.

Each step checks its precondition first and is skipped, saying what it saw: a leader that
knows it leads, the ISR at min.insync.replicas (a transactional producer retries
NOT_ENOUGH_REPLICAS until its message timeout, where a `produce` is refused at once), the
previous transaction's markers written before another begins (the coordinator answers
CONCURRENT_TRANSACTIONS until then), and a coordinator that can answer and reach the
partition's leader. The coordinator is not modelled, nor are the background partitions: a
step skipped for what they could not do is skipped here, and the run tells the model
(`Unserved`).

A commit or abort with `held` has its first EndTxn held on the wire at the coordinator
(`faults.filters.hold_first_client_request`): the client times out on it, retries on a new
connection and ends the transaction, and the held request stays in the host's send queue
until the heal of every cut delivers it, late (KAFKA-17754). The step proves the hold (the
filter dropped it, and its bytes are still in flight); the heal proves the delivery.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException
from kazoo.exceptions import NoNodeError

from basics.errors import LogforkError, NotReached
from checkers.coordinator_log import TXN_STATE_TOPIC
from checkers.simulate.transactions import (
    ABORT,
    COMMIT,
    FAILED_TXN,
    TXN_TIMEOUT_S,
    cannot_hold_end,
)
from checkers.txn_reads import TxnReadCheck, check_read_passes
from faults import filters
from fixtures.cluster import Cluster
from fixtures.waiting import WaitTimeout, wait_until
from observe.stable import StableOffsets, read_pass, stable_offsets
from observe.state import PartitionState, partition_state
from runrecord.history import ABORTED, COMMITTED, READ_COMMITTED, READ_UNCOMMITTED, Send
from runrecord.schedule import Schedule
from runrecord.schedule_roles import Skip, Unserved
from runrecord.steps.base import MAX_COUNT
from runrecord.steps.txn import TxnAbort, TxnCommit, TxnEnd, TxnWrite
from suites.clients.api import TxnFailed
from suites.clients.librdkafka import fenced
from suites.explore.live.registry import action
from suites.steps import check_landed
from suites.transactional import TransactionalProducer

if TYPE_CHECKING:
    from suites.explore.live.context import Live

# How often the coordinator looks for transactions past their timeout (default 10 s).
ABORT_SCAN_MS = 1000
# What every explore cluster's brokers run with: the coordinator's log in one partition, so
# that one broker is the coordinator, and kept writable while a single replica of it is
# left (its default minimum ISR of 2 would stop every transaction once one broker fails).
BROKER_CONFIG: dict[str, Any] = {
    "transaction.state.log.num.partitions": 1,
    "transaction.state.log.min.isr": 1,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": ABORT_SCAN_MS,
}
TXN_TIMEOUT_MS = int(TXN_TIMEOUT_S * 1000)
# For the last transaction's markers to be committed before another. A marker whose leader
# was just SIGKILLed goes to the next one once the coordinator's metadata names it: on a
# loaded 4.3.1 (four clusters on two cores) that took longer than 5 s.
MARKERS_WAIT = 10.0
END_TIMEOUT = 30.0  # for the coordinator to answer a commit or an abort
STEPS = (TxnWrite, TxnCommit, TxnAbort)
# How long the client waits on a request before it retries it on a new connection
# (librdkafka's socket.timeout.ms, 60 s by default), in a schedule that holds an EndTxn:
# longer than a broker takes to answer an acks=all write (REQUEST_TIMEOUT), so that only a
# held request is retried, and short enough for the retry to end the transaction within
# END_TIMEOUT.
HELD_RETRY_MS = 10_000


def uses_transactions(schedule: Schedule) -> bool:
    return any(isinstance(s, STEPS) for s in schedule.steps)


def holds_end(schedule: Schedule) -> bool:
    return any(isinstance(s, TxnEnd) and s.held for s in schedule.steps)


@dataclass
class HeldEnd:
    """An EndTxn held on the wire at the coordinator, until a heal."""

    filter: filters.Filter
    coordinator: int
    incarnation: str | None  # the coordinator's container start: a restart loses the request
    kind: str | None = None  # COMMIT or ABORT, once the client's retry ended the transaction


class Transactional:
    """The schedule's transactional producer, made at its first write."""

    def __init__(
        self,
        topic: str,
        timeout: float,
        request_timeout: float,
        *,
        unknown: list[str] | None = None,
    ) -> None:
        self.id = f"logfork-{topic}"
        self.timeout = timeout  # a write's, acknowledged or failed
        self.request_timeout = request_timeout
        self.producer: TransactionalProducer | None = None
        self.open = False
        self.failed = False  # a write of the open transaction was not acknowledged
        self.began = 0.0  # when the transaction open or last ended began
        self.written = 0  # batches written
        self.last_write = 0.0  # when the last one was answered
        # The partitions the open (or the last) transaction wrote: the coordinator must mark
        # each before the next transaction may begin. And every partition any wrote.
        self.spans: set[int] = set()
        self.touched: set[int] = set()
        self.held: HeldEnd | None = None
        # A held EndTxn was delivered while the client had a transaction open: the
        # coordinator ended it, and the client's next end may be refused.
        self.late = False
        # What the model cannot be told (comparison.compare): the run's history's, shared.
        self.unknown: list[str] = [] if unknown is None else unknown

    def client(self, live: Live) -> TransactionalProducer:
        if self.producer is None:
            conf = {
                "linger.ms": 2000,  # every record of a step in one batch until flush()
                "batch.num.messages": MAX_COUNT,
                "request.timeout.ms": int(self.request_timeout * 1000),
                "message.timeout.ms": int(self.timeout * 1000),
            }
            if holds_end(live.schedule):
                conf["socket.timeout.ms"] = HELD_RETRY_MS
            try:
                self.producer = TransactionalProducer(
                    live.cluster, live.ctx.history, self.id, timeout_ms=TXN_TIMEOUT_MS, **conf
                )
            except TxnFailed as exc:
                # Nothing reached the partition: the step did not live.
                raise Skip(f"the coordinator did not initialise the producer ({exc})") from None
        return self.producer

    def begin(self, live: Live) -> TransactionalProducer:
        """Begin a transaction. A producer the coordinator fenced (it aborted a transaction
        at its timeout and bumped the epoch) is made again, as an application would."""
        producer = self.client(live)
        try:
            producer.begin()
        except KafkaException as exc:
            producer = self.renew(live, str(exc))
            producer.begin()
        self.open, self.failed, self.began = True, False, time.time()
        return producer

    def renew(self, live: Live, why: str) -> TransactionalProducer:
        """The producer made again; its transactions' labels go on where they were."""
        live.ctx.timeline.record("note", "transactional-producer-renewed", error=why)
        begun = self.producer.count if self.producer is not None else 0
        self.close()
        producer = self.client(live)
        producer.count = begun
        return producer

    def close(self) -> None:
        """Without ending an open transaction: the coordinator aborts it at its timeout."""
        if self.producer is not None:
            self.producer.close()
            self.producer = None


def prepare(live: Live, txn: Transactional) -> None:
    """Before the steps, for a schedule with transactional steps: the producer initialised
    while the cluster is whole, as an application does at its start. Its InitProducerId
    creates the coordinator's log, whose first ISR then holds every broker; made under a
    step's faults instead, it could wait on a follower cut off from the coordinator."""
    if not uses_transactions(live.schedule) or not live.cluster.release.at_least(0, 11):
        return
    try:
        txn.client(live)
    except Skip as skip:
        raise NotReached("the transactional producer initialised", skip.observed) from None


def coordinator_state(cluster: Cluster) -> PartitionState | None:
    """The state of the coordinator's log's one partition; None before the first
    transaction (the first FindCoordinator creates the log)."""
    try:
        return partition_state(cluster, TXN_STATE_TOPIC, 0)
    except (LogforkError, NoNodeError):  # KRaft: not in the metadata log; ZooKeeper: no znode
        return None


def coordinator(cluster: Cluster) -> int | None:
    """The transaction coordinator: its log's leader, if it has one."""
    state = coordinator_state(cluster)
    return None if state is None or state.leader is None or state.leader < 0 else state.leader


def _coordinator(live: Live, leader: int, *, markers: bool) -> int | None:
    """Skip unless the coordinator (the leader of the one partition of its log) can answer:
    it runs, and every member of its log's ISR is up and linked to it (it logs each state
    change with acks=all, and a follower cut off stays in the ISR for
    replica.lag.time.max.ms meanwhile). With `markers`, it must also reach the partition's
    leader. Before the first transaction its log does not exist: the first FindCoordinator
    creates it. Returns the coordinator (None: no log yet)."""
    state = coordinator_state(live.cluster)
    if state is None:
        return None
    c = state.leader
    if c is None or c < 0:
        raise Unserved(f"the transaction coordinator's log {TXN_STATE_TOPIC}-0 has no leader")
    if not live.alive(c) or not live.registered(c):
        raise Unserved(f"the transaction coordinator: {live.describe(c)}")
    for m in state.isr:
        if m != c and not (live.alive(m) and live.linked(m, c)):
            raise Unserved(
                f"the transaction coordinator, broker {c}, cannot log a change: broker {m} of "
                f"its log's ISR {list(state.isr)} is paused or cut off from it"
            )
    if markers and c != leader and not live.linked(c, leader):
        raise Unserved(f"the transaction coordinator, broker {c}, is cut off from leader {leader}")
    return c


def _markers_pending(live: Live, partition: int) -> StableOffsets | None:
    """The partition's offsets while its last stable offset stays below its high watermark
    (the last transaction's markers not all committed) for MARKERS_WAIT; None once it
    reaches it."""
    try:
        wait_until(
            lambda: stable_offsets(live.cluster, live.topic, partition),
            lambda seen: not seen.stuck,
            what="the last transaction's markers",
            timeout=MARKERS_WAIT,
        )
    except WaitTimeout as exc:
        if isinstance(exc.last, StableOffsets):
            return exc.last
        raise NotReached(
            f"partition {partition}'s last stable offset, from its leader", exc.last
        ) from None
    return None


def _verifiable(live: Live, c: int | None, leaders: dict[int, int], joined: set[int]) -> None:
    """From 3.6 a leader verifies with the coordinator that the transaction holds the
    partition before it appends the transaction's first batch there (KIP-890 part 1,
    transaction.partition.verification.enable, on by default; AddPartitionsToTxn v4
    verifyOnly). A leader cut off from the coordinator appends nothing and the write times
    out (seen on 3.9.2): Unserved, as the model does not follow the verification. `c`: the
    coordinator (None: its log does not exist yet)."""
    if c is None or not live.cluster.release.at_least(3, 6):
        return
    for p, b in sorted(leaders.items()):
        if p not in joined and b != c and not live.linked(b, c):
            raise Unserved(
                f"the leader of partition {p}, broker {b}, cannot reach the transaction "
                f"coordinator, broker {c}, to verify the transaction (KIP-890 part 1)"
            )


def write(live: Live, txn: Transactional, step: TxnWrite) -> tuple[dict[str, Any], float]:
    if not live.cluster.release.at_least(0, 11):
        raise Skip("transactions need Kafka 0.11 (KIP-98)")
    if txn.open and txn.failed:
        raise Skip(FAILED_TXN)
    view = live.view()
    leader = _writable_leader(live, view.leader, view.isr, 0)
    leaders = {0: leader}
    for p in step.spans[1:]:
        state = partition_state(live.cluster, live.topic, p)
        leaders[p] = _writable_leader(live, state.leader, state.isr, p)
    if not txn.open:
        # The coordinator answers CONCURRENT_TRANSACTIONS to a new transaction until it
        # has marked every partition of the last one.
        for p in sorted({0} | txn.spans):
            behind = _markers_pending(live, p)
            if behind is not None:
                why = f"the coordinator still writes the last transaction's markers ({behind})"
                if p == 0:
                    raise Skip(f"{why}: CONCURRENT_TRANSACTIONS")
                raise Unserved(f"{why}, on partition {p}: CONCURRENT_TRANSACTIONS")
    c = _coordinator(live, leader, markers=False)
    _verifiable(live, c, leaders, set() if not txn.open else txn.spans)

    def send(producer: TransactionalProducer) -> list[Send]:
        tag = f"t{txn.written}"
        for p in leaders:
            where = f"@{p}" if p else ""  # the schedule's partition's values as they always were
            for i in range(step.count):
                producer.send(live.topic, p, f"{tag}-{i}", f"{live.topic}-{tag}-{i}{where}")
        # This step's sends, of its transaction's
        return producer.flush(txn.timeout + 10)[-step.count * len(leaders) :]

    try:
        began = not txn.open
        producer = txn.begin(live) if began else txn.client(live)
        try:
            sends = send(producer)
        except KafkaException as exc:
            if began or txn.late or not fenced(exc):
                raise
            # The coordinator aborted the open transaction at its timeout, bumping the
            # producer's epoch, and the leader refused the write (nothing appended). An
            # application makes its producer again and begins anew, as the model does once
            # told where the abort fell (comparison: timeout_aborts).
            txn.open, began = False, True
            txn.renew(live, str(exc))
            producer = txn.begin(live)
            sends = send(producer)
    except (KafkaException, LogforkError) as exc:  # the client's errors, TxnFailed among them
        if not txn.late:
            raise NotReached("the transactional producer writing to the leader", str(exc)) from None
        # A producer going on with a transaction a late EndTxn ended may be refused for
        # good (KIP-890 part 1's verification, from 3.6): what the model cannot predict.
        txn.open = False
        txn.close()
        return {"to": leader, "acknowledged": False, "error": str(exc)}, 0.0
    txn.written += 1
    txn.last_write = time.time()
    txn.spans = set(leaders) | (set() if began else txn.spans)
    txn.touched |= txn.spans
    unacknowledged = []
    for p, broker in leaders.items():
        part = [s for s in sends if s.partition == p]
        errors = sorted({s.error for s in part if s.error})
        offsets = [s.offset for s in part if s.offset is not None]
        if errors or len(offsets) != step.count:
            unacknowledged.append(p)
        for send in part:
            send.broker = broker
        check_landed(live.cluster, broker, [s for s in part if s.offset is not None])
        live.ctx.timeline.record(
            "note",
            "batch",
            topic=live.topic,
            partition=p,
            broker=broker,
            acks="all",
            transaction=producer.label,
            first=offsets[0] if offsets else None,
            last=offsets[-1] if offsets else None,
            acknowledged=p not in unacknowledged,
            errors=errors,
        )
    # One batch not acknowledged fails the transaction: the producer can only abort it.
    acknowledged = not unacknowledged
    txn.failed |= not acknowledged
    waits = txn.request_timeout if not acknowledged else 0.0
    targets: dict[str, Any] = {"to": leader, "acknowledged": acknowledged}
    if step.partitions:
        targets["leaders"] = {str(p): b for p, b in leaders.items()}
        targets["unacknowledged"] = unacknowledged
    return {**targets, "transaction": producer.label}, waits


def _writable_leader(live: Live, leader: int | None, isr: Any, partition: int) -> int:
    """The partition's leader, where it can take a transactional write: it runs, knows it
    leads, and has min.insync.replicas in its ISR. Skipped otherwise; for a background
    partition a write spans, which the model does not follow, the run tells it (Unserved)."""
    skip = Skip if partition == 0 else Unserved
    name = "the partition" if partition == 0 else f"partition {partition}"
    if leader is None or leader < 0:
        raise skip(f"{name} has no leader (offline)")
    if not live.alive(leader):
        raise skip(live.describe(leader))
    seen = live.own_leader(leader, partition)
    if seen != leader:
        which = "" if partition == 0 else f" partition {partition}"
        raise skip(
            f"broker {leader} does not know it leads{which} (its metadata says leader {seen})"
        )
    min_isr = live.schedule.cluster.topic_config.min_insync_replicas
    if len(isr) < min_isr:
        whose = "" if partition == 0 else f"partition {partition}'s "
        raise skip(f"{whose}ISR {list(isr)} below min.insync.replicas={min_isr}")
    return leader


def end(
    live: Live, txn: Transactional, kind: str, held: bool | None = None
) -> tuple[dict[str, Any], float]:
    """Commit or abort the open transaction. A commit the producer cannot make (one of its
    writes failed) becomes an abort, as the model has it. With `held`, its first EndTxn is
    held at the coordinator until a heal."""
    if not txn.open:
        raise Skip("no transaction is open")
    why = held and cannot_hold_end(txn.held is not None)
    if why:
        raise Skip(why)
    view = live.view()
    if view.leader is not None:
        _coordinator(live, view.leader, markers=True)
    producer = txn.client(live)
    label, failed = producer.label, txn.failed
    hold = _hold_end(live) if held else None
    outcome = producer.commit(END_TIMEOUT) if kind == COMMIT else producer.abort(END_TIMEOUT)
    marker = {COMMITTED: COMMIT, ABORTED: ABORT}.get(outcome)
    txn.open = False
    targets: dict[str, Any] = {"transaction": label, "marker": marker}
    if marker is None:
        # The client never learned how its transaction ended (a failed write's epoch bump
        # waits for the markers, KIP-360), or, after a late EndTxn ended it, the coordinator
        # refused the client's own end (INVALID_TXN_STATE). The run goes on and the
        # invariants judge it. An abort (asked for, or all a failed transaction allows)
        # ends in an ABORT marker either way, now or at the coordinator's timeout, as the
        # model has it; a commit may have been taken or not, which the model cannot know.
        targets["outcome"] = outcome
        if not txn.late and kind == COMMIT and not failed:
            txn.unknown.append(f"the {kind.lower()} of {label} ended {outcome}")
        txn.close()
        if hold is not None:
            hold.filter.heal()
    elif hold is not None:
        targets["held_bytes"] = _prove_held(hold)
        hold.kind = marker
        txn.held = hold
    live.ctx.timeline.record("note", "transaction-ended", **targets)
    return targets, 0.0


def _hold_end(live: Live) -> HeldEnd:
    c = coordinator(live.cluster)
    if c is None:
        raise Unserved("the transaction coordinator's log has no leader")
    node = live.cluster.broker(c)
    hold = filters.hold_first_client_request(live.cluster, node, filters.END_TXN, "EndTxn")
    return HeldEnd(hold, c, node.started_at())


def _prove_held(hold: HeldEnd) -> int:
    """The hold's effect: the filter dropped the first EndTxn, and the connection the client
    gave up on still holds it, unacknowledged."""
    try:
        hold.filter.await_dropped("the transaction's first EndTxn held")
        held = filters.held_in_flight(hold.filter.node)
        if held == 0:
            raise NotReached(
                "the held EndTxn pending on a connection the client closed", "0 bytes in flight"
            )
    except NotReached:
        hold.filter.heal()
        raise
    return held


def release_held_end(live: Live, txn: Transactional) -> dict[str, Any]:
    """The heal of every cut: the held EndTxn, if any, delivered to the coordinator it was
    held at. Where that broker restarted, is paused or is no longer the coordinator, what
    the request does is not the model's to say (`Transactional.unknown`)."""
    held, txn.held = txn.held, None
    if held is None:
        return {}
    held.filter.heal()
    node = held.filter.node
    now = coordinator(live.cluster)
    if node.status() != "running":
        seen = f"broker {held.coordinator} {node.status()}"
    elif node.started_at() != held.incarnation:
        seen = f"broker {held.coordinator} restarted since"
    elif now != held.coordinator:
        seen = f"the coordinator is broker {now} by then"
    else:
        filters.await_held_delivered(held.filter, "the held EndTxn delivered to the coordinator")
        txn.late |= txn.open
        return {"late_end": "delivered", "coordinator": held.coordinator}
    txn.unknown.append(f"the {held.kind} held at broker {held.coordinator} was released: {seen}")
    return {"late_end": "unknown", "coordinator": held.coordinator}


def client_reads(live: Live, txn: Transactional) -> TxnReadCheck | None:
    """Once the transactions ended: what a read_committed and then a read_uncommitted
    consumer read of every partition a transaction wrote, each pass in the history
    (reads.jsonl), judged against the producer's (`checkers.txn_reads`: a transaction
    committed whole on all of them); None for a schedule without a transaction."""
    if txn.written == 0:
        return None
    passes = []
    for level in (READ_COMMITTED, READ_UNCOMMITTED):
        for p in sorted(txn.touched):
            try:
                passes.append(read_pass(live.cluster, live.topic, p, isolation=level))
            except (LogforkError, KafkaException) as exc:
                raise NotReached(f"a {level} read of {live.topic}-{p}", exc) from None
            live.ctx.history.add_read(passes[-1])
    check = check_read_passes(live.ctx.history.sends, passes)
    live.ctx.timeline.record("note", "client-reads", **check.to_dict())
    return check


def await_transactions_ended(live: Live, txn: Transactional) -> dict[int, StableOffsets]:
    """After the heal: the producer goes away, and the run waits until the last stable
    offset of every partition a transaction wrote reaches its high watermark, or until the
    coordinator has had the time to abort what is left open (its timeout and two abort
    scans past the last transaction's start), and the disk audit the time to call what is
    still open hanging: it ages an open transaction from its first batch on the final log,
    which may be the last write, when what came before it was lost (seen on 4.4.0: the
    clients saw the hang, the disk not yet). The offsets seen last, by partition; none for
    a schedule without a transaction."""
    if txn.written == 0:
        return {}
    txn.close()
    since = max(txn.began, txn.last_write)
    deadline = since + TXN_TIMEOUT_S + 2 * ABORT_SCAN_MS / 1000 + 2
    partitions = sorted(txn.touched)

    def probe() -> tuple[float, dict[int, StableOffsets]]:
        return time.time(), {p: stable_offsets(live.cluster, live.topic, p) for p in partitions}

    _, offsets = wait_until(
        probe,
        lambda seen: seen[0] >= deadline or not any(o.stuck for o in seen[1].values()),
        what="every transaction to end",
        timeout=max(deadline - time.time(), 0) + 60,
        describe=lambda seen: _offsets_text(seen[1]),
    )
    live.ctx.timeline.record("note", "transactions-ended", offsets=_offsets_text(offsets))
    return offsets


def _offsets_text(offsets: dict[int, StableOffsets]) -> str:
    if set(offsets) == {0}:
        return str(offsets[0])  # as a run of one partition always said it
    return "; ".join(f"partition {p}: {o}" for p, o in sorted(offsets.items()))


@action(TxnWrite)
def txn_write(live: Live, step: TxnWrite) -> tuple[dict[str, Any], float]:
    return write(live, live.txn, step)


@action(TxnCommit)
def txn_commit(live: Live, step: TxnCommit) -> tuple[dict[str, Any], float]:
    return end(live, live.txn, COMMIT, step.held)


@action(TxnAbort)
def txn_abort(live: Live, step: TxnAbort) -> tuple[dict[str, Any], float]:
    return end(live, live.txn, ABORT, step.held)
