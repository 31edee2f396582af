"""smoke: the cluster works end to end across a leader crash.

RF=3, min.insync.replicas=2; 1,000 records with acks=all; SIGKILL the leader and see
leadership move; 1,000 more; restart the killed broker and see it rejoin the ISR; every
acknowledged record must be present exactly once, in order.
"""

from __future__ import annotations

import itertools

from faults import process
from fixtures.cluster import ClusterSpec
from fixtures.errors import NotReached
from fixtures.waiting import wait_until
from suites.scenario import Finding, RunContext, Scenario
from suites.workload import HistoryProducer, read_partition

TOPIC = "smoke"
BATCH = 1000


def spec(kafka: str, mode: str) -> ClusterSpec:
    return ClusterSpec(kafka, mode, brokers=3)


def body(ctx: RunContext) -> Finding:
    cluster, timeline = ctx.cluster, ctx.timeline
    cluster.create_topic(TOPIC, [[1, 2, 3]], {"min.insync.replicas": 2})
    producer = HistoryProducer(cluster, ctx.history, acks="all")
    producer.send(TOPIC, (f"{i:06d}" for i in range(BATCH)))

    leader = cluster.partition_metadata(TOPIC).leader
    timeline.record("state", "leader", topic=TOPIC, leader=leader)
    process.kill(cluster, cluster.broker(leader), timeline)
    moved = wait_until(
        lambda: cluster.partition_metadata(TOPIC),
        lambda p: p.leader not in (-1, leader) and leader not in p.isrs,
        what=f"leadership of {TOPIC}-0 to move away from killed broker {leader}",
        timeout=90,
        describe=lambda p: f"leader {p.leader} isr {sorted(p.isrs)}",
    )
    timeline.record("state", "leader", topic=TOPIC, leader=moved.leader, isr=sorted(moved.isrs))

    producer.send(TOPIC, (f"{i:06d}" for i in range(BATCH, 2 * BATCH)))
    producer.close()

    timeline.phase("convergence")
    process.restart(cluster, cluster.broker(leader), timeline)
    wait_until(
        lambda: cluster.partition_metadata(TOPIC),
        lambda p: sorted(p.isrs) == [1, 2, 3],
        what=f"broker {leader} to rejoin the ISR of {TOPIC}-0",
        timeout=120,
        describe=lambda p: f"leader {p.leader} isr {sorted(p.isrs)}",
    )

    timeline.phase("check")
    acked = ctx.history.acknowledged()
    if len(acked) != 2 * BATCH:
        failed = [s for s in ctx.history.sends if not s.ok]
        raise NotReached(
            f"all {2 * BATCH} acks=all writes acknowledged",
            f"{len(acked)} acknowledged; first error: {failed[0].error if failed else 'none'}",
        )
    records = read_partition(cluster, TOPIC)
    return judge(
        acked_values=[s.value for s in acked],
        read=[r.value for r in records],
        moved_to=moved.leader,
        killed=leader,
    )


def judge(*, acked_values: list[str], read: list[str], moved_to: int, killed: int) -> Finding:
    """Every acknowledged record exactly once, in the order it was acknowledged."""
    seen: dict[str, int] = {}
    for value in read:
        seen[value] = seen.get(value, 0) + 1
    missing = [v for v in acked_values if v not in seen]
    duplicated = sorted(v for v, n in seen.items() if n > 1)
    positions = {v: i for i, v in enumerate(read)}
    in_order = all(
        positions[a] < positions[b]
        for a, b in itertools.pairwise(acked_values)
        if a in positions and b in positions
    )
    details = {
        "acknowledged": len(acked_values),
        "read": len(read),
        "missing": missing[:20],
        "missing_count": len(missing),
        "duplicated": duplicated[:20],
        "in_order": in_order,
        "killed_leader": killed,
        "new_leader": moved_to,
    }
    if missing or duplicated or not in_order:
        return Finding(
            True,
            f"{len(missing)} acknowledged records lost, {len(duplicated)} duplicated, "
            f"order {'kept' if in_order else 'broken'}",
            details,
        )
    return Finding(
        False,
        f"all {len(acked_values)} acknowledged records present once and in order; leadership "
        f"moved {killed} -> {moved_to} and back into a full ISR",
        details,
    )


SCENARIO = Scenario(
    id="smoke",
    title="Acknowledged writes survive a leader SIGKILL and restart",
    body=body,
    cluster=spec,
)
