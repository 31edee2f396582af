"""smoke: the cluster works end to end across a leader crash.

RF=3, min.insync.replicas=2; 1,000 records with acks=all; SIGKILL the leader and see
leadership move; 1,000 more; restart the killed broker and see it rejoin the ISR; every
acknowledged record must be present exactly once, in order.
"""

from __future__ import annotations

from faults import process
from fixtures.cluster import ClusterSpec
from fixtures.waiting import wait_until
from runrecord.outcome import CONSISTENT, VIOLATED, Symptom
from suites.scenario import Finding, RunContext, Scenario, Topic
from suites.steps import check_acknowledged, loss_symptom
from suites.workload import HistoryProducer

TOPIC = "smoke"
BATCH = 1000


def spec(kafka: str, mode: str) -> ClusterSpec:
    return ClusterSpec(kafka, mode, brokers=3)


def body(ctx: RunContext) -> Finding:
    cluster, timeline = ctx.cluster, ctx.timeline
    producer = HistoryProducer(cluster, ctx.history, acks="all")
    producer.send(TOPIC, (f"{i:06d}" for i in range(BATCH)))

    leader = cluster.partition_metadata(TOPIC).leader
    timeline.record("state", "leader", topic=TOPIC, leader=leader)
    process.kill(cluster, cluster.broker(leader))
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
    process.restart(cluster, cluster.broker(leader))
    wait_until(
        lambda: cluster.partition_metadata(TOPIC),
        lambda p: sorted(p.isrs) == [1, 2, 3],
        what=f"broker {leader} to rejoin the ISR of {TOPIC}-0",
        timeout=120,
        describe=lambda p: f"leader {p.leader} isr {sorted(p.isrs)}",
    )

    timeline.phase("check")
    acked = ctx.history.acknowledged()
    failed = [s for s in ctx.history.sends if not s.ok]
    ctx.expect(
        len(acked) == 2 * BATCH,
        f"all {2 * BATCH} acks=all writes acknowledged",
        f"{len(acked)} acknowledged; first error: {failed[0].error if failed else 'none'}",
    )
    check = check_acknowledged(ctx, TOPIC, acked)
    details = {"history": check.to_dict(), "killed_leader": leader, "new_leader": moved.leader}
    if not check.clean:
        observed = loss_symptom(check, None)
        return Finding(
            observed if observed.kind != CONSISTENT else Symptom(VIOLATED), check.line(), details
        )
    return Finding(
        Symptom(CONSISTENT),
        f"all {check.acked} acknowledged records present once and in order; leadership "
        f"moved {leader} -> {moved.leader} and back into a full ISR",
        details,
    )


SCENARIO = Scenario(
    id="smoke",
    title="Acknowledged writes survive a leader SIGKILL and restart",
    body=body,
    cluster=spec,
    topic=Topic.fixed(TOPIC, [1, 2, 3], **{"min.insync.replicas": 2}),
)
