"""KIP-279 scenario 3 (KIP-101 appendix (a)): alternating unclean failovers with
min.insync.replicas=1 leave a divergence at offset 0 that KIP-101's truncation cannot see.

Brokers A (b1) and B (b2) hold the partition, never both alive at once; broker C (b3) is
the controller. With unclean elections enabled on the topic, every start of the broker
that is down elects it:

  1. A writes A:0.  A stops; B starts and leads.      (B never saw A:0)
  2. B writes B:0.  B stops; A starts and leads.
  3. A writes A:1.  A stops; B starts and leads.
  4. B writes B:1.
  5. A starts and follows B, asking for the end of the epoch of A:1.

B never had that epoch. Under KIP-101 rules it answers the start of its next epoch,
offset 1: A keeps A:0 and the replicas differ at offset 0, below the high watermark.
Under KIP-279 rules B answers with an older epoch, A asks again (two rounds) and
truncates to offset 0, then refetches B's log.
"""

from __future__ import annotations

from basics.errors import NotReached
from faults import process
from fixtures.waiting import WaitTimeout, wait_until
from observe.state import partition_state
from runrecord.outcome import DIVERGED, Symptom
from suites import steps
from suites.scenario import Finding, RunContext, Scenario, Topic

TOPIC = "kip279s3"
A, B, C = 1, 2, 3


def _await_gone(ctx: RunContext, broker_id: int) -> None:
    """The controller saw the broker die (its session expired)."""
    try:
        wait_until(
            ctx.cluster.registered_brokers,
            lambda ids: broker_id not in ids,
            what=f"broker {broker_id} gone",
            timeout=60,
            describe=sorted,
        )
    except WaitTimeout as exc:
        raise NotReached(exc.what, str(exc.last)) from None


def _fail_over(ctx: RunContext, stop: int, start: int, min_epoch: int) -> int:
    """Stop the leader, start the other broker, see it elected uncleanly; its epoch."""
    cluster = ctx.cluster
    process.kill(cluster, cluster.broker(stop))
    _await_gone(ctx, stop)
    process.restart(cluster, cluster.broker(start))
    state = steps.await_leader(
        cluster,
        TOPIC,
        start,
        min_epoch=min_epoch,
        what=f"broker {start} elected (unclean) after {stop} stopped",
    )
    ctx.timeline.record("election", "unclean", topic=TOPIC, leader=start, epoch=state.leader_epoch)
    return state.leader_epoch or 0


def body(ctx: RunContext) -> Finding:
    cluster = ctx.cluster
    # B goes first, so that A's write reaches A alone.
    process.kill(cluster, cluster.broker(B))
    steps.await_isr(cluster, TOPIC, (A,), what="B out of the ISR")
    epochs = {"A:0": partition_state(cluster, TOPIC).leader_epoch or 0}

    steps.produce_batch(ctx, TOPIC, 1, to=A, acks="1")  # step 1: A:0
    ctx.expect_log(A, [(0, 0)], "step 1")
    epochs["B:0"] = _fail_over(ctx, stop=A, start=B, min_epoch=epochs["A:0"] + 1)
    ctx.expect_log(B, [], "step 1, B never saw A:0")

    steps.produce_batch(ctx, TOPIC, 1, to=B, acks="1")  # step 2: B:0
    ctx.expect_log(B, [(0, 0)], "step 2")
    epochs["A:1"] = _fail_over(ctx, stop=B, start=A, min_epoch=epochs["B:0"] + 1)

    steps.produce_batch(ctx, TOPIC, 1, to=A, acks="1")  # step 3: A:1
    ctx.expect_log(A, [(0, 0), (1, 1)], "step 3")
    epochs["B:1"] = _fail_over(ctx, stop=A, start=B, min_epoch=epochs["A:1"] + 1)

    steps.produce_batch(ctx, TOPIC, 1, to=B, acks="1")  # step 4: B:1
    ctx.expect_log(B, [(0, 0), (1, 1)], "step 4")
    ctx.timeline.record("note", "epochs", **epochs)

    prediction = steps.predict(ctx, TOPIC, leader=B, follower=A)
    process.restart(cluster, cluster.broker(A))  # step 5: A follows B
    return steps.conclude(
        ctx,
        TOPIC,
        leader=B,
        follower=A,
        prediction=prediction,
        details={"epochs": epochs},
        converged="A truncated and converged with B",
    )


SCENARIO = Scenario(
    id="kip-279-s3",
    title="KIP-101 appendix (a): alternating unclean failovers diverge at offset 0",
    body=body,
    cluster=steps.controller_apart,
    topic=Topic.fixed(
        TOPIC, [A, B], **{"min.insync.replicas": 1, "unclean.leader.election.enable": True}
    ),
    kip="KIP-279",
    jira="KAFKA-6361",
    fixed_in="2.0.0",
    min_release="0.11.0",
    min_release_reason="needs leader epochs (KIP-101, 0.11.0)",
    modes=("zk",),
    # A keeps A:0 where B holds B:0.
    symptom=Symptom(DIVERGED, offset=0),
)
