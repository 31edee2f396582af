"""KIP-101's two scenarios: truncation by high watermark loses or forks data.

Broker A (b1) follows broker B (b2), which leads; broker C (b3) is the controller and holds
nothing. Both scenarios run on ZooKeeper-mode releases, before (0.10.2) and after (0.11+)
leader epochs replaced the high watermark as the truncation point.
"""

from __future__ import annotations

from faults import network, power, process
from observe.replicas import replica, spans
from observe.state import PartitionState, partition_state
from runrecord.outcome import DIVERGED, LOST, Symptom
from runrecord.power import CUT, POWER_MODELS
from suites import broker_logs, steps
from suites.convergence import converge
from suites.scenario import Finding, RunContext, Scenario, Topic

A, B, C = 1, 2, 3


# -- scenario 1 ---------------------------------------------------------------------------
S1 = "kip101s1"


# min.insync.replicas=1 as in the KIP's figure. A killed follower leaves the ISR, so once B
# fails A can only be elected uncleanly: the topic allows that. What differs between
# releases is whether A's restart threw m2 away before that election.
S1_TOPIC = Topic.fixed(
    S1, [B, A], **{"min.insync.replicas": 1, "unclean.leader.election.enable": True}
)


def s1_body(ctx: RunContext) -> Finding:
    cluster = ctx.cluster
    a, b = cluster.broker(A), cluster.broker(B)
    m1 = steps.produce_batch(ctx, S1, 1, to=B, acks="all")
    # A's high watermark reaches its checkpoint file every 5 s. Right after a checkpoint
    # that records m1 as committed, m2 is written and A dies: A's checkpoint still says 1.
    steps.await_checkpointed_hw(cluster, A, S1, 1)
    steps.next_checkpointed_hw(cluster, A, S1)
    m2 = steps.produce_batch(ctx, S1, 1, to=B, acks="all")
    process.kill(cluster, a)
    ctx.expect_log(A, [(0, 0), (1, 1)], "A fetched m2 before dying")
    hw = steps.checkpointed_hw(cluster, A, S1)
    ctx.expect(
        hw == 1,
        "A's checkpointed high watermark 1 (m2 committed, A not told)",
        f"high watermark {hw}",
    )
    steps.await_isr(cluster, S1, (B,), what="A out of the ISR after its crash")

    # A restarts but cannot reach B: it becomes B's follower and does whatever its release
    # does on becoming a follower, without fetching anything.
    cut = network.partition(cluster, b, a)
    mark = broker_logs.log_mark(a)
    process.restart(cluster, a)
    # A logs "Added fetcher" once it is B's follower: before 0.11 it has truncated to its
    # high watermark by then (ReplicaManager.makeFollowers truncates, then adds fetchers).
    broker_logs.await_log_line(
        a,
        lambda line: "Added fetcher" in line and S1 in line,
        since=mark,
        what="A to become B's follower",
    )
    after_restart = replica(cluster, A, S1)
    ctx.timeline.record("note", "after-restart", broker=A, log=spans(after_restart))

    # B fails; A, the only replica left, is elected.
    process.kill(cluster, b)
    cut.heal()  # B's namespace went with it; nothing is left to remove
    steps.await_leader(cluster, S1, A, what="A elected after B failed")
    process.restart(cluster, b)
    convergence = converge(ctx, S1, [A, B], timeout=60)
    steps.require_settled(convergence, "B converging with A after its restart", stuck_ok=False)
    verdict = steps.judge(ctx, S1)
    history = steps.check_acknowledged(ctx, S1, m1 + m2)
    details = {
        "a_after_restart": spans(after_restart),
        "history": history.to_dict(),
        "high_watermark_checkpoint_of_a": hw,
        "convergence": convergence.to_dict(),
        "checker": verdict.to_dict(),
    }
    observed = steps.loss_symptom(history, verdict)
    if history.durable_lost:
        return Finding(
            observed,
            f"acknowledged m2 lost: A truncated to its high watermark on "
            f"restart (A held {spans(after_restart)}) and then led",
            details,
        )
    if verdict.status == "diverged":
        return Finding(observed, f"replicas {observed.describe()}", details)
    return Finding(
        observed,
        f"m2 kept: A restarted holding {spans(after_restart)} and led with both records",
        details,
    )


# -- scenario 2 ---------------------------------------------------------------------------
S2 = "kip101s2"


