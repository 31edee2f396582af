"""KIP-279 scenario 1 (KAFKA-6361): a preferred election, then the new leader's session
expires before the old leader could truncate.

Brokers A (b1) and B (b2) hold the partition; broker C (b3) is the controller and holds
nothing, so no fault touches it. Following the KIP's steps:

  1. A leads in epoch e1 and appends [0, 10] (replicated to B) and [11, 20] (not: B is cut
     off from A, yet stays in the ISR because replica.lag.time.max.ms is long).
  2. A preferred election makes B leader in e2. A cannot reach B, so it never truncates.
     B appends [11, n] in e2.
  3. B's ZooKeeper session expires (B is cut off from ZooKeeper; its session timeout is
     short, A's long). The controller makes A leader in e3; A appends [21, 30].
  4. Heal. B becomes A's follower and asks A for the end of epoch e2.

Under KIP-101 rules (before 2.0) A answers 21, the start of e3:
  n < 20  B keeps [11, n], fetches from n+1, gets [11, 20] back and cannot append it: the
          follower is stuck (its fetcher thread dies in 1.1.1).
  n == 20 B keeps [11, 20] of e2 and fetches from 21: a silent divergence at 11.
  n > 20  B truncates to 21, which falls inside [11, n], so to 11: it converges, says the
          KIP; Kafka before 2.0 departs from that (see MID_BATCH below).
Under KIP-279 rules (2.0+) A answers (e1, 21); B drops everything above e1 and converges.
"""

from __future__ import annotations

from functools import partial

from faults import elections, network, process, replication, session
from fixtures.cluster import ClusterSpec
from runrecord.outcome import DEPARTS, DIVERGED, STUCK, Symptom
from suites import steps
from suites.scenario import Departure, Finding, RunContext, Scenario, Topic

TOPIC = "kip279"
A, B, C = 1, 2, 3
FIRST, SECOND, THIRD = 11, 10, 10  # records in [0, 10], [11, 20] and [21, 30]


def spec(kafka: str, mode: str) -> ClusterSpec:
    zk = mode == "zk"
    return ClusterSpec(
        kafka,
        mode,
        brokers=3,
        controller=C if zk else None,
        broker_config={
            # Followers that stop fetching stay in the ISR for the whole scenario.
            "replica.lag.time.max.ms": 600000,
            "unclean.leader.election.enable": False,
            **({"zookeeper.session.timeout.ms": 60000} if zk else {}),
        },
        # B's session must expire quickly when it is cut off; nobody else's may.
        node_config={"b2": {"zookeeper.session.timeout.ms": 6000}} if zk else {},
    )


def assignment(mode: str) -> list[list[int]]:
    # A leads first and B must be the preferred replica for step 2. ZooKeeper mode makes B
    # preferred by reordering the replicas; KRaft by B stepping down once (see `body`).
    return [[A, B]] if mode == "zk" else [[B, A]]


