"""kafka-7128-lagging-high-watermark: a new leader's high watermark lags the committed
offset, and a follower that was out of the ISR rejoins it without the committed tail.

ZooKeeper mode; A (b1), B (b2) and C (b3) hold the partition, min.insync.replicas=2,
unclean leader election off; the controller is b4, which holds nothing. B is made the
preferred replica first (a same-replicas reassignment; A keeps leading).

  1. S0 reaches all three. C leaves the ISR, unable to follow A: ISR {A, B}.
  2. S1 ([5, 9], large records) is acknowledged by ISR {A, B}: B fetched it and then
     asked for offset 10, which committed it. A's answer to that fetch, which carries the
     new high watermark, waits in A's purgatory for replica.fetch.wait.max.ms (B's is
     6 s); before it comes, B stops hearing from A (a one-way cut). B's high watermark
     stays 5.
  3. A preferred election makes B leader, with A still in the ISR: B's high watermark
     stays 5 as long as A, which cannot reach it, has not fetched (Partition.
     maybeIncrementLeaderHW counts A's unknown log end).
  4. C, cut off from A only, follows B and fetches from 5. Its log end reaches B's lagging
     high watermark, so 2.0.0 adds it to the ISR (Partition.maybeExpandIsr: LEO >= HW);
     2.0.1 does not, as C has not reached offset 10, where B's epoch starts (KAFKA-7128).
     B's answer, S1, never reaches C: C's packets of 1000 bytes and more from B are dropped.
  5. A fails, then B. 2.0.0: C, in the ISR without S1, is elected; A and B come back and
     truncate to it: S1, acknowledged, is gone. 2.0.1: no one is left to elect until B is
     back, and S1 survives.

Before 2.1 (KAFKA-7152) A removes a follower that has not fetched for replica.lag.time.max.ms (15 s)
whatever its log end (Partition.getOutOfSyncReplicas), so B's fetch wait stays well below
it; B itself never shrinks its ISR during the run (20 min).
"""

from __future__ import annotations

from basics.releases import Release
from faults import elections, filters, network, process
from fixtures.cluster import ClusterSpec
from fixtures.nodes import Node
from observe.state import partition_state, wait_state
from runrecord.outcome import LOST, Symptom
from suites import broker_logs, steps
from suites.scenario import Finding, RunContext, Scenario, Topic

TOPIC = "kafka7128"
A, B, C = 1, 2, 3
BATCH = 5
S0, S1 = (0, BATCH - 1), (BATCH, 2 * BATCH - 1)
PAD = 1500  # S1's records: each fetch response holding them spans packets of 1000+ bytes
LARGE = 1000
# Before KAFKA-7414 (apache/kafka#5654, in 2.0.1 and 2.1.0) a follower whose log ends past
# its leader's, with unclean election off, logs this and exits instead of truncating
# (ReplicaFetcherThread.handleOffsetOutOfRange). A or B, back after C was elected without
# S1, may do so on such a release (seen three times on 1.1.1): that is what the release
# does, and the loss is judged on the replicas that stayed up.
HALT = "Exiting because log truncation is not allowed"
HALT_FIXED_IN = "2.0.1"


def spec(kafka: str, mode: str) -> ClusterSpec:
    return steps.controller_apart(
        kafka,
        mode,
        brokers=4,
        node_config={
            "b1": {"replica.lag.time.max.ms": 15000},
            "b2": {"replica.lag.time.max.ms": 1200000, "replica.fetch.wait.max.ms": 6000},
        },
    )


