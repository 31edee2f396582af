"""kafka-17754-late-endtxn: a transactional producer's abort, held on the wire and retried,
arrives late and ends the producer's next transaction.

Three brokers; the transaction coordinator (the leader of the one __transaction_state
partition) leads no data partition: p0 and p1 are led by the two others.

  1. Transaction N writes `a` to p0.
  2. Its abort (EndTxn) is held on the wire with its connection. The client times out
     (socket.timeout.ms, 3 s), retries on a new connection, and the call returns OK: N
     aborted, its marker on p0.
  3. Transaction N+1 writes `b` to p0, acknowledged.
  4. The hold is healed: the first EndTxn reaches the coordinator. Under transactions v1 the
     producer's epoch is the same from one transaction to the next, and the coordinator
     checks only that it matches (TransactionCoordinator.handleEndTransaction), so it aborts
     N+1: an ABORT marker on p0.
  5. The client writes `c` to p1 (a partition new to N+1: AddPartitionsToTxn opens a new
     transaction on the coordinator) and commits, OK. A read_committed consumer reads `c`
     but not `b`: transaction {b, c} torn, acknowledged `b` lost.

(A held commit instead commits N+1 early, and the client's later abort fails with
INVALID_TXN_STATE: its outcome is in doubt for the client, so that variant proves less.)

Transactions v2 (KIP-890, server default from 4.0) bumps the epoch at every transaction's
end, so the late request would be fenced, but only for clients that speak it: EndTxn v5 and
later. librdkafka, logfork's client, sends EndTxn v1 (its transaction manager never bumps the
epoch between transactions), and a 4.x coordinator runs such a client on transactions v1. So
the scenario expects the bug on every release. KIP-890 part 1's partition verification
(3.6+) does not stop it: it checks produce requests, not EndTxn. How the held request is made
to arrive late: `faults.filters.hold_first_client_request`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from checkers.txn_reads import TORN, TxnReadCheck, check_read_passes
from faults import filters
from fixtures.cluster import ClusterSpec
from fixtures.waiting import WaitTimeout, wait_until
from observe.kraft import TRANSACTION_VERSION, feature_level
from observe.replicas import replica, spans
from observe.stable import read_pass
from runrecord.conformance import CONFORMS, VIOLATED, Conformance, Statement
from runrecord.history import ABORTED, READ_COMMITTED, Send
from runrecord.outcome import CONSISTENT, Symptom
from suites import steps
from suites.scenario import Finding, RunContext, Scenario
from suites.transactional import JAVA, LIBRDKAFKA, TransactionalProducer

TOPIC = "kafka17754"
TXN_ID = "logfork-kafka-17754"
TXN_TIMEOUT_MS = 60_000  # far longer than the hold: no timeout ends a transaction here
SOCKET_TIMEOUT_MS = 3000  # how soon librdkafka gives up on the held connection and retries
UNFIXED = (
    "librdkafka speaks transactions v1 only (EndTxn v1); KIP-890's fix, transactions v2, "
    "covers clients that use it (the Java client from 4.0)"
)


def spec(kafka: str, mode: str) -> ClusterSpec:
    # One coordinator partition: its leader is the coordinator of every transactional.id.
    return ClusterSpec(
        kafka, mode, brokers=3, broker_config={"transaction.state.log.num.partitions": 1}
    )


@dataclass
class Roles:
    coordinator: int
    p0: int  # the leader of partition 0, where the late EndTxn lands
    p1: int


def _roles(ctx: RunContext) -> Roles:
    """The coordinator, found once __transaction_state exists; the topic's two partitions
    led by the two other brokers."""
    metadata = ctx.cluster.partition_metadata("__transaction_state", 0)
    coordinator = metadata.leader
    ctx.expect(coordinator in ctx.cluster.brokers, "the coordinator known", metadata)
    x, y = (b for b in sorted(ctx.cluster.brokers) if b != coordinator)
    ctx.cluster.create_topic(TOPIC, [[x, y, coordinator], [y, x, coordinator]], {})
    ctx.timeline.record("note", "roles", coordinator=coordinator, p0=x, p1=y)
    return Roles(coordinator, x, y)


def _markers(ctx: RunContext, broker: int) -> int:
    return sum(1 for b in replica(ctx.cluster, broker, TOPIC, 0).batches if b.is_control)


def _await_markers(ctx: RunContext, roles: Roles, count: int, what: str, timeout: float) -> bool:
    try:
        wait_until(lambda: _markers(ctx, roles.p0), lambda n: n >= count, what=what,
                   timeout=timeout)  # fmt: skip
    except WaitTimeout:
        return False
    return True


def _write(ctx: RunContext, producer: TransactionalProducer, partition: int, value: str) -> Send:
    producer.send(TOPIC, partition, value, value)
    send = producer.flush()[-1]
    ctx.expect(send.ok, f"{producer.label}: {value} acknowledged on p{partition}", send.error)
    return send


def _reads(ctx: RunContext) -> tuple[TxnReadCheck, dict[str, str]]:
    reads, seen = [], {}
    for partition in (0, 1):
        read = read_pass(ctx.cluster, TOPIC, partition, isolation=READ_COMMITTED)
        reads.append(ctx.history.add_read(read))
        seen[f"p{partition}"] = (
            ", ".join(f"{r.value}@{r.offset}" for r in read.records) or "nothing"
        )
    return check_read_passes(ctx.history.sends, reads), seen


# How soon each client gives up on the held connection and retries, writes unbatched.
CLIENT_CONF = {
    LIBRDKAFKA: {"socket.timeout.ms": SOCKET_TIMEOUT_MS, "linger.ms": 0},
    JAVA: {"request.timeout.ms": SOCKET_TIMEOUT_MS, "linger.ms": 0},
}


def late(client: str) -> Callable[[RunContext], Finding]:
    """The scenario's body, its producer on `client`."""

    def body(ctx: RunContext) -> Finding:
        with TransactionalProducer(
            ctx.cluster, ctx.history, TXN_ID, timeout_ms=TXN_TIMEOUT_MS, client=client,
            log=ctx.run_dir / f"{client}-client.log", **CLIENT_CONF[client],
        ) as producer:  # fmt: skip
            return _body(ctx, producer)

    return body


