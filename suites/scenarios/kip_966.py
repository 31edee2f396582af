"""kip-966-last-replica-standing: KIP-966's "last replica standing" loss, and Eligible Leader
Replicas (ELR) keeping the acknowledged records.

RF=3, min.insync.replicas=2, acks=all, unclean leader election off. C (b3, the KIP's broker
2) leads; A (b1, its broker 0) and B (b2, its broker 1) follow. The KIP's motivation:

  T0  A is cut off; S1 (five records, acks=all) is produced and acknowledged once A has
      left the ISR: ISR {B, C}.
  T1  B is cut off from C; S2 (one record, acks=1) makes it lag, and it leaves too: ISR
      {C}. With ELR, B enters the ELR.
  T2  C loses power: killed, and its unflushed tail, S1 and S2, is gone (faults.power: a
      SIGKILL alone keeps the page cache).
  T3  B's cut heals and C restarts; then A's cut heals.

Without ELR (every ZooKeeper release; KRaft before 4.1 unless the feature is switched on)
C is the only ISR member and is elected again; A and B truncate to its shorter log, and S1
is gone from every replica. With ELR (eligible.leader.replicas.version=1) the controller
elects B from the ELR as soon as C is fenced, C's unclean restart takes C out of the ELR,
and S1 survives.

Before KAFKA-7414 (2.0.1) B, whose log is longer than C's, halts its broker instead of
truncating; it is restarted, as an operator would, and truncates then.

A is cut off from B as well, so that it cannot rejoin B's ISR before C restarts: an ISR of
min.insync.replicas members clears the ELR and would hide what C's restart does. In
ZooKeeper mode the controller is b4, which holds no replica.

`kip-966-last-replica-standing-elr` formats the cluster with the feature on (on 4.0 it is
off by default). `kip-966-last-known-leader` shows the fallback that can still elect C:
B dies as well, both restart uncleanly, and the controller elects C, the last known
leader, once B's restart empties the ELR.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from basics.errors import NotReached
from checkers.metadata_log import Registration
from faults import network, power, process
from fixtures.cluster import ClusterSpec
from fixtures.waiting import WaitTimeout, wait_until
from observe import kraft
from observe.state import PartitionState, partition_state, wait_state
from observe.state import history as metadata_history
from runrecord.conformance import Statement
from runrecord.history import Send
from runrecord.outcome import LOST, Symptom
from runrecord.states import StateHistory
from suites import broker_logs, steps
from suites.scenario import Finding, RunContext, Scenario, Topic
from suites.scenarios.kip_966_rows import Story, last_known_leader_rows, last_replica_rows, table

TOPIC = "kip966"
A, B, C = 1, 2, 3
BATCH = 5
S0, S1 = (0, BATCH - 1), (BATCH, 2 * BATCH - 1)  # acks=all; S2, one acks=1 record, follows
S1_LOST = Symptom(LOST, offset=S1[0])  # the bug: acknowledged S1 gone from the final log
LAG_MS = 10000  # how long a cut-off follower stays in the ISR
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"  # written on a clean stop, deleted at start
# Before KAFKA-7414 (2.0.1, 2.1.0) a follower whose leader's log is shorter than its own,
# with unclean leader election off, halts its broker rather than truncate.
HALT = "log truncation is not allowed"


def spec(kafka: str, mode: str, *, elr: bool = False) -> ClusterSpec:
    lag = {"replica.lag.time.max.ms": LAG_MS}
    if mode == "zk":
        # Short sessions, so that ZooKeeper notices C's power loss quickly; the controller
        # (b4) keeps a long one and holds no replica.
        return steps.controller_apart(kafka, mode, brokers=4, broker_config=lag)
    features = {kraft.ELR_FEATURE: 1} if elr else {}
    return ClusterSpec(kafka, mode, brokers=3, broker_config=lag, features=features)


def _story(ctx: RunContext) -> Story:
    if ctx.mode == "zk":
        return Story("zk", False, None)
    level = kraft.feature_level(ctx.cluster.controllers, kraft.ELR_FEATURE)
    ctx.timeline.record("note", "elr-feature", level=level)
    return Story("kraft", level >= 1, level)


def _first_steps(
    ctx: RunContext, story: Story
) -> tuple[list[Send], network.LinkCut, network.LinkCut]:
    """S0 everywhere; T0 A out of the ISR, S1 acknowledged by {B, C}; T1 B out too.

    From 2.1 (KAFKA-7152) a follower leaves the ISR only once it lags the leader's log end
    for replica.lag.time.max.ms, so each cut is followed by a write the cut-off follower
    lacks: S1 (acks=all, acknowledged once A has left), then S2 (acks=1:
    with B gone the ISR falls below min.insync.replicas and acks=all would be refused)."""
    cluster = ctx.cluster
    a, b, c = (ctx.broker(i) for i in (A, B, C))
    sends = steps.produce_batch(ctx, TOPIC, BATCH, to=C, acks="all")
    for broker in (A, B, C):
        ctx.expect_log(broker, [S0], "S0 on every replica")

    cut_a = network.partition(cluster, a, [b, c])
    sends += steps.produce_batch(ctx, TOPIC, BATCH, to=C, acks="all")
    story.states["t0"] = steps.await_isr(cluster, TOPIC, (B, C), what="T0: A out of the ISR")
    ctx.expect_log(B, [S0, S1], "S1 on B: ISR {B, C} acknowledged it")
    ctx.expect_log(A, [S0], "S1 not on A")

    cut_b = network.partition(cluster, b, c)
    sends += steps.produce_batch(ctx, TOPIC, 1, to=C, acks="1")
    t1 = steps.await_isr(cluster, TOPIC, (C,), what="T1: B out of the ISR too")
    story.states["t1"] = t1
    ctx.expect_log(B, [S0, S1], "S2 not on B")
    if story.elr:
        ctx.expect(t1.elr == (B,), "T1: B in the ELR (the ISR fell below min ISR)", t1)
    return sends, cut_a, cut_b


def _lose_power(ctx: RunContext, story: Story) -> None:
    """T2: C loses power; S1 was in its unflushed tail."""
    c = ctx.broker(C)
    power.power_loss(ctx.cluster, c, cut_at={(TOPIC, 0): BATCH})
    ctx.expect_log(C, [S0], "T2: C lost S1 (and S2) with its unflushed tail")
    story.clean_marker = any((d / CLEAN_SHUTDOWN).exists() for d in c.log_dirs)
    ctx.expect(not story.clean_marker, f"T2: no {CLEAN_SHUTDOWN} in C's log dirs", "one found")


def _c_registration(ctx: RunContext, after: int) -> Registration:
    """C's registration that came after metadata offset `after` (its restart)."""
    log = kraft.metadata_log(ctx.cluster.controllers)
    found = [r for r in log.registrations if r.broker_id == C and r.offset > after]
    ctx.expect(bool(found), f"C registered again after offset {after}", log.registrations[-3:])
    return found[0]


