"""Codecs between the checkers' objects and the pipeline's rows: a replica's batches,
lineage and epochs as table rows, replica summaries and read errors as plain values (and
back, field for field: a test holds them to that), and the metadata log as JSON.
"""

from __future__ import annotations

import dataclasses
import json
import operator
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePath
from typing import Any

import pyarrow as pa

from basics.protocol import RecoveryState
from checkers.audit.result import ReplicaSummary
from checkers.errors import LogReadError, TornTail
from checkers.lineage import Lineage
from checkers.metadata_log import LeaderChange, MetadataLog, PartitionStateEvent, Registration
from checkers.records import BATCH_FIELDS, Batch
from reports.tables import (
    BATCH_TYPES,
    BATCHES_SCHEMA,
    EPOCHS_SCHEMA,
    LINEAGE_TABLE_SCHEMA,
)

# --------------------------------------------------------------------------------------
# Replicas to rows


def epochs_value(entries: Iterable[tuple[int, int]] | None) -> list[dict[str, int]] | None:
    if entries is None:
        return None
    return [{"epoch": e, "start_offset": s} for e, s in entries]


def error_value(error: LogReadError) -> dict[str, Any]:
    return {"kind": error.kind, "path": error.path, "offset": error.offset, "reason": error.reason}


_ERROR_CLASSES: dict[str, type[LogReadError]] = {}


def _error_classes() -> dict[str, type[LogReadError]]:
    if not _ERROR_CLASSES:
        pending: list[type[LogReadError]] = [LogReadError]
        while pending:
            cls = pending.pop()
            _ERROR_CLASSES.setdefault(cls.kind, cls)
            pending.extend(cls.__subclasses__())
    return _ERROR_CLASSES


def error_from_value(value: Mapping[str, Any]) -> LogReadError:
    """The error a row describes, as its own class (its kind, path, offset and reason)."""
    cls = _error_classes().get(value["kind"], LogReadError)
    error = cls.__new__(cls)
    # The base initialiser: some subclasses take extra arguments that rows do not keep.
    LogReadError.__init__(error, value["path"], _int_or_none(value["offset"]), value["reason"])
    if cls.kind != value["kind"]:
        error.kind = value["kind"]
    return error


_ROW = operator.attrgetter(*BATCH_FIELDS)


def batch_rows_table(
    keys: Sequence[tuple[str, int, str, int, bool]], replicas: Sequence[Sequence[Batch]]
) -> pa.RecordBatch:
    """Flat `BATCHES_SCHEMA` rows: one per batch of each (run, broker, topic, partition,
    judged) replica, numbered in log order."""
    key_columns: list[list[Any]] = [[] for _ in range(5)]
    seq: list[int] = []
    rows: list[tuple[Any, ...]] = []
    for key, batches in zip(keys, replicas, strict=True):
        rows.extend(_ROW(b) for b in batches)
        seq.extend(range(len(batches)))
        for column, value in zip(key_columns, key, strict=True):
            column.extend([value] * len(batches))
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in BATCH_FIELDS]
    arrays = [pa.array(c, f.type) for c, f in zip(key_columns, BATCHES_SCHEMA, strict=False)]
    arrays.append(pa.array(seq, pa.int32()))
    arrays.extend(
        pa.array(list(c), BATCH_TYPES[n]) for c, n in zip(columns, BATCH_FIELDS, strict=True)
    )
    return pa.RecordBatch.from_arrays(arrays, schema=BATCHES_SCHEMA)


def lineage_table(
    tasks: Sequence[Mapping[str, Any]], lineages: Sequence[Lineage]
) -> pa.RecordBatch:
    """`LINEAGE_TABLE_SCHEMA` rows: one per replica."""
    columns: dict[str, list[Any]] = {
        "run": [t["run"] for t in tasks],
        "log_dir": [str(PurePath(t["path"]).parent) for t in tasks],
        "broker": [t["broker"] for t in tasks],
        "topic": [t["topic"] for t in tasks],
        "partition": [t["partition"] for t in tasks],
        "judged": [t["judged"] for t in tasks],
        "path": [t["path"] for t in tasks],
        "topic_id": [lin.topic_id for lin in lineages],
        "batches": [len(lin.batches) for lin in lineages],
        "log_start_offset": [lin.log_start_offset for lin in lineages],
        "high_watermark": [lin.high_watermark for lin in lineages],
        "log_end_offset": [lin.log_end_offset for lin in lineages],
        "recovery_point": [lin.recovery_point for lin in lineages],
        "torn_tail": [
            None if lin.torn_tail is None else json.dumps(dataclasses.asdict(lin.torn_tail))
            for lin in lineages
        ],
        "errors": [len(lin.errors) for lin in lineages],
    }
    return pa.RecordBatch.from_pydict(columns, schema=LINEAGE_TABLE_SCHEMA)


