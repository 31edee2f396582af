"""lagging-compacted: a replica stopped for maintenance while its peers' cleaners go on.

An operator stops broker 1 cleanly (a controlled shutdown) and leaves it down; the other
two take keyed and transactional writes (min.insync.replicas=2 still holds), and their log
cleaners compact the topic past the offset where broker 1's log ends. Every rolling restart
of a cluster with a compacted topic leaves this state for a while (every cluster has
`__consumer_offsets`). Broker 1's replica is then a lagging, less-cleaned prefix of its
peers': the audit must call every partition consistent and name broker 1 as lagging.

The scenario proves the state before judging: broker 1 stopped with a clean-shutdown
marker; for every partition, both other brokers' cleaner-offset-checkpoints past broker
1's log end. Then it stops them cleanly too (no cleaner rewrites a segment while the
checker reads) and audits every log dir.
"""

from __future__ import annotations

from checkers.checkpoints import CLEAN_SHUTDOWN
from faults import process
from fixtures.cluster import ClusterSpec
from fixtures.waiting import WaitTimeout, wait_until
from observe.replicas import replica
from runrecord.outcome import CONSISTENT, Symptom
from suites import steps
from suites.scenario import Finding, RunContext, Scenario
from suites.scenarios.production_mix import (
    CLEANER_CONFIG,
    TOPIC_CONFIG,
    Traffic,
    cleaned_offsets,
    transactions,
)

TOPIC = "lagging"
ASSIGNMENT = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
STOPPED = 1  # the broker stopped for maintenance
RUNNING = (2, 3)


def spec(kafka: str, mode: str) -> ClusterSpec:
    return ClusterSpec(kafka, mode, brokers=3, broker_config=CLEANER_CONFIG)


def body(ctx: RunContext) -> Finding:
    cluster = ctx.cluster
    cluster.create_topic(TOPIC, ASSIGNMENT, TOPIC_CONFIG)
    traffic = Traffic(ctx, topic=TOPIC, partitions=len(ASSIGNMENT))
    traffic.start()
    try:
        txn = {"compacted": TOPIC, "partitions": len(ASSIGNMENT), "plain": None}
        txns = transactions(ctx, 4, txn_id="logfork-lagging-1", **txn)
        stopped = ctx.broker(STOPPED)
        process.kill(cluster, stopped, signal="SIGTERM")
        ctx.expect(
            any((d / CLEAN_SHUTDOWN).exists() for d in stopped.log_dirs),
            f"broker {STOPPED} stopped cleanly (its {CLEAN_SHUTDOWN})",
            "no marker",
        )
        ends = {p: replica(cluster, STOPPED, TOPIC, p).leo for p in range(len(ASSIGNMENT))}
        ctx.timeline.record("note", "lagging", broker=STOPPED, log_ends=ends)
        txns += transactions(ctx, 4, txn_id="logfork-lagging-2", **txn)

        def past(cleaned: dict[int, dict[int, int]]) -> bool:
            return all(
                cleaned.get(b, {}).get(p, 0) > end for b in RUNNING for p, end in ends.items()
            )

        try:
            cleaned = wait_until(
                lambda: cleaned_offsets(cluster, TOPIC),
                past,
                what=f"brokers {RUNNING}' cleaners past broker {STOPPED}'s log ends {ends}",
                timeout=180,
            )
        except WaitTimeout as exc:
            ctx.expect(False, f"the other cleaners past broker {STOPPED}'s log end", exc.last)
    finally:
        traffic.finish()
    ctx.timeline.phase("check")
    for b in RUNNING:  # stopped cleanly: no cleaner rewrites a segment while it is read
        process.kill(cluster, ctx.broker(b), signal="SIGTERM")
    nodes = [*cluster.brokers.values(), *cluster.controllers]
    result = steps.audit_dirs(ctx, [d for node in nodes for d in node.log_dirs])
    ctx.expect(not result.errors, "the audit reading every log dir",
               "; ".join(str(e.error) for e in result.errors[:3]))  # fmt: skip
    verdicts = [v for v in result.partitions if v.topic == TOPIC]
    ctx.expect(len(verdicts) == len(ASSIGNMENT), f"every partition of {TOPIC} judged",
               [f"{v.topic}-{v.partition}" for v in verdicts])  # fmt: skip
    details = {
        "writes": traffic.sent,
        "transactions": txns.counts(),
        "lagging_ends": ends,
        "cleaned": cleaned,
        "verdicts": {v.partition: v.to_dict() for v in verdicts},
    }
    diverged = [v for v in verdicts if v.status == "diverged"]
    if diverged:
        where = "; ".join(f"{TOPIC}-{v.partition} at {v.diverged_at}" for v in diverged)
        return Finding(steps.divergence(diverged[0]), f"the audit says diverged: {where}",
                       details)  # fmt: skip
    if (failed := txns.finding()) is not None:
        return Finding(failed.observed, failed.summary, {**details, **failed.details})
    ctx.expect(txns.committed > 0, "committed transactions to judge", txns.counts())
    named = [v.partition for v in verdicts if STOPPED in v.lagging]
    ctx.expect(named == list(range(len(ASSIGNMENT))), f"broker {STOPPED} named as lagging",
               {v.partition: v.lagging for v in verdicts})  # fmt: skip
    return Finding(
        Symptom(CONSISTENT),
        f"all {len(verdicts)} partitions of {TOPIC} consistent; broker {STOPPED} lags "
        f"(log ends {ends}) while brokers {RUNNING} cleaned to {cleaned}",
        details,
    )


SCENARIO = Scenario(
    id="lagging-compacted",
    title="A replica stopped for maintenance while its peers' cleaners compact past its end",
    body=body,
    cluster=spec,
    min_release="0.11.0",
    min_release_reason="needs transactions (KIP-98, 0.11.0)",
)
