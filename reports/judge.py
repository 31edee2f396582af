"""The grouped judge: one partition's replica rows (and its acknowledged sends) in, one
verdict row out. Runs in Spark executors through a cogrouped ``applyInPandas``.

The replica rows are turned back into `checkers.lineage.Lineage` objects and judged by
`checkers.verdict.judge_partition`, the same function `logfork audit` calls; nothing of
the comparison or of the protocol model is written again here.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from checkers.lineage import Lineage
from checkers.model import Protocol
from checkers.verdict import PartitionVerdict, judge_partition, pick_leader
from reports import diagram
from reports.loss import check_acknowledged
from reports.tables import VERDICT_SCHEMA, lineage_from_row

VERDICT_COLUMNS = VERDICT_SCHEMA.names
# A run with more partitions than this gets diagrams and replays only for its partitions
# that diverged or lost writes: a report draws no others, and thousands of them would
# weigh on the driver for nothing.
DETAILED_UP_TO = 12


@dataclass(frozen=True)
class JudgeConfig:
    """What the driver knows and every group needs: each run's protocol, and the current
    leader of the partitions a KRaft metadata log (or quorum-state) names."""

    protocols: dict[str, str] = field(default_factory=dict)
    leaders: dict[tuple[str, str, int], int] = field(default_factory=dict)
    brief_runs: frozenset[str] = frozenset()  # runs with more than DETAILED_UP_TO partitions
    verdict_objects: bool = False  # also return each PartitionVerdict, pickled


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


def report_data(
    lineages: list[Lineage],
    verdict: PartitionVerdict,
    sends: list[dict[str, Any]],
    *,
    brief: bool = False,
) -> dict[str, Any]:
    """What the report shows of one partition beyond `PartitionVerdict.to_dict()`; `brief`
    leaves out the diagram and replays of a consistent partition that lost no write."""
    by_id = {lin.broker_id: lin for lin in lineages}
    reference = by_id[verdict.leader] if verdict.leader in by_id else pick_leader(lineages)
    loss = check_acknowledged(lineages, reference, sends)
    detailed = not brief or verdict.status != "consistent" or bool(loss and loss["lost_count"])
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


UNREAD = "unread"  # status of a partition only unreadable or duplicate log dirs hold


def replica_summary(row: dict[str, Any]) -> dict[str, Any]:
    """What the driver keeps of a replica: its keys and its `replica` struct, no batches."""
    replica = row["replica"]
    return {
        "log_dir": int(row["log_dir"]),
        "child": int(row["child"]),
        "broker": int(row["broker"]),
        "judged": bool(row["judged"]),
        "metadata": bool(row["metadata"]),
        "path": replica["path"],
        "batches": int(replica["batch_count"]),
        "log_start_offset": _plain(replica["log_start_offset"]),
        "high_watermark": _plain(replica["high_watermark"]),
        "log_end_offset": _plain(replica["log_end_offset"]),
        "recovery_point": _plain(replica["recovery_point"]),
        "torn_tail": _plain(replica["torn_tail"]),
        "errors": _plain(replica["errors"]),
        "topic_id": replica["topic_id"],
    }


def _plain(value: Any) -> Any:
    """Python values out of what pandas hands over (numpy arrays and scalars inside)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple) or hasattr(value, "tolist"):
        items = value.tolist() if hasattr(value, "tolist") else value
        return [_plain(v) for v in items] if isinstance(items, list) else items
    return value


def judge_partition_rows(
    config: JudgeConfig,
    run: str,
    topic: str,
    partition: int,
    replicas: list[dict[str, Any]],
    sends: list[dict[str, Any]],
) -> dict[str, Any]:
    """One row for a partition: its verdict from the judged replicas (dicts of the replica
    row's fields), the loss of its acknowledged sends, and a summary of every replica."""
    protocol = Protocol(config.protocols.get(run, Protocol.KIP_279.value))
    summaries = json.dumps([replica_summary(r) for r in replicas])
    lineages = [
        lineage_from_row(topic, partition, r["broker"], r["replica"], r["batches"])
        for r in replicas
        if r["judged"]
    ]
    base = {
        "run": run,
        "topic": topic,
        "partition": partition,
        "protocol": protocol.value,
        "replicas_json": summaries,
    }
    if not lineages:
        if not sends:
            return {**base, "status": UNREAD, "replicas": []}
        loss = check_acknowledged([], None, sends)
        return {
            **base,
            "status": "absent",
            "replicas": [],
            "acked": loss["acked"] if loss else 0,
            "lost": loss["lost_count"] if loss else 0,
            "report_json": json.dumps({"loss": loss, "replicas": []}),
        }
    verdict = judge_partition(
        lineages, leader=config.leaders.get((run, topic, partition)), protocol=protocol
    )
    data = report_data(lineages, verdict, sends, brief=run in config.brief_runs)
    loss = data["loss"]
    return {
        **base,
        "status": verdict.status,
        "diverged_at": verdict.diverged_at,
        "below_high_watermark": verdict.below_high_watermark,
        "high_watermark": verdict.high_watermark,
        "leader": verdict.leader,
        "replicas": verdict.replicas,
        "acked": None if loss is None else loss["acked"],
        "lost": None if loss is None else loss["lost_count"],
        "verdict_json": json.dumps(verdict.to_dict()),
        "report_json": json.dumps(data),
        "verdict_pickle": pickle.dumps(verdict, protocol=pickle.HIGHEST_PROTOCOL)
        if config.verdict_objects
        else None,
    }


REPLICA_COLUMNS = (
    "topic",
    "partition",
    "log_dir",
    "child",
    "broker",
    "judged",
    "metadata",
    "replica",
    "batches",
)


def judge_bucket(
    config: JudgeConfig, key: tuple[Any, ...], replicas: pd.DataFrame, sends: pd.DataFrame
) -> pd.DataFrame:
    """Cogrouped applyInPandas function over (run, bucket): the replicas of some partitions
    and their acknowledged sends. Each partition is judged on its own; grouping several per
    call spares Spark and pandas a round trip per partition."""
    run = str(key[0])
    held: dict[tuple[str, int], list[dict[str, Any]]] = {}
    columns = [replicas[c].tolist() for c in REPLICA_COLUMNS] if len(replicas) else []
    for values in zip(*columns, strict=True):
        row = dict(zip(REPLICA_COLUMNS, values, strict=True))
        held.setdefault((str(row["topic"]), int(row["partition"])), []).append(row)
    for rows in held.values():
        rows.sort(key=lambda r: (int(r["log_dir"]), int(r["child"])))
    sent: dict[tuple[str, int], list[dict[str, Any]]] = {}
    if len(sends):
        for row in sends.to_dict("records"):
            sent.setdefault((str(row["topic"]), int(row["partition"])), []).append(row)
    rows = [
        judge_partition_rows(config, run, tp[0], tp[1], held.get(tp, []), sent.get(tp, []))
        for tp in sorted(held.keys() | sent.keys())
    ]
    # Object columns keep None as null and ints exact through Arrow, in pandas 2 and 3.
    return pd.DataFrame(
        {c: pd.Series([r.get(c) for r in rows], dtype=object) for c in VERDICT_COLUMNS}
    )
