"""kip-704-unclean-recovery: what a partition goes through after an unclean election,
against KIP-704's text.

Broker A (b1) leads with B (b2) in sync; B dies and falls out of the ISR, A writes on; A
dies; B comes back and is elected uncleanly. The partition's full state history (every
version of the ZooKeeper state znode, or every PartitionRecord and PartitionChangeRecord of
the KRaft metadata log) is checked against the KIP's invariants. Then, once B itself
leads, B is held in RECOVERING by cutting it off from the controller, A catches up, and B
is probed with the five requests the KIP says a recovering leader refuses.

The result is a conformance table: each statement of the KIP, what the release did, and
whether that conforms or departs. The scenario fails only when an invariant Kafka does
implement is broken; departures are listed, not hidden.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from basics.errors import NotReached
from basics.protocol import RecoveryState
from faults import elections, network, process
from fixtures.cluster import Cluster, ClusterSpec
from fixtures.config import EXTERNAL_PORT
from fixtures.waiting import WaitTimeout, wait_until
from observe import wire
from observe.replicas import replica
from observe.state import PartitionState, partition_state
from observe.state import history as metadata_history
from observe.state import state_path as zk_state_path
from runrecord.conformance import CONFORMS, DEPARTS, VIOLATED, Conformance
from runrecord.conformance import Statement as Row
from runrecord.outcome import CONSISTENT, Symptom
from runrecord.states import StateHistory
from suites import steps
from suites.scenario import Finding, RunContext, Scenario, Topic

TOPIC = "kip704"
A, B, C = 1, 2, 3
RECOVERED, RECOVERING = RecoveryState.RECOVERED, RecoveryState.RECOVERING


def spec(kafka: str, mode: str) -> ClusterSpec:
    if mode == "zk":
        return steps.controller_apart(kafka, mode)
    # The controller keeps B's registration while B is cut off from it for the probes. From
    # 4.0 (KAFKA-17793) a cleanly stopped broker's session also outlives its fencing, so B's
    # restart is refused (DUPLICATE_BROKER_REGISTRATION) until this timeout has passed; and
    # a broker gives up starting once initial.broker.registration.timeout.ms (60 s, the
    # same length) passes unregistered, so it waits longer here (seen on 4.3.1: B exited
    # "while waiting for the controller to acknowledge that we are caught up").
    return ClusterSpec(
        kafka,
        mode,
        brokers=2,
        controllers=1,
        broker_config={"initial.broker.registration.timeout.ms": 180000},
        node_config={"c1": {"broker.session.timeout.ms": 60000}},
    )


def _controller_nodes(cluster: Cluster):
    if cluster.mode == "zk":
        return [cluster.broker(C)]
    return cluster.controllers


def _stop(ctx: RunContext, broker_id: int) -> None:
    """Stop a broker so the controller notices at once: SIGKILL with a short ZooKeeper
    session, or a clean stop in KRaft (the broker tells the controller it leaves)."""
    cluster = ctx.cluster
    signal = "SIGKILL" if cluster.mode == "zk" else "SIGTERM"
    process.kill(cluster, cluster.broker(broker_id), signal=signal)
    try:
        wait_until(
            cluster.registered_brokers,
            lambda ids: broker_id not in ids,
            timeout=90,
            what=f"broker {broker_id} gone",
            describe=sorted,
        )
    except WaitTimeout as exc:
        raise NotReached(exc.what, str(exc.last)) from None


def _await_leading(
    cluster: Cluster, elected: PartitionState, *, timeout: float = 60.0
) -> wire.Answer:
    """Wait until B itself leads at the elected epoch, before it is cut off.

    The election shows where the controller wrote it before B hears of it: a ZooKeeper-mode
    controller writes the state znode, then sends B its LeaderAndIsr
    (PartitionStateMachine.electLeaderForPartitions); a KRaft broker replays the record on
    its next metadata fetch. Cut off before that, B keeps an older leader epoch (in ZooKeeper
    mode -1: ReplicaManager.makeFollowers skipped it, "the new leader -1 is unavailable") and
    answers A's fetches at the new epoch UNKNOWN_LEADER_EPOCH
    (Partition.checkCurrentLeaderEpoch), which A's fetcher retries with a debug line only
    (AbstractFetcherThread.processFetchRequest): A never learns where to truncate (CI, 3.9.2
    under load: A stuck at 10, B at 5). Not Kafka's doing: A truncates once B leads.
    OffsetForLeaderEpoch at the current epoch passes the same check as a follower's fetch
    (Partition.lastOffsetForLeaderEpoch and fetchRecords: getLocalLog, leader required)."""
    port = cluster.broker(B).published[EXTERNAL_PORT]
    epoch = elected.leader_epoch or 0

    def ask() -> wire.Answer:
        with wire.Connection("127.0.0.1", port) as conn:
            return conn.offset_for_leader_epoch(TOPIC, 0, epoch, epoch)

    try:
        answer = wait_until(
            ask,
            lambda answer: answer.error == "NONE",
            timeout=timeout,
            what=f"broker {B} itself leading {TOPIC}-0 at epoch {epoch} (OffsetForLeaderEpoch)",
            describe=lambda answer: f"{answer.error} ({answer.detail})",
        )
    except WaitTimeout as exc:
        raise NotReached(exc.what, str(exc.last)) from None
    cluster.timeline.record("note", "leading", broker=B, epoch=epoch, detail=answer.detail)
    return answer


def _raw_zk_state(cluster: Cluster) -> dict[str, Any]:
    data, _ = cluster.zk_client().get(zk_state_path(TOPIC, 0))
    return json.loads(data)


def body(ctx: RunContext) -> Finding:
    cluster, timeline = ctx.cluster, ctx.timeline
    rows: list[Row] = []
    steps.produce_batch(ctx, TOPIC, 5, to=A, acks="all")
    raw_before = _raw_zk_state(cluster) if cluster.mode == "zk" else None

    # 1. An unclean election: B falls out of the ISR, A writes on and dies, B is elected.
    _stop(ctx, B)
    steps.await_isr(cluster, TOPIC, (A,), what="B out of the ISR")
    steps.produce_batch(ctx, TOPIC, 5, to=A, acks="1")
    _stop(ctx, A)
    process.restart(cluster, cluster.broker(B))
    elected = elections.elect_unclean(cluster, TOPIC, to=B)
    _await_leading(cluster, elected)

    # 4. Hold B in RECOVERING: cut it off from the controller. B then never hears that A is
    # back (its metadata keeps A dead or fenced, so Partition.isReplicaIsrEligible keeps A
    # out of the ISR), nor could its AlterPartition land; then probe B.
    controllers = _controller_nodes(cluster)
    cut = network.isolate(cluster, cluster.broker(B), controllers)
    try:
        process.restart(cluster, cluster.broker(A))
        wait_until(
            lambda: (replica(cluster, A, TOPIC).leo, replica(cluster, B, TOPIC).leo),
            lambda leos: leos[0] == leos[1],
            timeout=90,
            what="A caught up with B (so that B would add it to the ISR)",
        )
        held = partition_state(cluster, TOPIC)
        answers = _probe(ctx, elected)
        held_after = partition_state(cluster, TOPIC)
    finally:
        cut.heal()
    try:
        final = wait_until(
            lambda: partition_state(cluster, TOPIC),
            lambda s: s.recovery_state == RECOVERED and s.isr == (A, B),
            timeout=90,
            what="A back in the ISR and the partition RECOVERED",
            describe=str,
        )
    except WaitTimeout as exc:
        final = partition_state(cluster, TOPIC)  # the invariant row reports it as violated
        timeline.record("note", "not-recovered", last=str(exc.last))

    states = _history(ctx)
    ctx.run.write_state_history(StateHistory([s.record() for s in states]))
    rows += _invariants(states, elected, final, raw_before, cluster)
    rows += _holding(held, held_after)
    rows += _recovery_work(ctx, states)
    rows += [_probe_row(answer) for answer in answers]
    rows += _zk_field(cluster, states)
    conformance = Conformance("KIP-704", rows)
    ctx.run.write_conformance(conformance)
    timeline.phase("check")
    broken = [r for r in rows if r.verdict == VIOLATED and r.implemented]
    departs = [r for r in rows if r.verdict == DEPARTS]
    versions = [s.version or 0 for s in states]
    details = {
        "conformance": [vars(r) for r in rows],
        "elected": str(elected),
        "final": str(final),
        "versions": versions,
        # ZooKeeper watches fire once per registration: a skipped znode version is a
        # write the history did not see.
        "missed_versions": [v for v in range(versions[0], versions[-1] + 1) if v not in versions]
        if ctx.mode == "zk" and versions
        else [],
    }
    print(conformance.table())
    if broken:
        return Finding(
            Symptom(VIOLATED),
            f"{len(broken)} implemented invariant(s) broken: "
            + "; ".join(r.statement for r in broken),
            details,
        )
    return Finding(
        Symptom(CONSISTENT),
        f"every implemented invariant holds; {len(departs)} departure(s) "
        "from the KIP's text: " + "; ".join(r.statement for r in departs),
        details,
    )


def _history(ctx: RunContext) -> list[PartitionState]:
    """Every state of the partition: the state znode's versions the recorder saw (ZooKeeper
    mode), or the metadata log's records (KRaft), which miss nothing."""
    if ctx.mode == "zk":
        assert ctx.recorder is not None
        return ctx.recorder.stop()
    return metadata_history(ctx.cluster, TOPIC, 0)