def _s2_outage_cut(ctx: RunContext) -> PartitionState:
    """The recovery-point model: each replica's log cut where the KIP says. Returns the
    partition's state before the outage."""
    cluster = ctx.cluster
    for _ in range(3):  # m1, m2, m3: three batches, all committed
        steps.produce_batch(ctx, S2, 1, to=B, acks="all")
    # Both replicas know all three are committed, so a restart keeps what is on disk.
    steps.await_checkpointed_hw(cluster, A, S2, 3)
    steps.await_checkpointed_hw(cluster, B, S2, 3)
    before = partition_state(cluster, S2)
    # A power outage hits both; each loses a different unflushed tail. A goes first, so B
    # remains the last member of the ISR.
    power.power_loss(cluster, cluster.broker(A), cut_at={(S2, 0): 2})
    steps.await_isr(cluster, S2, (B,), what="A out of the ISR")
    power.power_loss(cluster, cluster.broker(B), cut_at={(S2, 0): 1})
    return before


def _s2_outage_on_disks(ctx: RunContext) -> PartitionState:
    """On a crash-simulating filesystem nothing is cut by hand: Kafka fsyncs none of these
    appends, and each replica keeps what the OS had written back before the outage, at the
    moments the KIP's story has it ("flushed asynchronously"): B's disk after m1, A's after
    m2, each with the high watermark it had checkpointed by then."""
    cluster = ctx.cluster
    a, b = cluster.broker(A), cluster.broker(B)
    for written, disk in ((1, b), (2, a), (3, None)):  # m1, m2, m3
        steps.produce_batch(ctx, S2, 1, to=B, acks="all")
        for broker_id in (A, B):
            steps.await_checkpointed_hw(cluster, broker_id, S2, written)
        if disk is not None:
            power.writeback(cluster, disk)
    before = partition_state(cluster, S2)
    power.power_loss(cluster, a)
    steps.await_isr(cluster, S2, (B,), what="A out of the ISR")
    power.power_loss(cluster, b)
    return before


def s2_body(ctx: RunContext) -> Finding:
    cluster = ctx.cluster
    outage = _s2_outage_cut if cluster.power_model == CUT else _s2_outage_on_disks
    before = outage(ctx)
    ctx.expect_log(A, [(0, 0), (1, 1)], "A after the outage")
    ctx.expect_log(B, [(0, 0)], "B after the outage")

    # B comes back first and leads in a new epoch; it accepts m4 at offset 1.
    process.restart(cluster, cluster.broker(B))
    steps.await_leader(
        cluster,
        S2,
        B,
        min_epoch=(before.leader_epoch or 0) + 1,
        what="B leading again in a new epoch",
    )
    steps.produce_batch(ctx, S2, 1, to=B, acks="1")
    ctx.expect_log(B, [(0, 0), (1, 1)], "B wrote m4 at offset 1")

    prediction = steps.predict(ctx, S2, leader=B, follower=A)
    process.restart(cluster, cluster.broker(A))  # A follows B
    return steps.conclude(
        ctx,
        S2,
        leader=B,
        follower=A,
        prediction=prediction,
        details={},
        converged="A truncated m2 and converged with B",
    )


S1_SCENARIO = Scenario(
    id="kip-101-s1",
    title="KIP-101 scenario 1: high watermark truncation, then an immediate leader election",
    body=s1_body,
    cluster=steps.controller_apart,
    topic=S1_TOPIC,
    kip="KIP-101",
    jira="KAFKA-1211",
    fixed_in="0.11.0",
    modes=("zk",),
    # m2, acknowledged at offset 1, is gone: A truncated it and then led.
    symptom=Symptom(LOST, offset=1),
)

S2_SCENARIO = Scenario(
    id="kip-101-s2",
    title="KIP-101 scenario 2: replicas diverge on restart after both lose unflushed tails",
    body=s2_body,
    cluster=steps.controller_apart,
    topic=Topic.fixed(S2, [B, A], **{"min.insync.replicas": 1}),
    kip="KIP-101",
    jira="KAFKA-1211",
    fixed_in="0.11.0",
    modes=("zk",),
    power_models=POWER_MODELS,
    # A keeps m2 at offset 1 where B wrote m4: both committed in their epochs.
    symptom=Symptom(DIVERGED, offset=1),
)
