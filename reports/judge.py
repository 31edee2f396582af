"""One partition's row of the report: its verdict (`checkers.audit.decide.judge`), what the
report draws of it, and the history check of its acknowledged sends.

Both engines call `partition_row` with the replicas they read, the local one in this
process and the Spark one in executors; nothing of the comparison, the protocol model or
the history check is written again here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from checkers.audit.result import ReplicaSummary
from checkers.coordinator_log import PartitionDecisions
from checkers.history import check_history
from checkers.lineage import Lineage
from checkers.recordlog import ReplicaLog
from checkers.verdict import CONSISTENT, PartitionVerdict, pick_leader
from reports import diagram

# A run with more partitions than this gets diagrams and replays only for its partitions
# that diverged or lost writes: a report draws no others, and thousands of them would
# weigh on the driver for nothing.
DETAILED_UP_TO = 12
UNREAD = "unread"  # only unreadable log dirs or second copies hold the partition
ABSENT = "absent"  # acknowledged writes, but no replica on disk


@dataclass(frozen=True)
class JudgeConfig:
    """What every partition's judging needs of the driver: each run's protocol, and the
    current leader of the partitions the metadata log (or quorum-state) names."""

    protocols: dict[str, str] = field(default_factory=dict)
    leaders: dict[tuple[str, str, int], int] = field(default_factory=dict)
    compacted: dict[tuple[str, str], str] = field(default_factory=dict)  # (run, topic) -> why
    txn_timeouts: dict[str, int] = field(default_factory=dict)  # run -> ms (`decide.Known`)
    txn_references: dict[str, int | None] = field(default_factory=dict)  # run -> ms, likewise
    brief_runs: frozenset[str] = frozenset()  # runs with more than DETAILED_UP_TO partitions
    # (run, topic, partition) -> what the transaction coordinators completed (`decide.Known`)
    decisions: dict[tuple[str, str, int], PartitionDecisions] = field(default_factory=dict)
    # (run, topic, partition) -> below it the run's DeleteRecords removed records on purpose
    deleted: dict[tuple[str, str, int], int] = field(default_factory=dict)


def replica_info(lin: Lineage) -> dict[str, Any]:
    return {
        "broker": lin.broker_id,
        "path": lin.path,
        "log_start_offset": lin.log_start_offset,
        "high_watermark": lin.high_watermark,
        "log_end_offset": lin.leo,
        "recovery_point": lin.recovery_point,
        "batches": len(lin.batches),
        "tail_epoch": lin.tail_epoch,
        "epoch_cache": lin.epoch_cache(),
        "checkpoint": lin.checkpointed_epoch_starts,
        "torn_tail": None if lin.torn_tail is None else str(lin.torn_tail),
        "errors": [str(e) for e in lin.errors[:20]],
        "error_count": len(lin.errors),
        "topic_id": lin.topic_id,
    }


def history(
    lineages: Sequence[Lineage],
    reference: Lineage | None,
    sends: Sequence[Mapping[str, Any]],
    deleted_below: int = 0,
) -> dict[str, Any] | None:
    """The history check of a partition's acknowledged sends against the reference replica
    on disk (`checkers.history.check_history`, `deleted_below` as there); None when the run
    recorded no send to it."""
    if not sends:
        return None
    logs = {lin.broker_id: ReplicaLog(lin) for lin in lineages}
    try:
        log = None if reference is None else logs[reference.broker_id]
        others = [o for b, o in logs.items() if reference is None or b != reference.broker_id]
        return check_history(sends, log, others=others, deleted_below=deleted_below).to_dict()
    finally:
        for log in logs.values():
            log.close()


def report_data(
    lineages: list[Lineage],
    verdict: PartitionVerdict,
    sends: Sequence[Mapping[str, Any]],
    *,
    brief: bool = False,
    deleted_below: int = 0,
) -> dict[str, Any]:
    """What the report shows of one partition beyond `PartitionVerdict.to_dict()`; `brief`
    leaves out the diagram and replays of a consistent partition that lost no write."""
    by_id = {lin.broker_id: lin for lin in lineages}
    reference = by_id[verdict.leader] if verdict.leader in by_id else pick_leader(lineages)
    loss = history(lineages, reference, sends, deleted_below)
    lost = bool(loss and loss["lost_count"])
    detailed = not brief or verdict.status != CONSISTENT or lost
    versions = [
        {
            "replicas": v.replicas,
            "span": v.batch.span,
            "leader_epoch": v.batch.leader_epoch,
            "crc_valid": v.batch.crc_valid,
            "max_timestamp": v.batch.max_timestamp,
            "reference": reference.broker_id in v.replicas,
        }
        for v in verdict.versions
    ]
    common = None
    if verdict.diverged_at is not None:
        before = reference.batch_containing(verdict.diverged_at - 1)
        if before is not None:
            common = {
                "span": before.span,
                "leader_epoch": before.leader_epoch,
                "max_timestamp": before.max_timestamp,
            }
    return {
        "reference": reference.broker_id,
        "common": common,
        "replicas": [replica_info(lin) for lin in sorted(lineages, key=lambda x: x.broker_id)],
        "diagram": diagram.build(lineages, verdict, reference) if detailed else None,
        "replays": diagram.replay_rejoin(lineages, verdict, reference) if detailed else [],
        "predictions": {
            str(f): {"lines": r.describe(), "outcome": r.outcome.value}
            for f, r in verdict.predictions.items()
        },
        "versions": versions,
        "loss": loss,
    }


@dataclass
class PartitionRow:
    """One partition of one run, as an engine hands it to the driver."""

    run: str
    topic: str
    partition: int
    status: str  # consistent, diverged, absent or unread
    replicas: list[ReplicaSummary]  # every replica read, judged or not
    verdict: PartitionVerdict | None = None
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def acked(self) -> int | None:
        loss = self.report.get("loss")
        return None if loss is None else loss["acked"]

    @property
    def lost(self) -> int | None:
        loss = self.report.get("loss")
        return None if loss is None else loss["lost_count"]


def partition_row(
    config: JudgeConfig,
    run: str,
    tp: tuple[str, int],
    replicas: list[ReplicaSummary],
    lineages: list[Lineage],
    verdict: PartitionVerdict | None,
    sends: Sequence[Mapping[str, Any]],
) -> PartitionRow:
    """The row of a partition: `lineages` are its judged replicas and `verdict` their
    judgement (None when nothing was judged); `sends` its acknowledged sends."""
    row = PartitionRow(run, tp[0], tp[1], UNREAD, replicas)
    if verdict is None:
        if sends:
            row.status = ABSENT
            row.report = plain({"loss": history([], None, sends), "replicas": []})
        return row
    row.status, row.verdict = verdict.status, verdict
    deleted = config.deleted.get((run, *tp), 0)
    brief = run in config.brief_runs
    row.report = plain(report_data(lineages, verdict, sends, brief=brief, deleted_below=deleted))
    return row


def plain(data: dict[str, Any]) -> dict[str, Any]:
    """The report data as JSON gives it back (lists, string keys), whichever engine made
    it: the Spark engine's rows cross the JVM as JSON, and both engines must agree."""
    return json.loads(json.dumps(data))