def _unclean_removal(ctx: RunContext, story: Story, since: PartitionState) -> PartitionState:
    """The record that took C out of the ELR when it registered after its unclean shutdown:
    written with the registration (ClusterControlManager.registerBroker adds the shutdown
    records first), while B alone is the ISR."""
    reg = _c_registration(ctx, since.version or 0)
    story.registration = reg
    states = metadata_history(ctx.cluster, TOPIC, 0)
    found = next(
        (
            s
            for s in states
            if (since.version or 0) < (s.version or 0) < reg.offset and C not in s.elr
        ),
        None,
    )
    ctx.expect(
        found is not None and found.isr == (B,) and found.leader == B,
        f"C out of the ELR, B still leading alone, before C's registration at {reg.offset}",
        found or [str(s) for s in states if (s.version or 0) > (since.version or 0)],
    )
    assert found is not None
    return found


def _rejoin(ctx: RunContext) -> tuple[str, dict[int, int]]:
    """Wait for A, B and C to share the ISR again; a broker that halted on purpose rather
    than truncate (before KAFKA-7414) is restarted, as an operator would, and truncates
    then. Returns what happened, for the summary ("" when nothing halted), and where each
    restarted broker's log stood at its restart: the halt line before it is history, not a
    sign that the restarted broker is stuck."""
    cluster = ctx.cluster

    def probe() -> list[int] | None:
        exited = [i for i in (A, B, C) if ctx.broker(i).status() == "exited"]
        if exited or set(partition_state(cluster, TOPIC).isr) == {A, B, C}:
            return exited
        return None

    try:
        halted = wait_until(probe, lambda r: r is not None, what="a full ISR", timeout=120)
    except WaitTimeout as exc:
        raise NotReached(
            "A, B and C in the ISR again, or one of them halted", str(exc.last)
        ) from None
    said, marks = [], {}
    for broker_id in halted:
        node = ctx.broker(broker_id)
        line = next(iter(broker_logs.log_lines(node, HALT)), None)
        ctx.expect(
            line is not None, f"broker {broker_id} halted rather than truncate", node.tail_log()
        )
        assert line is not None
        ctx.timeline.record("note", "halted", broker=broker_id, line=line)
        marks[broker_id] = broker_logs.log_mark(node)
        process.restart(cluster, node)
        said.append(f"broker {broker_id} halted ({line[line.find(HALT) :][:120]}), then truncated")
    return "; ".join(said), marks


