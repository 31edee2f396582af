"""kafka-20716-unclean-drops-marker: an unclean election loses a committed transaction's
COMMIT marker, and the partition's last stable offset stops for good.

The partition's replicas are B (b2, leader) and C (b3), min.insync.replicas=1; A (b1) leads
a probe topic, and holds the transaction coordinator once B is gone.

  1. S0 ([0, 4]) reaches both replicas. A transactional producer writes T ([5, 7]) in one
     transaction; acks=all, so C holds T too.
  2. C fails: ISR {B}. The transaction commits; its COMMIT marker (8) reaches B alone, the
     whole ISR, so the coordinator completes it. A second transaction of the same producer
     (on the probe topic) commits after it: the coordinator is done with the first, and
     will never write its marker again.
  3. B fails. C comes back and is elected uncleanly: T without its marker. B returns and
     truncates to C: the marker is gone from every replica.
  4. Once the transaction timeout has passed, S1 ([8, 12], acks=all) is acknowledged. The
     last stable offset stays at 5: a read_committed consumer reads S0 and stops, never
     reaching T (committed) or S1 (acknowledged).

Nothing aborts such a transaction by itself: the coordinator aborts only transactions it
still holds open (TransactionStateManager.timedOutTransactions), and partition leaders
never abort (KIP-664: `kafka-transactions.sh abort` is the operator's way out). The
maintainers' answer on KAFKA-20716 is that unclean election does not keep exactly-once
(apache/kafka#22937 documents it), so the scenario expects the hang on every release.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from checkers.txn_reads import check_read_passes
from faults import elections, process
from fixtures.cluster import ClusterSpec
from fixtures.waiting import WaitTimeout, wait_until
from observe.replicas import replica, spans
from observe.stable import StableOffsets, read_pass, stable_offsets
from runrecord.conformance import CONFORMS, VIOLATED, Conformance, Statement
from runrecord.history import COMMITTED, READ_COMMITTED, Send
from runrecord.outcome import CONSISTENT, HANGING, LOST, Symptom
from suites import steps
from suites.scenario import Finding, RunContext, Scenario, ScenarioError, Topic
from suites.transactional import TransactionalProducer

TOPIC, PROBE = "kafka20716", "kafka20716-probe"
TXN_ID = "logfork-kafka-20716"
A, B, C = 1, 2, 3
BATCH = 5
S0, T, MARKER = (0, 4), (5, 7), 8
# The transaction stays open while C is fenced or its session expires (up to 9 s; longer on a
# busy host): past its timeout the coordinator would abort it and fence the producer.
TXN_TIMEOUT_MS = 30_000
# How often the coordinator looks for transactions past their timeout (default 10 s).
ABORT_SCAN_MS = 1000


def spec(kafka: str, mode: str) -> ClusterSpec:
    config = {
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": ABORT_SCAN_MS,
        # The coordinator keeps working with one broker left; its one partition moves to A
        # when B fails (its ISR still holds A).
        "transaction.state.log.num.partitions": 1,
        "transaction.state.log.min.isr": 1,
    }
    if mode == "zk":
        return steps.controller_apart(kafka, mode, brokers=4, broker_config=config)
    return ClusterSpec(kafka, mode, brokers=3, broker_config=config)


@dataclass
class Seen:
    """What the run observed after the heal, judged by `_symptom`."""

    offsets: StableOffsets
    committed_reads: list[int]
    hanging: list[dict[str, Any]]
    s1: list[int | None]  # where S1 was acknowledged

    @property
    def stuck(self) -> bool:
        return self.offsets.stuck


def _transaction(ctx: RunContext) -> tuple[TransactionalProducer, list[Send]]:
    """T, written in one transaction and acknowledged by both replicas; not committed yet."""
    producer = TransactionalProducer(ctx.cluster, ctx.history, TXN_ID, timeout_ms=TXN_TIMEOUT_MS)
    producer.begin()
    for n in range(T[1] - T[0] + 1):
        producer.send(TOPIC, 0, f"t{n}", f"txn-{n}")
    sends = producer.flush()
    offsets = [s.offset for s in sends]
    ctx.expect(offsets == list(range(T[0], T[1] + 1)), f"1: T acknowledged at {T}", offsets)
    return producer, sends


def _commit_on_b_alone(ctx: RunContext, producer: TransactionalProducer) -> None:
    """2: the commit's marker on B, the whole ISR; then a later transaction committed."""
    ctx.expect(producer.commit() == COMMITTED, "2: T committed", producer.label)
    want = [S0, T, (MARKER, MARKER)]
    try:
        # From KIP-98 the EndTxn answer comes once the coordinator logged PrepareCommit; the
        # markers follow it.
        wait_until(
            lambda: replica(ctx.cluster, B, TOPIC),
            lambda lin: [(b.base_offset, b.last_offset) for b in lin.batches] == want,
            what="2: the COMMIT marker on B",
            timeout=60,
            describe=spans,
        )
    except WaitTimeout as exc:
        ctx.expect(False, exc.what, exc.last)
    # The coordinator refuses the next transaction's partitions (CONCURRENT_TRANSACTIONS)
    # until the first is CompleteCommit, after every marker was acknowledged.
    producer.begin()
    producer.send(PROBE, 0, "probe", "probe")
    ctx.expect(producer.commit() == COMMITTED, "2: a later transaction committed", producer.label)
    ctx.timeline.record("note", "coordinator-done", transactional_id=TXN_ID)