def _invariants(
    history: list[PartitionState],
    elected: PartitionState,
    final: PartitionState,
    raw_before: dict | None,
    cluster: Cluster,
) -> list[Row]:
    rows = []
    after = [s for s in history if (s.leader_epoch or 0) >= (elected.leader_epoch or 0)]
    first = after[0] if after else None
    rows.append(
        Row(
            "An unclean election is marked as such: the partition is RECOVERING",
            f"first state of epoch {elected.leader_epoch}: {first}",
            CONFORMS if first is not None and first.recovery_state == RECOVERING else VIOLATED,
        )
    )
    recovering = [s for s in history if s.recovery_state == RECOVERING]
    wide = [s for s in recovering if len(s.isr) != 1]
    rows.append(
        Row(
            "While RECOVERING, the ISR has exactly one member",
            f"{len(recovering)} RECOVERING state(s), ISRs {sorted({s.isr for s in recovering})}",
            CONFORMS if recovering and not wide else VIOLATED,
        )
    )
    grew = [
        (p, n)
        for p, n in itertools.pairwise(history)
        if p.recovery_state == RECOVERING
        and len(n.isr) > len(p.isr)
        and n.recovery_state != RECOVERED
    ]
    rows.append(
        Row(
            "The ISR does not grow until the leader has RECOVERED",
            "ISR grew only together with RECOVERED"
            if not grew
            else f"grew while RECOVERING: {grew[0][0]} -> {grew[0][1]}",
            CONFORMS if not grew else VIOLATED,
        )
    )
    back = [
        (p, n)
        for p, n in itertools.pairwise(history)
        if p.recovery_state == RECOVERED
        and n.recovery_state == RECOVERING
        and n.leader_epoch == p.leader_epoch
    ]
    rows.append(
        Row(
            "RECOVERED never goes back to RECOVERING (within a leader epoch)",
            "never" if not back else f"{back[0][0]} -> {back[0][1]}",
            CONFORMS if not back else VIOLATED,
        )
    )
    if raw_before is not None:
        absent = "leader_recovery_state" not in raw_before
        read_as = history[0].recovery_state if history else "?"
        rows.append(
            Row(
                "A missing recovery field reads as RECOVERED (not unclean)",
                f"znode before the election {'lacks' if absent else 'has'} the field; "
                f"read as {read_as}",
                CONFORMS if absent and read_as == RECOVERED else VIOLATED,
            )
        )
    else:
        initial = history[0] if history else None
        rows.append(
            Row(
                "A missing recovery field reads as RECOVERED (not unclean)",
                f"PartitionRecord at creation (tag absent by default): {initial}",
                CONFORMS if initial and initial.recovery_state == RECOVERED else VIOLATED,
            )
        )
    rows.append(
        Row(
            "The partition reaches RECOVERED once a follower catches up",
            str(final),
            CONFORMS if final.recovery_state == RECOVERED and len(final.isr) == 2 else VIOLATED,
        )
    )
    return rows