def _body(ctx: RunContext, producer: TransactionalProducer) -> Finding:
    cluster = ctx.cluster
    roles = _roles(ctx)
    coordinator = cluster.broker(roles.coordinator)

    # 1-2. N writes a; its end held, retried, done.
    producer.begin()
    _write(ctx, producer, 0, "a")
    hold = filters.hold_first_client_request(cluster, coordinator, filters.END_TXN, "EndTxn")
    ended = producer.abort()
    ctx.expect(ended == ABORTED, "2: N aborted on a retry", ended)
    hold.await_dropped("2: N's first EndTxn held")
    held = filters.held_in_flight(coordinator)
    ctx.expect(held > 0, "2: the held EndTxn pending on a connection the client closed", held)
    ctx.expect(
        _await_markers(ctx, roles, 1, "2: N's marker on p0", 60),
        "2: N's marker on p0",
        spans(replica(cluster, roles.p0, TOPIC)),
    )

    # 3-4. N+1 writes b; the held EndTxn arrives.
    producer.begin()
    b = _write(ctx, producer, 0, "b")
    hold.heal()
    filters.await_held_delivered(hold, "4: the held EndTxn delivered to the coordinator")
    # Delivered means the coordinator's kernel has it: the marker, if any, follows within
    # milliseconds (1.5 s after the heal was the most seen, retransmission included).
    ended_early = _await_markers(ctx, roles, 2, "4: a marker for N+1 on p0", 10)

    # 5. The client goes on with N+1 as if nothing had happened.
    _write(ctx, producer, 1, "c")
    outcome = producer.commit()
    check, seen = _reads(ctx)
    verdicts = steps.judge_partitions(ctx, TOPIC, [0, 1])
    details = {
        "roles": vars(roles),
        # The cluster's finalized transaction.version (KRaft; 2 from 4.0): the coordinator
        # runs transactions v2 only for clients that ask for it by their EndTxn version.
        "transaction_version": (
            feature_level(cluster.controllers, TRANSACTION_VERSION) if ctx.mode == "kraft" else None
        ),
        "held_bytes": held,
        "n_plus_1_ended_early": ended_early,
        "n_plus_1_outcome": outcome,
        "p0": spans(replica(cluster, roles.p0, TOPIC)),
        "read_committed": seen,
        "read_check": check.to_dict(),
        "checker": [v.to_dict() for v in verdicts],
    }
    conformance = _conformance(check, ended_early, outcome)
    ctx.run.write_conformance(conformance)
    details["conformance"] = [vars(r) for r in conformance.statements]
    story = (
        f"N's EndTxn held and retried; N+1 wrote b at {b.offset} on p0; the late EndTxn "
        + ("ended N+1 early" if ended_early else "left N+1 alone")
        + f"; N+1 then {outcome}; read_committed read p0: {seen['p0']}; p1: {seen['p1']}"
    )
    # What the disk shows comes first: the reads judge what the coordinator wrote only
    # where the replicas agree on it.
    found = [(v, s) for v in verdicts if (s := steps.disk_symptom(v)) is not None]
    if found:
        v, symptom = found[0]
        return Finding(symptom, f"{story}; the disk audit of p{v.partition}: {symptom.describe()}",
                       details)  # fmt: skip
    torn = check.of(TORN)
    if torn:
        return Finding(Symptom(TORN, offset=torn[0].offset), f"{story}: {TORN}", details)
    if not check.clean:
        kinds = sorted({a.kind for a in check.anomalies})
        return Finding(Symptom(kinds[0]), f"{story}; the reads showed {kinds}", details)
    return Finding(Symptom(CONSISTENT), story, details)


