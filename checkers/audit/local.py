"""The local executor: the audit's read tasks run in this process, one partition at a
time, so that memory holds one partition's replicas, not the whole input."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from basics.protocol import Protocol
from checkers.audit.decide import assemble, judge, know
from checkers.audit.plan import AuditPlan, TopicPartition, plan_audit
from checkers.audit.read import read_decisions, read_metadata, read_replicas
from checkers.audit.result import AuditResult, ReplicaSummary
from checkers.coordinator_log import merge
from checkers.lineage import Lineage
from checkers.transactions import DEFAULT_TXN_TIMEOUT_MS
from checkers.verdict import PartitionVerdict

# Called with each partition while its replicas are in memory: the summaries of every
# replica read, the judged lineages and their verdict (None when none was judged). What it
# returns is kept by partition (the report pipeline's per-partition rows).
OnPartition = Callable[
    [TopicPartition, list[ReplicaSummary], list[Lineage], PartitionVerdict | None], Any
]


@dataclass
class LocalRun:
    result: AuditResult
    extras: dict[TopicPartition, Any] = field(default_factory=dict)


def execute(
    plan: AuditPlan, protocol: Protocol, on_partition: OnPartition | None = None
) -> LocalRun:
    metadata_logs = {t.log_dir: read_metadata(t) for t in plan.metadata_tasks()}
    decisions = merge([read_decisions(tasks) for tasks in plan.coordinator_tasks()])
    known = know(plan, metadata_logs, decisions)
    replicas: list[ReplicaSummary] = []
    verdicts: list[PartitionVerdict] = []
    extras: dict[TopicPartition, Any] = {}
    for tp, tasks in plan.by_partition():
        summaries, judged = read_replicas(tasks)
        replicas.extend(summaries)
        leader, compacted = known.leaders.get(tp), known.compacted.get(tp[0])
        ages = (known.txn_timeout_ms, known.txn_reference_ms, known.decisions.get(tp))
        verdict = judge(judged, leader, protocol, compacted, *ages) if judged else None
        if verdict is not None:
            verdicts.append(verdict)
        if on_partition is not None:
            extras[tp] = on_partition(tp, summaries, judged, verdict)
    result = assemble(plan, replicas, verdicts, metadata_logs, known)
    return LocalRun(result, extras)


def audit(
    dirs: Sequence[Path | str],
    topic: str | None = None,
    protocol: Protocol = Protocol.KIP_279,
    compacted: Sequence[str] = (),
    txn_timeout_ms: int = DEFAULT_TXN_TIMEOUT_MS,
    txn_reference_ms: int | None = None,
) -> AuditResult:
    """Read every log dir and judge every partition (or those of `topic`; `compacted` names
    topics to judge as compacted besides those the inputs say are; an open transaction
    older than `txn_timeout_ms`, behind `txn_reference_ms` or else its partition's newest
    write, hangs). Never raises on bad input: what cannot be read is in `errors` and
    `unreadable`."""
    plan = plan_audit(dirs, topic, compacted, txn_timeout_ms, txn_reference_ms)
    return execute(plan, protocol).result
