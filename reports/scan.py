"""The executors' side of the Spark engine: read, judge and write one partition at a time.

A bucket of partitions reaches `judge_bucket` as its read tasks (`checkers.audit.plan
.ReadTask`, one per replica, as JSON) and its acknowledged sends. Each partition's replicas
are read exactly as the local engine reads them (`checkers.audit.read`), judged by the same
code (`checkers.audit.decide.judge`, `reports.judge.partition_row`), their rows for the
tables that grow with the logs (batches, lineage, epochs) are handed to a buffered writer,
and the replicas are dropped before the next partition is read. What a task holds is thus
one partition's replicas plus a bounded buffer of table rows, however large the bucket.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pyarrow as pa

from checkers.audit import decide
from checkers.audit.plan import ReadTask
from checkers.audit.read import metadata_at, read_decisions, read_replicas
from checkers.coordinator_log import Decision, Decisions
from checkers.lineage import Lineage
from checkers.transactions import DEFAULT_TXN_TIMEOUT_MS
from reports import rows as R
from reports.judge import JudgeConfig, partition_row
from reports.outputs import as_location, child, write_parquet
from reports.tables import (
    BATCHES_SCHEMA,
    COORDINATOR_SCHEMA,
    EPOCHS_SCHEMA,
    LINEAGE_TABLE_SCHEMA,
    METADATA_SCHEMA,
    VERDICT_SCHEMA,
)

BATCHES_TABLE, LINEAGE_TABLE, EPOCHS_TABLE = "batches.parquet", "lineage.parquet", "epochs.parquet"
EXECUTOR_TABLES = (BATCHES_TABLE, LINEAGE_TABLE, EPOCHS_TABLE)
# Table rows a task buffers before writing a file: bounds executor memory on replicas with
# millions of batches, while keeping files few.
MAX_BUFFERED_BATCHES = 250_000
MAX_BUFFERED_REPLICAS = 256


def task_json(task: ReadTask) -> str:
    """A read task as a JSON array of its fields in declaration order (a dataclass's
    `__dict__` keeps it): half the bytes of an object, and the driver encodes one per
    replica of the fleet."""
    return _COMPACT.encode(list(task.__dict__.values()))


def task_from_json(text: str) -> ReadTask:
    return ReadTask(*json.loads(text))


_COMPACT = json.JSONEncoder(separators=(",", ":"))


def _task_context() -> tuple[int, int]:
    """(stage id, task attempt id) of the running Spark task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return -1, -1
    return context.stageId(), context.taskAttemptId()


class TableWriter:
    """The tables as large as the logs, written where the replicas are read. Rows are
    buffered as Arrow batches and written out past `MAX_BUFFERED_*`; each file is named by
    the bucket (unique in its run) and a chunk number, so a retried task rewrites the same
    files instead of adding to them."""

    def __init__(self, tables: str | None, run: str, bucket: int) -> None:
        self.tables, self.run, self.bucket = tables, run, bucket
        self.chunk = 0
        self.buffered: dict[str, list[pa.RecordBatch]] = {n: [] for n in EXECUTOR_TABLES}
        self.batches = self.replicas = 0

    def add(self, task: ReadTask, lineage: Lineage) -> None:
        if not self.tables:
            return
        row = {**task.__dict__, "run": self.run}
        key = (self.run, task.broker, task.topic, task.partition, task.judged)
        self.buffered[BATCHES_TABLE].append(R.batch_rows_table([key], [lineage.batches]))
        self.buffered[LINEAGE_TABLE].append(R.lineage_table([row], [lineage]))
        self.buffered[EPOCHS_TABLE].append(R.epochs_table([row], [lineage]))
        self.batches += len(lineage.batches)
        self.replicas += 1
        if self.batches >= MAX_BUFFERED_BATCHES or self.replicas >= MAX_BUFFERED_REPLICAS:
            self.flush()

    def flush(self) -> None:
        if not self.tables or not self.replicas:
            return
        schemas = {
            BATCHES_TABLE: BATCHES_SCHEMA,
            LINEAGE_TABLE: LINEAGE_TABLE_SCHEMA,
            EPOCHS_TABLE: EPOCHS_SCHEMA,
        }
        for name, batches in self.buffered.items():
            self._put(name, pa.Table.from_batches(batches, schema=schemas[name]))
            batches.clear()
        self.chunk += 1
        self.batches = self.replicas = 0

    def _put(self, name: str, table: pa.Table) -> None:
        assert self.tables is not None
        folder = child(as_location(self.tables), name)
        write_parquet(folder, f"part-{self.bucket:05d}-{self.chunk:04d}.parquet", table)