def _record_history(ctx: RunContext, story: Story) -> None:
    if ctx.mode == "zk":
        assert ctx.recorder is not None
        story.history = ctx.recorder.stop()
    else:
        story.history = metadata_history(ctx.cluster, TOPIC, 0)
    ctx.run.write_state_history(StateHistory([s.record() for s in story.history]))


def _finish(
    ctx: RunContext,
    story: Story,
    sends: list[Send],
    rows: Callable[[Story], list[Statement]],
    how: str,
    since: dict[int, int] | None = None,
) -> Finding:
    observed, verdicts, details = steps.judge_loss(ctx, TOPIC, sends, [A, B, C], since=since)
    _record_history(ctx, story)
    conformance = table(rows(story))
    ctx.run.write_conformance(conformance)
    print(conformance.table())
    details |= {
        "elr": story.elr,
        "elr_feature_level": story.feature_level,
        "states": {k: str(v) for k, v in story.states.items()},
        "conformance": [vars(r) for r in conformance.statements],
    }
    if observed.kind == LOST:
        return Finding(observed, f"acknowledged S1 lost: {how}; {verdicts}", details)
    return Finding(observed, f"S1 kept: {how}; {verdicts}", details)


def body(ctx: RunContext) -> Finding:
    cluster = ctx.cluster
    story = _story(ctx)
    sends, cut_a, cut_b = _first_steps(ctx, story)
    _lose_power(ctx, story)
    if story.elr:
        t2 = wait_state(cluster, TOPIC, lambda s: s.leader != C, what="C fenced", timeout=90)
        ctx.expect(
            t2.leader == B and t2.isr == (B,) and t2.elr == (C,),
            "T2: C fenced; B elected from the ELR; C in the ELR",
            t2,
        )
    else:
        t2 = wait_state(cluster, TOPIC, lambda s: s.leader == -1, what="C gone", timeout=90)
        ctx.expect(t2.isr == (C,), "T2: no leader; C the last ISR member", t2)
    story.states["t2"] = t2

    cut_b.heal()
    process.restart(cluster, ctx.broker(C))
    if story.elr:
        story.states["unclean"] = _unclean_removal(ctx, story, t2)
        t3 = partition_state(cluster, TOPIC)
        ctx.expect(t3.leader == B, "T3: B still leads after C's restart", t3)
        how = (
            f"B was elected from the ELR when C was fenced ({t2}); C's unclean restart took "
            f"it out of the ELR ({story.states['unclean']})"
        )
    else:
        t3 = steps.await_leader(
            cluster,
            TOPIC,
            C,
            min_epoch=(t2.leader_epoch or 0) + 1,
            what="T3: C, the only ISR member, elected again",
        )
        how = (
            f"C, the last ISR member, lost it with power and was elected again ({t3}); "
            "A and B truncated to its log"
        )
    story.states["t3"] = t3
    cut_a.heal()
    halted, marks = _rejoin(ctx)
    how = f"{how}; {halted}" if halted else how
    return _finish(ctx, story, sends, last_replica_rows, how, since=marks)