def _holding(held: PartitionState, held_after: PartitionState) -> list[Row]:
    ok = all(s.recovery_state == RECOVERING and s.isr == (B,) for s in (held, held_after))
    return [
        Row(
            "While the leader cannot report recovery, the partition stays RECOVERING with "
            "an ISR of one",
            f"controller's view while B was cut off: {held}; after the probes: {held_after}",
            CONFORMS if ok else VIOLATED,
        )
    ]


def _recovery_work(ctx: RunContext, history: list[PartitionState]) -> list[Row]:
    """KIP-704: the leader performs recovery and then tells the controller (AlterIsr with
    the flag cleared). As implemented (KAFKA-13587) the leader does no recovery work: it
    marks itself RECOVERED at once, and the controller's copy changes only with the next
    ISR change."""
    log = ctx.cluster.broker(B).log_file.read_text(errors="replace")
    marked = [ln for ln in log.splitlines() if "marked as RECOVERING" in ln and TOPIC in ln]
    flipped = next(
        (
            s
            for s in history
            if s.recovery_state == RECOVERED
            and any(p.recovery_state == RECOVERING for p in history[: history.index(s)])
        ),
        None,
    )
    return [
        Row(
            "The new leader performs unclean recovery, then reports it to the controller",
            f"B logged: {marked[0].split('] ', 1)[-1][:160] if marked else 'nothing'}; "
            f"the controller's copy turned RECOVERED only with the ISR change {flipped}",
            DEPARTS,
            implemented=False,
        )
    ]


