"""The scan task: partition directories in, replica rows out. Runs in Spark executors.

Each task row names one partition dir and the offsets its log dir's checkpoints hold for
it; `checkers.lineage.read_partition` reads the segments and the partition's own files
exactly as `logfork audit` does, and a KRaft metadata log is decoded as well.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from checkers.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)
from checkers.lineage import Lineage, read_partition
from checkers.metadata_log import decode_metadata_log
from reports.tables import metadata_log_json, replica_batch

# Rows out per Arrow batch: bounds executor memory on replicas with millions of batches.
MAX_REPLICAS_PER_BATCH = 64
MAX_BATCHES_PER_BATCH = 250_000


def read_task(task: dict[str, Any]) -> tuple[Lineage, str | None]:
    tp = (task["topic"], task["partition"])
    offsets: dict[str, dict[tuple[str, int], int]] = {
        REPLICATION_OFFSET_CHECKPOINT: {},
        RECOVERY_POINT_CHECKPOINT: {},
        LOG_START_OFFSET_CHECKPOINT: {},
    }
    for name, column in (
        (REPLICATION_OFFSET_CHECKPOINT, "high_watermark"),
        (RECOVERY_POINT_CHECKPOINT, "recovery_point"),
        (LOG_START_OFFSET_CHECKPOINT, "log_start_checkpoint"),
    ):
        if task[column] is not None:
            offsets[name][tp] = task[column]
    lineage = read_partition(Path(task["path"]), task["broker"], tp, offsets)
    metadata = None
    if task["metadata"]:
        metadata = metadata_log_json(decode_metadata_log(task["path"]))
    return lineage, metadata


def scan_replicas(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: `TASK_SCHEMA` batches in, `REPLICA_SCHEMA` batches out."""
    rows: list[dict[str, Any]] = []
    lineages: list[Lineage] = []
    held = 0
    for batch in batches:
        for task in batch.to_pylist():
            lineage, metadata = read_task(task)
            rows.append({**task, "metadata_log": metadata})
            lineages.append(lineage)
            held += len(lineage.batches)
            if len(rows) >= MAX_REPLICAS_PER_BATCH or held >= MAX_BATCHES_PER_BATCH:
                yield replica_batch(rows, lineages)
                rows, lineages, held = [], [], 0
    if rows:
        yield replica_batch(rows, lineages)