def last_known_leader_body(ctx: RunContext) -> Finding:
    """B dies too; both restart uncleanly; C, the last known leader, is elected."""
    cluster = ctx.cluster
    story = _story(ctx)
    ctx.expect(story.elr, "ELR on (eligible.leader.replicas.version=1)", story.why_off)
    sends, cut_a, cut_b = _first_steps(ctx, story)
    process.crash(cluster, ctx.broker(B))  # a SIGKILL: B keeps S1, but shuts down uncleanly
    cut_b.heal()  # B's namespace went with it
    _lose_power(ctx, story)
    down = wait_state(cluster, TOPIC, lambda s: s.leader == -1, what="C fenced", timeout=90)
    ctx.expect(
        not down.isr and set(down.elr) == {B, C} and down.last_known_elr == (C,),
        "B and C fenced: no leader, empty ISR, ELR {B, C}, C the last known leader",
        down,
    )
    story.states["both_down"] = down

    process.restart(cluster, ctx.broker(C))  # unfenced on return: restart waits for it
    story.registration = _c_registration(ctx, down.version or 0)
    back = partition_state(cluster, TOPIC)
    ctx.expect(
        back.leader == -1 and back.elr == (B,) and back.last_known_elr == (C,),
        "C back and unfenced, out of the ELR; still no leader while B, fenced, is in the ELR",
        back,
    )
    story.states["c_back"] = back

    process.restart(cluster, ctx.broker(B))
    steps.await_leader(
        cluster, TOPIC, C, what="C elected, the last known leader, once B's restart emptied the ELR"
    )
    # The election's own record: by the time a poll sees C lead, B may have rejoined the
    # ISR and C's recovery finished (KIP-704), so the state polled is not the evidence.
    after = [
        s for s in metadata_history(cluster, TOPIC, 0) if (s.version or 0) > (back.version or 0)
    ]
    elected = next((s for s in after if s.leader == C), None)
    ctx.expect(
        elected is not None and elected.recovering and elected.isr == (C,) and not elected.elr,
        "an unclean election: ISR {C}, RECOVERING, ELR cleared",
        elected or [str(s) for s in after],
    )
    assert elected is not None
    story.states["elected"] = elected
    cut_a.heal()
    how = (
        f"B's unclean restart emptied the ELR and the controller elected C, the last known "
        f"leader, uncleanly ({elected}); B and A truncated to C's log"
    )
    return _finish(ctx, story, sends, last_known_leader_rows, how)


TOPIC_SPEC = Topic.fixed(
    TOPIC, [C, A, B], **{"min.insync.replicas": 2, "unclean.leader.election.enable": False}
)
NO_ZK_ELR = "ELR exists in KRaft only (KIP-966); ZooKeeper mode ended with 3.9"
FEATURE = (
    "needs the eligible.leader.replicas.version feature (4.0.0+; on 3.9 ELR needs an "
    "unstable metadata version)"
)

SCENARIO = Scenario(
    id="kip-966-last-replica-standing",
    title="KIP-966: the last ISR member loses power and is elected again, unless ELR is on",
    body=body,
    cluster=spec,
    topic=TOPIC_SPEC,
    kip="KIP-966",
    # ELR is on by default for new clusters from 4.1.0 (IBP_4_1_IV0); on 4.0 it must be
    # switched on (the -elr variant).
    fixed_in="4.1.0",
    unfixed={"zk": NO_ZK_ELR},
    symptom=S1_LOST,
)


def _elr_on(
    scenario_id: str, title: str, run: Callable[[RunContext], Finding], **extra: Any
) -> Scenario:
    """A KRaft variant whose cluster is formatted with the ELR feature on."""
    return Scenario(
        id=scenario_id,
        title=title,
        body=run,
        cluster=partial(spec, elr=True),
        topic=TOPIC_SPEC,
        kip="KIP-966",
        modes=("kraft",),
        min_release="4.0.0",
        min_release_reason=FEATURE,
        **extra,
    )


ELR_SWITCHED_ON = _elr_on(
    "kip-966-last-replica-standing-elr",
    "KIP-966 with eligible.leader.replicas.version=1 set at format: B elected from the ELR",
    body,
)

LAST_KNOWN_LEADER = _elr_on(
    "kip-966-last-known-leader",
    "KIP-966's last-known-leader fallback: C elected uncleanly after both ELR members "
    "restart uncleanly",
    last_known_leader_body,
    unfixed={
        "kraft": "with the ISR and the ELR empty, the controller elects the last known leader "
        "as an unclean election whatever unclean.leader.election.enable says "
        "(PartitionChangeBuilder.canElectLastKnownLeader); KIP-966 part 2 (unclean "
        "recovery) never shipped"
    },
    symptom=S1_LOST,
)