def _conformance(check: TxnReadCheck, ended_early: bool, outcome: str) -> Conformance:
    def row(statement: str, holds: bool, observed: str) -> Statement:
        return Statement(statement, observed, CONFORMS if holds else VIOLATED)

    anomalies = "; ".join(f"{a.kind} at p{a.partition}@{a.offset}" for a in check.anomalies)
    return Conformance(
        "KIP-98",
        [
            row(
                "a transaction ends only by its producer's commit or abort, or its timeout",
                not ended_early,
                "N's late EndTxn ended N+1" if ended_early else "N+1 ended as its producer said",
            ),
            row(
                "read_committed consumers see a transaction whole or not at all, and never an "
                "aborted one",
                check.clean,
                anomalies or f"as the producer left it ({outcome})",
            ),
        ],
    )


# b, at offset 2 of p0 (a at 0, N's ABORT marker at 1)
B_OFFSET = 2
TITLE = (
    "KAFKA-17754: a held abort arrives late and aborts the next transaction, whose commit "
    "then succeeds: acknowledged b lost from committed {b, c}"
)
SCENARIO = Scenario(
    id="kafka-17754-late-endtxn",
    title=TITLE,
    body=late(LIBRDKAFKA),
    cluster=spec,
    jira="KAFKA-17754",
    kip="KIP-890",
    unfixed={"zk": UNFIXED, "kraft": UNFIXED},
    min_release="0.11.0",
    min_release_reason="needs transactions (KIP-98, 0.11.0)",
    symptom=Symptom(TORN, offset=B_OFFSET),
    txn_timeout_ms=TXN_TIMEOUT_MS,
)
# The same with the release's own Java client, which uses transactions v2 from 4.0 (where
# the cluster finalized transaction.version=2, as new 4.x KRaft clusters do): the late abort
# carries the epoch before N's end bumped it, and the coordinator fences it.
JAVA_CLIENT = Scenario(
    id="kafka-17754-late-endtxn-java",
    title=f"{TITLE} (the release's Java client; transactions v2 from 4.0)",
    body=late(JAVA),
    cluster=spec,
    jira="KAFKA-17754",
    kip="KIP-890",
    fixed_in="4.0.0",
    min_release="2.5.0",
    min_release_reason="runs the release's Java client, whose transactional API it needs "
    "(KIP-447's producer, 2.5)",
    symptom=Symptom(TORN, offset=B_OFFSET),
    txn_timeout_ms=TXN_TIMEOUT_MS,
)
