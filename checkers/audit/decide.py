"""The audit's third stage: what is known of each partition before it is judged, each
partition's judgement, and the result put together from whatever the executor read.

Leaders come from the longest copy of the KRaft metadata log (it has seen the most
elections) and, for the metadata log's own partition, from the quorum-state files
(`checkers.checkpoints.quorum_leader`). A ZooKeeper-mode audit has neither, and the
verdict picks the replica with the highest tail epoch. Compacted topics are known by name
(the internal ones, and those named with --compacted) or by their cleanup.policy in the
metadata log; the replicas' own cleaner-offset-checkpoints say so too, at judging time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from basics.protocol import Protocol
from checkers.audit.plan import AuditPlan, LineageSlot, MetadataSlot, TopicPartition
from checkers.audit.result import AuditError, AuditResult, ReplicaSummary
from checkers.checkpoints import quorum_leader
from checkers.compaction import compaction_reason
from checkers.coordinator_log import Decisions, PartitionDecisions
from checkers.lineage import Lineage
from checkers.metadata_log import METADATA_TOPICS, MetadataLog
from checkers.transactions import DEFAULT_TXN_TIMEOUT_MS, judge_transactions
from checkers.verdict import PartitionVerdict, judge_partition


@dataclass
class Known:
    metadata: MetadataLog | None = None  # the copy of the metadata log that decided
    leaders: dict[TopicPartition, int] = field(default_factory=dict)
    kraft_state: dict[TopicPartition, dict[str, Any]] = field(default_factory=dict)
    compacted: dict[str, str] = field(default_factory=dict)  # topic -> why
    txn_timeout_ms: int = DEFAULT_TXN_TIMEOUT_MS
    txn_reference_ms: int | None = None
    # What the transaction coordinators completed, by data partition (`coordinator_log`).
    decisions: Decisions = field(default_factory=dict)


def choose_metadata(logs: Mapping[int, MetadataLog]) -> MetadataLog | None:
    """The longest copy of the metadata log (the first in log dir order on a tie)."""
    best: MetadataLog | None = None
    for index in sorted(logs):
        if best is None or logs[index].end_offset > best.end_offset:
            best = logs[index]
    return best


def know(
    plan: AuditPlan,
    metadata_logs: Mapping[int, MetadataLog],
    decisions: Decisions | None = None,
) -> Known:
    out = Known(
        choose_metadata(metadata_logs),
        txn_timeout_ms=plan.txn_timeout_ms,
        txn_reference_ms=plan.txn_reference_ms,
        decisions=decisions or {},
    )
    quorum = quorum_leader(plan.quorum_states.values())
    configs = out.metadata.topic_configs if out.metadata is not None else {}
    for topic in sorted({tp[0] for tp in plan.judged_partitions()}):
        why = compaction_reason(topic, configs.get(topic), plan.compacted)
        if why is not None:
            out.compacted[topic] = why
    for tp in plan.judged_partitions():
        leader = None
        if out.metadata is not None:
            event = out.metadata.current(*tp)
            if event is not None:
                out.kraft_state[tp] = event.to_dict()
                leader = event.leader if event.leader >= 0 else None
        if tp[0] in METADATA_TOPICS:
            leader = quorum
        if leader is not None:
            out.leaders[tp] = leader
    return out


def judge(
    lineages: Sequence[Lineage],
    leader: int | None,
    protocol: Protocol,
    compacted: str | None = None,
    txn_timeout_ms: int = DEFAULT_TXN_TIMEOUT_MS,
    txn_reference_ms: int | None = None,
    decisions: PartitionDecisions | None = None,
) -> PartitionVerdict:
    """One partition's verdict, compact enough to keep for every partition of a fleet;
    `leader`, `compacted`, `txn_timeout_ms`, `txn_reference_ms` and `decisions` as `Known`
    has them."""
    verdict = judge_partition(lineages, leader=leader, protocol=protocol, compacted=compacted)
    verdict.transactions = judge_transactions(
        lineages,
        txn_timeout_ms=txn_timeout_ms,
        reference_ms=txn_reference_ms,
        decisions=decisions,
    )
    return verdict.compact()


def assemble(
    plan: AuditPlan,
    replicas: Iterable[ReplicaSummary],
    verdicts: Iterable[PartitionVerdict],
    metadata_logs: Mapping[int, MetadataLog],
    known: Known,
) -> AuditResult:
    """The result, from the plan and what the executor read and judged (in any order)."""
    result = AuditResult(
        log_dirs=list(plan.log_dirs),
        replicas=sorted(replicas, key=lambda r: (r.log_dir, r.child)),
        partitions=sorted(verdicts, key=lambda v: (v.topic, v.partition)),
        unreadable=list(plan.unreadable),
        metadata=known.metadata,
        kraft_state=dict(known.kraft_state),
    )
    read = {(r.log_dir, r.topic, r.partition): r for r in result.replicas}
    for slot in plan.slots:
        if isinstance(slot, AuditError):
            result.errors.append(slot)
            continue
        broker = plan.log_dirs[slot.log_dir].broker_id
        if isinstance(slot, LineageSlot):
            replica = read.get((slot.log_dir, slot.topic, slot.partition))
            found = replica.errors if replica is not None else []
        elif isinstance(slot, MetadataSlot):
            log = metadata_logs.get(slot.log_dir)
            found = log.errors if log is not None else []
        result.errors.extend(AuditError(e, broker) for e in found)
    return result
