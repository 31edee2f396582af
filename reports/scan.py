"""The scan task: partition directories in, replica rows out. Runs in Spark executors.

Each task row is one of the audit's read tasks (`checkers.audit.plan.ReadTask`) with the
run it belongs to; `checkers.audit.read` reads it exactly as the local engine does. When
the run's tables are wanted, the task also writes the tables that grow with the logs
(batches, lineage, epochs) itself: the rows are at hand, and writing them here spares
Spark a round trip through the JVM and the driver any of it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from checkers.audit.plan import ReadTask
from checkers.audit.read import read_task
from checkers.lineage import Lineage
from checkers.metadata_log import decode_metadata_log
from reports.rows import (
    batch_table,
    epochs_table,
    lineage_table,
    metadata_log_json,
    pack_batches,
)
from reports.rows import replica_batch as replica_rows
from reports.tables import METADATA_SCHEMA, TASK_ONLY, TASK_SCHEMA

BATCHES_TABLE, LINEAGE_TABLE, EPOCHS_TABLE = "batches.parquet", "lineage.parquet", "epochs.parquet"
EXECUTOR_TABLES = (BATCHES_TABLE, LINEAGE_TABLE, EPOCHS_TABLE)
# Replicas per Arrow batch out: bounds executor memory on replicas with millions of batches.
MAX_REPLICAS_PER_BATCH = 64
MAX_BATCHES_PER_BATCH = 250_000


def read(task: dict[str, Any]) -> Lineage:
    """A task row's replica, read as the audit reads it (`checkers.audit.read`)."""
    return read_task(ReadTask(**{k: v for k, v in task.items() if k not in TASK_ONLY}))


def _partition_id() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


class _TableWriter:
    """The tables as large as the logs, written where the replicas are read: `batches`,
    `lineage` and `epochs`. Each (run, chunk) of a task goes to its own file, named by the
    task's partition id: a retried task rewrites the same files instead of adding to them."""

    def __init__(self) -> None:
        self.part = _partition_id()
        self.chunks: dict[str, int] = {}

    def write(
        self, tasks: list[dict[str, Any]], lineages: list[Lineage], blobs: list[bytes]
    ) -> None:
        by_run: dict[str, list[int]] = {}
        for i, task in enumerate(tasks):
            if task["tables"]:
                by_run.setdefault(task["tables"], []).append(i)
        for tables, indexes in by_run.items():
            chunk = self.chunks.get(tables, 0)
            self.chunks[tables] = chunk + 1
            picked = [tasks[i] for i in indexes]
            keys = [
                (t["run"], t["broker"], t["topic"], t["partition"], t["judged"]) for t in picked
            ]
            chosen = [lineages[i] for i in indexes]
            self._put(tables, BATCHES_TABLE, chunk, batch_table(keys, [blobs[i] for i in indexes]))
            self._put(tables, LINEAGE_TABLE, chunk, lineage_table(picked, chosen))
            self._put(tables, EPOCHS_TABLE, chunk, epochs_table(picked, chosen))

    def _put(self, tables: str, name: str, chunk: int, batch: pa.RecordBatch) -> None:
        folder = Path(tables) / name
        target = folder / f"part-{self.part:05d}-{chunk:04d}.parquet"
        partial = folder / f".{target.name}.{os.getpid()}.tmp"
        pq.write_table(pa.Table.from_batches([batch]), partial)
        partial.replace(target)


def scan_slices(slices: Any, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: slice numbers in (`spark.range`), `REPLICA_SCHEMA` rows out.
    `slices` is a broadcast list of task lists (`TASK_SCHEMA` dicts), one per slice: the
    tasks reach each worker once, and the JVM handles nothing but the slice numbers."""
    every = slices.value

    def tasks() -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for number in batch.column(0).to_pylist():
                yield pa.RecordBatch.from_pylist(every[number], schema=TASK_SCHEMA)

    yield from scan_replicas(tasks())


def scan_replicas(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: `TASK_SCHEMA` rows in, `REPLICA_SCHEMA` rows out."""
    writer = _TableWriter()
    tasks: list[dict[str, Any]] = []
    lineages: list[Lineage] = []
    held = 0

    def flush() -> pa.RecordBatch:
        blobs = [pack_batches(lin.batches) for lin in lineages]
        writer.write(tasks, lineages, blobs)
        return replica_rows(tasks, lineages, blobs)

    for batch in batches:
        for task in batch.to_pylist():
            lineage = read(task)
            tasks.append(task)
            lineages.append(lineage)
            held += len(lineage.batches)
            if len(tasks) >= MAX_REPLICAS_PER_BATCH or held >= MAX_BATCHES_PER_BATCH:
                yield flush()
                tasks, lineages, held = [], [], 0
    if tasks:
        yield flush()


def decode_metadata(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: metadata log partition dirs in, `METADATA_SCHEMA` rows out."""
    for batch in batches:
        rows = batch.to_pylist()
        yield pa.RecordBatch.from_pylist(
            [
                {
                    "run": r["run"],
                    "log_dir": r["log_dir"],
                    "metadata_log": metadata_log_json(decode_metadata_log(r["path"])),
                }
                for r in rows
            ],
            schema=METADATA_SCHEMA,
        )