def body(ctx: RunContext, *, n: int) -> Finding:
    cluster = ctx.cluster
    a, b = ctx.broker(A), ctx.broker(B)
    if cluster.mode == "zk":
        # Reordering the replicas makes B preferred; A keeps leading, in a new epoch.
        e1 = elections.reorder_replicas(cluster, TOPIC, [B, A])
    else:
        # KRaft: B steps down once (a clean stop hands leadership to A in a new epoch) and
        # rejoins as A's follower.
        process.kill(cluster, b, signal="SIGTERM")
        e1 = steps.await_leader(cluster, TOPIC, A, what="A leading after B's clean stop")
        process.restart(cluster, b)
    steps.await_isr(cluster, TOPIC, (A, B), what="B in A's ISR")

    # Step 1: [0, 10] reaches both; [11, 20] only A. B is held back: cut off from A, yet in
    # the ISR, since replica.lag.time.max.ms is long.
    steps.produce_batch(ctx, TOPIC, FIRST, to=A, acks="all")
    ctx.expect_log(B, [(0, 10)], "step 1, [0, 10] replicated")
    held = replication.hold_back(cluster, TOPIC, b, a)
    steps.produce_batch(ctx, TOPIC, SECOND, to=A, acks="1")
    ctx.expect_log(A, [(0, 10), (11, 20)], "step 1")
    ctx.expect_log(B, [(0, 10)], "step 1, B held back")
    held.assert_in_isr()

    # Step 2: preferred election to B; A, cut off from B, cannot truncate.
    e2 = elections.elect_preferred(cluster, TOPIC)
    ctx.expect(set(e2.isr) == {A, B}, "A still in the ISR after the preferred election", e2)
    steps.produce_batch(ctx, TOPIC, n - FIRST + 1, to=B, acks="1")
    ctx.expect_log(B, [(0, 10), (11, n)], "step 2")
    ctx.expect_log(A, [(0, 10), (11, 20)], "step 2, A not truncated")

    # Step 3: B's session expires; the controller elects A again; A appends in e3. B does
    # not know it was deposed; its clients are cut off too, so that no client's write lands
    # on this zombie (that is KIP-359's scenario, not this one).
    expiry = session.expire_session(cluster, b)
    cut_clients = network.cut_clients(cluster, b)
    e3 = steps.await_leader(
        cluster,
        TOPIC,
        A,
        what="A leading again after B's expiry",
        min_epoch=(e2.leader_epoch or 0) + 1,
    )
    steps.produce_batch(ctx, TOPIC, THIRD, to=A, acks="1")
    ctx.expect_log(A, [(0, 10), (11, 20), (21, 30)], "step 3")
    epochs = {"e1": e1.leader_epoch, "e2": e2.leader_epoch, "e3": e3.leader_epoch}
    ctx.timeline.record("note", "epochs", **epochs)

    # What the protocol model says B will do, from the logs exactly as they are now.
    prediction = steps.predict(ctx, TOPIC, leader=A, follower=B)

    # Step 4: heal; B follows A. (Its session expired, so B is no longer in the ISR that
    # the hold-back kept it in: the cut comes off without that check.)
    held.cut.heal()
    cut_clients.heal()
    expiry.heal()
    return steps.conclude(
        ctx,
        TOPIC,
        leader=A,
        follower=B,
        prediction=prediction,
        details={"n": n, "epochs": epochs},
        converged="B converged with A",
    )


# KIP-279's case 3 says a follower that truncates into the middle of its batch [11, n]
# truncates the whole batch and refetches from 11. Before 2.0 the batch does go, but
# Log.truncateTo then sets the log end offset to the requested 21, so the follower fetches
# from 21 and offsets 11-20 are missing from its log for good.
MID_BATCH = Departure(
    until="2.0.0",
    kip_says="n > 20 converges: the follower truncates the whole batch [11, n] and refetches "
    "from 11",
    kafka_does="drops [11, n] but sets its log end offset to 21 and fetches from there, so "
    "offsets 11-20 are missing on the follower",
    reference="Log.truncateTo updates the log end offset to the target offset; from 2.0 "
    "KAFKA-6361 truncates to the end of the last common epoch, a batch boundary",
    symptom=Symptom(DEPARTS, offset=FIRST, shows=DIVERGED),
)


def _scenario(
    suffix: str,
    n: int,
    fixed_in: str | None,
    case: str,
    symptom: Symptom | None,
    departures: tuple[Departure, ...] = (),
) -> Scenario:
    return Scenario(
        id=f"kip-279-s1-{suffix}",
        title=f"KAFKA-6361: preferred election, then the new leader's session expires ({case})",
        body=partial(body, n=n),
        cluster=spec,
        topic=Topic(TOPIC, assignment, {"min.insync.replicas": 1}),
        kip="KIP-279",
        jira="KAFKA-6361",
        fixed_in=fixed_in,
        min_release="0.11.0",
        min_release_reason="needs leader epochs (KIP-101, 0.11.0)",
        departures=departures,
        symptom=symptom,
    )


# n < 20: B, the follower, cannot append A's [11, 20] over its own [11, n].
SHORT = _scenario(
    "short", 15, "2.0.0", "n < 20: the follower gets stuck", Symptom(STUCK, replicas=[B])
)
# n == 20: B keeps [11, 20] of e2 where A holds [11, 20] of e1.
EQUAL = _scenario(
    "equal", 20, "2.0.0", "n == 20: silent divergence", Symptom(DIVERGED, offset=FIRST)
)
LONG = _scenario(
    "long", 25, None, "n > 20: converges even before the fix, says the KIP", None, (MID_BATCH,)
)