def _probe(ctx: RunContext, elected: PartitionState) -> list[wire.Answer]:
    cluster = ctx.cluster
    port = cluster.broker(B).published[EXTERNAL_PORT]
    epoch = elected.leader_epoch or 0
    with wire.Connection("127.0.0.1", port) as conn:
        answers = [
            conn.fetch(TOPIC, 0, 0),
            conn.produce(TOPIC, 0, b"probe-while-recovering"),
            conn.list_offsets(TOPIC, 0),
            conn.delete_records(TOPIC, 0, 0),
            conn.offset_for_leader_epoch(TOPIC, 0, epoch, epoch),
        ]
    for answer in answers:
        ctx.timeline.record(
            "note",
            "probe",
            api=answer.api,
            version=answer.version,
            error=answer.error,
            detail=answer.detail,
        )
    return answers


def _probe_row(answer: wire.Answer) -> Row:
    refused = answer.error == "NOT_LEADER_OR_FOLLOWER"
    observed = f"v{answer.version}: {answer.error} ({answer.detail})"
    return Row(
        f"A recovering leader answers {answer.api} with NOT_LEADER_OR_FOLLOWER",
        observed if refused else f"not implemented: answered {observed}",
        CONFORMS if refused else DEPARTS,
        implemented=False,
    )


def _zk_field(cluster: Cluster, history: list[PartitionState]) -> list[Row]:
    if cluster.mode != "zk":
        return []
    return [
        Row(
            'The ZooKeeper state znode records the flag as "is_unclean": true',
            'Kafka writes "leader_recovery_state": 1 instead, and only while RECOVERING',
            DEPARTS,
            implemented=False,
        )
    ]


SCENARIO = Scenario(
    id="kip-704-unclean-recovery",
    title="KIP-704: an unclean election's recovery state, against the KIP's text",
    body=body,
    cluster=spec,
    topic=Topic.fixed(TOPIC, [A, B], **{"min.insync.replicas": 1}),
    kip="KIP-704",
    jira="KAFKA-13587",
    min_release="3.2.0",
    min_release_reason="not implemented in this release (KIP-704 arrived in 3.2.0)",
)