def _outlast_timeout(ctx: RunContext, since: float) -> StableOffsets:
    """Wait until the transaction is older than its timeout and the coordinator's abort scan
    ran twice since, or until the last stable offset reaches the high watermark."""
    deadline = since + (TXN_TIMEOUT_MS + 2 * ABORT_SCAN_MS) / 1000 + 1

    def probe() -> tuple[float, StableOffsets]:
        return time.time(), stable_offsets(ctx.cluster, TOPIC)

    _, offsets = wait_until(
        probe,
        lambda seen: seen[0] >= deadline or not seen[1].stuck,
        what="the transaction timeout to pass",
        timeout=deadline - time.time() + 60,
        describe=lambda seen: str(seen[1]),
    )
    ctx.timeline.record("note", "transaction-timeout-passed", offsets=str(offsets))
    return offsets


def _symptom(seen: Seen, t_first: int) -> Symptom:
    """The hang as clients and disk both see it; either alone is a logfork bug to find."""
    on_disk = [h for h in seen.hanging if h["first_offset"] == t_first]
    if seen.stuck != bool(on_disk):
        raise ScenarioError(
            f"the brokers and the disk audit disagree: {seen.offsets}, while the audit "
            f"found {'no' if not on_disk else 'a'} hanging transaction at {t_first} "
            f"({seen.hanging})"
        )
    if not seen.stuck:
        return Symptom(CONSISTENT)
    return Symptom(HANGING, offset=seen.offsets.last_stable, replicas=on_disk[0]["brokers"])


def _conformance(seen: Seen, marker_kept: bool) -> Conformance:
    committed = set(range(T[0], T[1] + 1)) | set(seen.s1)  # T committed, S1 not transactional
    rows = [
        Statement(
            "a committed transaction's COMMIT marker is on every replica of its partitions",
            "kept"
            if marker_kept
            else f"gone from both replicas after the unclean election (it was at {MARKER} on B)",
            CONFORMS if marker_kept else VIOLATED,
        ),
        Statement(
            "the last stable offset reaches the high watermark once no transaction is open",
            f"{seen.offsets}, after the transaction timeout and the coordinator's abort scan",
            VIOLATED if seen.stuck else CONFORMS,
        ),
        Statement(
            "a read_committed consumer reads every committed write",
            f"it read offsets {steps.offset_ranges(seen.committed_reads)} and stopped",
            CONFORMS if committed <= set(seen.committed_reads) else VIOLATED,
        ),
    ]
    return Conformance("KIP-98", rows)