def _by_partition(frame: pd.DataFrame) -> dict[tuple[str, int], list[dict[str, Any]]]:
    out: dict[tuple[str, int], list[dict[str, Any]]] = {}
    if len(frame):
        # pandas 3 hands a null string over as NaN: make every null None, as the local
        # engine's sends have it.
        plain = frame.astype(object).where(frame.notna(), None)
        for row in plain.to_dict("records"):
            out.setdefault((str(row["topic"]), int(row["partition"])), []).append(row)
    return out


def judge_bucket(
    config: JudgeConfig, key: tuple[Any, ...], tasks: pd.DataFrame, sends: pd.DataFrame
) -> pd.DataFrame:
    """Cogrouped applyInPandas function over (run, bucket): the read tasks of some
    partitions and their acknowledged sends in, one `VERDICT_SCHEMA` row per partition out."""
    from basics.protocol import Protocol

    run = str(key[0])
    protocol = Protocol(config.protocols[run])
    held = _by_partition(tasks)
    sent = _by_partition(sends)
    stage, attempt = _task_context()
    tables = next((t["tables"] for rows in held.values() for t in rows if t["tables"]), None)
    writer = TableWriter(tables, run, int(key[1]))
    out = []
    for tp in sorted(held.keys() | sent.keys()):
        read = sorted(
            (task_from_json(t["task_json"]) for t in held.get(tp, [])),
            key=lambda t: (t.log_dir, t.child),
        )
        summaries, judged = read_replicas(read, writer.add)
        leader = config.leaders.get((run, *tp))
        compacted = config.compacted.get((run, tp[0]))
        ages = (
            config.txn_timeouts.get(run, DEFAULT_TXN_TIMEOUT_MS),
            config.txn_references.get(run),
            config.decisions.get((run, *tp)),
        )
        verdict = decide.judge(judged, leader, protocol, compacted, *ages) if judged else None
        done = partition_row(config, run, tp, summaries, judged, verdict, sent.get(tp, []))
        del judged  # the replicas go before the next partition is read
        out.append(
            {
                "run": run,
                "topic": tp[0],
                "partition": tp[1],
                "status": done.status,
                "judged_pickle": pickle.dumps(
                    (done.report, [R.summary_value(s) for s in summaries], verdict),
                    protocol=pickle.HIGHEST_PROTOCOL,
                ),
                "stage": stage,
                "task": attempt,
            }
        )
    writer.flush()
    # Object columns keep None as null and ints exact through Arrow, in pandas 2 and 3.
    return pd.DataFrame(
        {c: pd.Series([r.get(c) for r in out], dtype=object) for c in VERDICT_SCHEMA.names}
    )


def decode_metadata(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: metadata log partition dirs in, `METADATA_SCHEMA` rows out."""
    for batch in batches:
        rows = batch.to_pylist()
        yield pa.RecordBatch.from_pylist(
            [
                {
                    "run": r["run"],
                    "log_dir": r["log_dir"],
                    "metadata_log": metadata_log_json(r["path"]),
                }
                for r in rows
            ],
            schema=METADATA_SCHEMA,
        )


def decode_coordinators(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: `COORDINATOR_TASK_SCHEMA` rows in, `COORDINATOR_SCHEMA` out."""
    for batch in batches:
        out = []
        for r in batch.to_pylist():
            tasks = [task_from_json(t) for t in json.loads(r["tasks_json"])]
            decisions = read_decisions(tasks)
            out.append({"run": r["run"], "decisions_json": decisions_json(decisions)})
        yield pa.RecordBatch.from_pylist(out, schema=COORDINATOR_SCHEMA)


def decisions_json(decisions: Decisions) -> str:
    return _COMPACT.encode(
        [[tp[0], tp[1], d.to_dict()] for tp, by_pe in decisions.items() for d in by_pe.values()]
    )


def decisions_from_json(text: str) -> Decisions:
    out: Decisions = {}
    for topic, partition, d in json.loads(text):
        decision = Decision.from_dict(d)
        out.setdefault((topic, partition), {})[(decision.producer_id, decision.producer_epoch)] = (
            decision
        )
    return out


def metadata_log_json(path: str) -> str:
    return R.metadata_log_json(metadata_at(path))