def epochs_table(tasks: Sequence[Mapping[str, Any]], lineages: Sequence[Lineage]) -> pa.RecordBatch:
    """`EPOCHS_SCHEMA` rows: each replica's leader epoch starts, from its checkpoint file and
    as its batches imply them."""
    rows = [
        (t["run"], t["broker"], t["topic"], t["partition"], origin, epoch, start)
        for t, lin in zip(tasks, lineages, strict=True)
        for origin, entries in (
            ("checkpoint", lin.checkpointed_epoch_starts or []),
            ("batches", lin.derived_epoch_starts or []),
        )
        for epoch, start in entries
    ]
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(EPOCHS_SCHEMA)
    return pa.RecordBatch.from_arrays(
        [pa.array(list(c), f.type) for c, f in zip(columns, EPOCHS_SCHEMA, strict=True)],
        schema=EPOCHS_SCHEMA,
    )


def summary_value(r: ReplicaSummary) -> dict[str, Any]:
    """A replica summary as plain JSON values."""
    return {
        **{f.name: getattr(r, f.name) for f in dataclasses.fields(r)},
        "torn_tail": None if r.torn_tail is None else dataclasses.asdict(r.torn_tail),
        "errors": [error_value(e) for e in r.errors],
    }


def summary_from_value(value: Mapping[str, Any]) -> ReplicaSummary:
    torn = value["torn_tail"]
    return ReplicaSummary(
        **{
            **value,
            "torn_tail": None if torn is None else TornTail(**torn),
            "errors": [error_from_value(e) for e in value["errors"]],
        }
    )


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


# --------------------------------------------------------------------------------------
# MetadataLog <-> JSON (a scan task decodes it; the driver needs it whole)


def metadata_log_json(log: MetadataLog) -> str:
    return json.dumps(
        {
            "path": log.path,
            "topics": log.topics,
            "events": [dataclasses.asdict(e) for e in log.events],
            "leader_changes": [dataclasses.asdict(c) for c in log.leader_changes],
            "removed_topics": log.removed_topics,
            "topic_configs": log.topic_configs,
            "registrations": [dataclasses.asdict(r) for r in log.registrations],
            "features": log.features,
            "errors": [error_value(e) for e in log.errors],
            "torn_tail": None if log.torn_tail is None else dataclasses.asdict(log.torn_tail),
            "end_offset": log.end_offset,
            "snapshot": log.snapshot,
            "skipped_records": log.skipped_records,
        }
    )


def metadata_log_from_json(text: str) -> MetadataLog:
    data = json.loads(text)
    events = [
        PartitionStateEvent(
            **{
                **e,
                "isr": tuple(e["isr"]),
                "replicas": tuple(e["replicas"]),
                "leader_recovery_state": RecoveryState(e["leader_recovery_state"]),
                "elr": tuple(e.get("elr", ())),
                "last_known_elr": tuple(e.get("last_known_elr", ())),
                "adding": tuple(e.get("adding", ())),
            }
        )
        for e in data["events"]
    ]
    changes = [
        LeaderChange(
            **{
                **c,
                "voters": tuple(c["voters"]),
                "granting_voters": tuple(c["granting_voters"]),
            }
        )
        for c in data["leader_changes"]
    ]
    torn = data["torn_tail"]
    return MetadataLog(
        path=data["path"],
        topics=dict(data["topics"]),
        events=events,
        leader_changes=changes,
        removed_topics=dict(data["removed_topics"]),
        topic_configs={t: dict(c) for t, c in data["topic_configs"].items()},
        registrations=[Registration(**r) for r in data.get("registrations", [])],
        features=dict(data.get("features", {})),
        errors=[error_from_value(e) for e in data["errors"]],
        torn_tail=None if torn is None else TornTail(**torn),
        end_offset=data["end_offset"],
        snapshot=data["snapshot"],
        skipped_records=data["skipped_records"],
    )