def body(ctx: RunContext) -> Finding:
    cluster = ctx.cluster
    cluster.create_topic(PROBE, [[A]], {})
    sends = steps.produce_batch(ctx, TOPIC, BATCH, to=B, acks="all")
    producer, txn = _transaction(ctx)
    since = min(s.sent for s in txn)
    ctx.expect_log(C, [S0, T], "1: S0 and T on C")

    process.crash(cluster, ctx.broker(C))
    steps.await_isr(cluster, TOPIC, (B,), what="2: C out of the ISR")
    _commit_on_b_alone(ctx, producer)

    # 3. B fails; C, without the marker, is elected uncleanly; B comes back and follows C.
    process.crash(cluster, ctx.broker(B))
    process.restart(cluster, ctx.broker(C))
    elected = elections.elect_unclean(cluster, TOPIC, to=C)
    process.restart(cluster, ctx.broker(B))
    steps.await_isr(cluster, TOPIC, (B, C), what="3: B back in the ISR", timeout=120)
    marker_kept = any(b.is_control for b in replica(cluster, C, TOPIC).batches)

    # 4. Past the transaction timeout, S1 acknowledged; what clients see.
    before_s1 = _outlast_timeout(ctx, since)
    s1 = steps.produce_batch(ctx, TOPIC, BATCH, to=C, acks="all")
    sends += s1
    read = ctx.history.add_read(read_pass(cluster, TOPIC, isolation=READ_COMMITTED))
    offsets = stable_offsets(cluster, TOPIC)  # after the read: observe.stable.read_pass
    reads = [r.offset for r in read.records]
    read_check = check_read_passes(ctx.history.sends, [read])
    observed, verdicts, details = steps.judge_loss(
        ctx, TOPIC, sends + txn, [B, C], txn_timeout_ms=TXN_TIMEOUT_MS
    )
    checker = details["checker"]
    seen = Seen(offsets, reads, checker["hanging_transactions"], [s.offset for s in s1])
    conformance = _conformance(seen, marker_kept)
    ctx.run.write_conformance(conformance)
    details |= {
        "elected": str(elected),
        "stable_offsets_before_s1": str(before_s1),
        "stable_offsets": str(offsets),
        "read_committed": steps.offset_ranges(reads),
        "read_committed_check": read_check.to_dict(),
        "conformance": [vars(r) for r in conformance.statements],
        "audit_command": f"logfork audit {ctx.run_dir}",
    }
    if observed.kind == LOST:
        return Finding(observed, f"acknowledged writes lost: {verdicts}", details)
    if observed.kind != CONSISTENT:
        return Finding(observed, verdicts, details)
    symptom = _symptom(seen, T[0])
    if symptom.kind == CONSISTENT:
        return Finding(symptom, f"the transaction ended: {offsets}; {verdicts}", details)
    return Finding(
        symptom,
        f"T's COMMIT marker lost in C's unclean election: {offsets} for good; a "
        f"read_committed consumer read {steps.offset_ranges(reads)} and stopped, short of "
        f"committed T {T[0]}-{T[1]} and acknowledged S1 {seen.s1[0]}-{seen.s1[-1]}; "
        f"{verdicts}",
        details,
    )


SCENARIO = Scenario(
    id="kafka-20716-unclean-drops-marker",
    title="KAFKA-20716: an unclean election drops a committed transaction's marker, and "
    "read_committed consumers stop at the open transaction for good",
    body=body,
    cluster=spec,
    topic=Topic.fixed(TOPIC, [B, C], **{"min.insync.replicas": 1}),
    jira="KAFKA-20716",
    kip="KIP-98",
    unfixed={
        "zk": "unclean election does not keep exactly-once (KAFKA-20716)",
        "kraft": "unclean election does not keep exactly-once (KAFKA-20716)",
    },
    min_release="0.11.0",
    min_release_reason="needs transactions (KIP-98, 0.11.0)",
    symptom=Symptom(HANGING, offset=T[0], replicas=[B, C]),
    txn_timeout_ms=TXN_TIMEOUT_MS,
)
