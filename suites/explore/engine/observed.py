"""What a schedule's run observed of each partition once everything was healed, as the
judge (checkers.schedules.judge) reads it: convergence, the audit of the copied logs (its
transaction findings too), acknowledged acks=all writes missing from the leader's log, what
power losses dropped, the KRaft metadata log's checks, and what clients see of each
partition a transaction wrote once its transactions had time to end."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from checkers.audit.plan import plan_audit
from checkers.metadata_log import decode_metadata_log
from checkers.schedules.invariants import (
    epoch_regressions,
    leader_lacks_its_epoch,
    metadata_divergence,
    quorum_violations,
)
from checkers.schedules.judge import SCHEDULE_PARTITION, Observed, StateSeen
from checkers.transactions import TransactionFindings
from checkers.txn_reads import LOST_WRITE, TxnReadCheck
from fixtures.cluster import Cluster
from observe import kraft
from observe.stable import StableOffsets
from observe.state import PartitionState
from reports.engine_local import judge as judge_source
from reports.judge import history as check_sends
from reports.sources import own_source
from runrecord.history import DURABLE_ACKS
from suites.convergence import Convergence
from suites.explore.live import txn
from suites.explore.live.context import Live
from suites.scenario import RunContext


@dataclass
class Healed:
    """What the brokers showed of a schedule's topic once everything was healed: the rest of
    the run's history (the steps' part is `Live.history`)."""

    convergence: Convergence
    states: dict[int, list[PartitionState]]  # partition -> every state recorded, in order
    # each partition transactions wrote: its offsets once every transaction had time to end
    stable: Mapping[int, StableOffsets] = field(default_factory=dict)
    now_ms: int | None = None  # when its transactions were judged (their age is from it)
    loops: dict[int, dict[int, str]] = field(default_factory=dict)  # p -> broker -> its line
    strays: dict[int, str] = field(default_factory=dict)  # broker -> a copy left current
    reads: TxnReadCheck | None = None  # what consumers read of the partitions transactions wrote
    skipped: Mapping[int, str] = field(default_factory=dict)  # p -> a coordinator's log line


def observe(ctx: RunContext, topic: str, live: Live, healed: Healed) -> dict[int, Observed]:
    """Each partition as the judge reads it: convergence, the audit of the copied logs,
    acknowledged acks=all writes missing from its leader's log, power losses' drops, and
    the transactions open on disk past their timeout beside what clients see of the
    partitions transactions wrote (`stable`), the followers still looping on
    OffsetOutOfRange once converged (`loops`), the copies of the schedule's partition a
    reassignment left current (`strays`), what consumers read (`reads`), and the
    partitions whose marker a coordinator logged skipping (`skipped`)."""
    convergence, states, stable = healed.convergence, healed.states, healed.stable
    now_ms, loops, strays, reads, skipped = (
        healed.now_ms,
        healed.loops,
        healed.strays,
        healed.reads,
        healed.skipped,
    )
    release = ctx.cluster.release
    partitions = live.schedule.cluster.partitions
    sends = {p: [s for s in ctx.history.sends if s.partition == p] for p in partitions}
    # What each partition converges to: the schedule's, its last reassignment's target.
    replicas = {p: sorted(live.schedule.cluster.replicas) for p in partitions}
    replicas[SCHEDULE_PARTITION] = sorted(live.reassigning)
    checks: dict[int, dict[str, Any] | None] = {}
    regressions: dict[int, list[str]] = {}
    uncached: dict[int, str | None] = {}
    txns: dict[int, TransactionFindings] = {}  # partition -> the audit's

    def on_partition(tp: tuple[str, int], _replicas: Any, lineages: Any, verdict: Any) -> None:
        if tp[0] != topic or verdict is None:
            return
        regressions[tp[1]] = epoch_regressions(lineages)
        final = states[tp[1]][-1] if states.get(tp[1]) else None
        if final is not None and release.at_least(2, 1):  # KAFKA-7415: cached on election
            uncached[tp[1]] = leader_lacks_its_epoch(lineages, final.leader, final.leader_epoch)
        txns[tp[1]] = verdict.transactions
        by_id = {lin.broker_id: lin for lin in lineages}
        leader = states[tp[1]][-1].leader if states.get(tp[1]) else None
        reference = by_id.get(leader) if leader is not None else None
        checks[tp[1]] = check_sends(lineages, reference or lineages[0], sends.get(tp[1], []))

    # Open transactions are aged against the time of judging, not their partition's newest
    # write: a hang is a transaction nothing came after.
    plan = plan_audit([ctx.run.path], topic, (), txn.TXN_TIMEOUT_MS, now_ms)
    # Judged once, with each partition's report row: a finding's report renders this.
    ctx.judged = judge_source(own_source(ctx.run.path, plan, release.protocol), also=on_partition)
    audit = ctx.judged.audit
    ctx.run.write_audit(audit.to_dict())
    verdicts = {v.partition: v for v in audit.partitions if v.topic == topic}
    errors = [str(e.error) for e in audit.errors]
    metadata = kraft.metadata_log(ctx.cluster.controllers) if ctx.cluster.mode == "kraft" else None
    metadata_split = metadata_divergence(ctx.run.path) if metadata is not None else None
    quorum = quorum_judged(ctx.cluster) if metadata is not None else None
    out: dict[int, Observed] = {}
    for p in partitions:
        state = convergence.partitions.get(p, {})
        v = verdicts.get(p)
        unjudged = ""
        if v is None:
            unjudged = f"the disk audit gave no verdict for {topic}-{p}"
        elif p not in checks:
            unjudged = f"the acknowledged writes of {topic}-{p} were not checked"
        elif (checks[p] or {}).get("unjudged"):
            unjudged = checks[p]["unjudged"]
        if errors:  # an input the audit could not read may hide any partition's data
            unjudged = "; ".join([*filter(None, [unjudged]), f"audit errors: {errors[:3]}"])
        loss = checks.get(p) or {}
        lost = [w["offset"] for w in loss.get("lost", []) if w["acks"] in DURABLE_ACKS]
        # A line naming no partition (before 1.0 some name the topic alone) counts for the
        # schedule's partition.
        stuck = {
            b: line
            for b, line in convergence.stuck.items()
            if convergence.stuck_partitions.get(b, -1) == p
            or (convergence.stuck_partitions.get(b, -1) == -1 and p == SCHEDULE_PARTITION)
        }
        leos = dict(state.get("leos", {}))
        found = txns.get(p, TransactionFindings())  # none where the audit judged none
        out[p] = Observed(
            converged=sorted(state.get("isr", [])) == replicas[p] and len(set(leos.values())) == 1,
            stuck_lines=stuck,
            stalled=convergence.stalled,
            isr=list(state.get("isr", [])),
            log_end_offsets=leos,
            audit_status=v.status if v is not None else None,
            unjudged=unjudged,
            diverged_at=v.diverged_at if v is not None else None,
            below_high_watermark=bool(v and v.below_high_watermark),
            durable_lost=lost,
            dropped=[
                (after, before)
                for cut in live.history.power_cuts
                for q, (before, after) in cut.ends.items()
                if q == p and after < before
            ],
            states=[StateSeen(s.leader, tuple(s.isr), s.recovery_state) for s in states.get(p, [])],
            fenced_leaders=[]
            if metadata is None
            else [(e.offset, e.leader) for e in metadata.history(topic, p) if e.leader_fenced],
            epoch_regressions=regressions.get(p, []),
            metadata_diverged=metadata_split if p == SCHEDULE_PARTITION else None,
            quorum_broken=quorum if p == SCHEDULE_PARTITION else None,
            hanging=[h.first_offset for h in found.hanging],
            skipped_marker=(skipped or {}).get(p),
            torn=[t.marker_offset for t in found.torn],
            duplicates=[d.first_offset for d in found.duplicates],
            stable=str(stable[p]) if stable and p in stable else None,
            stable_stuck=stable[p].stuck if stable and p in stable else None,
            recreated=sorted(live.recreated.values()) if p == SCHEDULE_PARTITION else [],
            fetch_loops=dict((loops or {}).get(p, {})),
            left_behind=dict(strays or {}) if p == SCHEDULE_PARTITION else {},
            # An acknowledged write lost is the acks=all check's (`durable_lost`).
            read_anomalies=[
                (a.kind, a.offset, f"{a.detail}; {a.isolation}")
                for a in (reads.anomalies if reads is not None else [])
                if a.kind != LOST_WRITE and a.partition == p
            ],
            epoch_cache_lost="; ".join(sorted(live.epochs_lost.values()))
            if p == SCHEDULE_PARTITION and live.epochs_lost
            else uncached.get(p),
        )
    return out


def quorum_judged(cluster: Cluster) -> str | None:
    """The quorum's invariants over every KRaft node's copy of the metadata log after the
    heal; in a dynamic quorum, against the voters the membership steps made (each proved its
    change before recording it: faults.voters)."""
    copies = {
        n.name: decode_metadata_log(kraft.metadata_dir(n))
        for n in cluster.nodes.values()
        if n.role.name != "zookeeper" and kraft.metadata_dir(n).is_dir()
    }
    voters = None
    if cluster.dynamic:
        voters = {cluster.node(name).node_id: d for name, d in cluster.voter_dirs.items()}
    leader = kraft.quorum_leader_node(cluster.controllers).name
    return quorum_violations(copies, leader, voters)  # type: ignore[arg-type]