def body(ctx: RunContext) -> Finding:
    cluster = ctx.cluster
    a, b, c = (ctx.broker(i) for i in (A, B, C))
    elections.reorder_replicas(cluster, TOPIC, [B, A, C])
    sends = steps.produce_batch(ctx, TOPIC, BATCH, to=A, acks="all")
    for broker in (A, B, C):
        ctx.expect_log(broker, [S0], "S0 on every replica")

    # 1. C leaves the ISR at offset 5, unable to follow A.
    if ctx.release.at_least(2, 1):
        # From 2.1 a follower that stops fetching stays in the ISR while no write leaves it
        # behind (KAFKA-7152), and a write would shift the offsets: C fails instead, the
        # controller takes it out (a new leader epoch), and it comes back cut off from A.
        # The cut lives on A, so that it outlives C's restart.
        process.crash(cluster, c)
        steps.await_isr(cluster, TOPIC, (A, B), what="1: C out of the ISR")
        c_from_a = network.partition(cluster, a, c)
        process.restart(cluster, c)
    else:
        # Before, A drops it once it has not fetched for replica.lag.time.max.ms: C leaves in
        # the leader epoch that S1 is then written in, as the JIRA tells it. (A new epoch
        # unknown to C would make A and B halt when C later leads: before KAFKA-7414, 2.0.1,
        # a follower whose log outgrows its leader's with no epoch to truncate to exits.)
        c_from_a = network.partition(cluster, c, a)
        steps.await_isr(cluster, TOPIC, (A, B), what="1: C out of the ISR")

    # 2. S1 committed by {A, B}; B stops hearing from A before it learns so.
    sends += steps.produce_batch(ctx, TOPIC, BATCH, to=A, acks="all", pad=PAD)
    deaf = network.partition(cluster, b, a, one_way=True)
    ctx.expect_log(B, [S0, S1], "2: S1 on B")

    # 3. B elected, A still in the ISR; B's high watermark still 5. C will follow B at
    # once: its filter goes in first.
    large = filters.drop_large(cluster, c, b, LARGE)
    elected = elections.elect_preferred(cluster, TOPIC)
    ctx.expect(
        A in elected.isr and elected.leader == B, "3: B leading, A still in the ISR", elected
    )
    lagging = steps.next_checkpointed_hw(cluster, B, TOPIC)
    ctx.expect(lagging == BATCH, f"3: B's high watermark {BATCH}, S1 committed", lagging)

    # 4. C follows B and fetches from 5; B's answer (S1) is lost on the way.
    large.await_dropped("4: B answered C's fetch from 5 with S1")
    joined = partition_state(cluster, TOPIC)
    ctx.expect_log(C, [S0], "4: C without S1")
    rejoined = C in joined.isr
    ctx.timeline.record("note", "isr-expansion", follower=C, joined=rejoined, state=str(joined))

    # 5. A fails, then B.
    process.crash(cluster, a)
    without_a = wait_state(cluster, TOPIC, lambda s: A not in s.isr, what="5: A out of the ISR")
    ctx.expect(without_a.leader == B, "5: B still leading", without_a)
    process.crash(cluster, b)
    deaf.heal()  # B's namespace went with it
    last = steps.await_election(
        cluster, TOPIC, C if rejoined else None, what="5: C, in the ISR, elected; else no one"
    )
    large.heal()
    c_from_a.heal()
    halted = {node.node_id: _restart(ctx, node) for node in (b, a)}
    halted = {i: line for i, line in halted.items() if line is not None}
    # The fetcher halts the broker only once it learns of C's shorter log, which may come
    # after the restart served (CI saw A do so): a replica stuck so is halted too.
    settled = steps.converge(ctx, TOPIC, [i for i in (A, B, C) if i not in halted])
    halted |= {i: line for i, line in settled.stuck.items() if _halts(ctx, line)}
    up = [i for i in (A, B, C) if i not in halted]
    observed, verdicts, details = steps.judge_loss(ctx, TOPIC, sends, up)
    details |= {"c_joined_isr": rejoined, "isr_after_c_fetch": str(joined), "last": str(last)}
    details["halted"] = halted
    if halted:
        verdicts += (
            f"; broker(s) {sorted(halted)} exited on restart, as releases before "
            f"{HALT_FIXED_IN} do (KAFKA-7414): {next(iter(halted.values()))}"
        )
    how = (
        f"C, at {BATCH} = B's lagging high watermark, "
        + ("joined the ISR without S1 and was elected" if rejoined else "was kept out of the ISR")
        + f" ({joined}; then {last})"
    )
    return Finding(observed, f"{how}; {verdicts}", details)


def _halts(ctx: RunContext, line: str) -> bool:
    """Whether the log line is the exit its release is declared to take (HALT)."""
    return HALT in line and ctx.release.parts < Release(HALT_FIXED_IN).parts


def _restart(ctx: RunContext, node: Node) -> str | None:
    """Restart the node; None once it serves, or the line it logged exiting, where its
    release is declared to halt so (HALT). Any other exit ends the run not reached."""
    mark = broker_logs.log_mark(node)
    try:
        process.restart(ctx.cluster, node)
    except process.Exited:
        lines = broker_logs.log_lines(node, HALT, since=mark)
        if not lines or not _halts(ctx, lines[0]):
            raise
        line = lines[0]
        ctx.timeline.record("note", "halted", node=node.name, line=line, jira="KAFKA-7414")
        return line
    return None


SCENARIO = Scenario(
    id="kafka-7128-lagging-high-watermark",
    title="KAFKA-7128: a follower rejoins the ISR at a new leader's lagging high watermark, "
    "without the committed tail, and is elected",
    body=body,
    cluster=spec,
    topic=Topic.fixed(
        TOPIC, [A, B, C], **{"min.insync.replicas": 2, "unclean.leader.election.enable": False}
    ),
    jira="KAFKA-7128",
    fixed_in="2.0.1",  # and 2.1.0: Partition.maybeExpandIsr checks the epoch's start offset
    modes=("zk",),
    min_release="0.11.0",
    min_release_reason="needs leader epochs (KIP-101, 0.11.0) for the follower to keep its log",
    # C, without S1, elected: acknowledged S1 (from offset 5) is gone.
    symptom=Symptom(LOST, offset=S1[0]),
)
