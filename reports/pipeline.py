"""The data pipeline behind reports and ``logfork audit --html``, on Spark.

    sources (driver: list dirs, read small files)
      -> scan: partition dirs spread over Spark tasks, each read by `checkers` (mapInArrow)
      -> judge: replicas grouped by partition, cogrouped with acknowledged sends; each
         group rebuilds its `Lineage` objects and calls `judge_partition` (applyInPandas)
      -> tables: Parquet beside each run (`<run>/tables/<name>.parquet`) or where asked
      -> `RunResult` per source: what a report shows, and the `AuditResult` of an audit

Every collected result is sorted on its keys, so the answer does not depend on how many
tasks or cores did the work (local[1] and local[2] give the same result).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import pickle
import shutil
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from checkers.audit import AuditError, AuditResult
from checkers.errors import TornTail
from checkers.lineage import Lineage
from checkers.metadata_log import METADATA_TOPICS, MetadataLog
from checkers.verdict import PartitionVerdict
from reports import tables as T
from reports.judge import DETAILED_UP_TO, JudgeConfig, judge_bucket
from reports.progress import SparkProgress
from reports.scan import scan_replicas
from reports.sources import ReplicaTask, RunSource
from reports.spark import get_session, quiet_pandas_warning

TABLES_DIR = "tables"
# Tables the driver writes (small) and those Spark writes (as large as the logs).
DRIVER_TABLES = ("runs", "lineage", "epochs", "errors", "states", "timeline", "verdicts")
SPARK_TABLES = ("batches", "producer")


@dataclass
class PartitionResult:
    run: str
    topic: str
    partition: int
    status: str  # consistent | diverged | absent (acknowledged writes, no replica on disk)
    diverged_at: int | None
    below_high_watermark: bool | None
    high_watermark: int | None
    leader: int | None
    replicas: list[int]
    protocol: str
    acked: int | None
    lost: int | None
    verdict: dict[str, Any] | None  # PartitionVerdict.to_dict()
    report: dict[str, Any]  # see reports.judge.report_data
    verdict_object: PartitionVerdict | None = field(default=None, repr=False, compare=False)


@dataclass
class ReplicaSummary:
    """One scanned replica without its batches: what the audit result needs of it."""

    log_dir: int
    child: int
    broker: int
    topic: str
    partition: int
    judged: bool
    metadata: bool
    path: str
    batches: int
    log_start_offset: int | None
    high_watermark: int | None
    log_end_offset: int | None
    recovery_point: int | None
    torn_tail: dict[str, Any] | None
    errors: list[dict[str, Any]]
    checkpointed: list[tuple[int, int]] | None
    derived: list[tuple[int, int]]
    topic_id: str | None


@dataclass
class RunResult:
    source: RunSource
    partitions: list[PartitionResult] = field(default_factory=list)
    replicas: list[ReplicaSummary] = field(default_factory=list)
    metadata: MetadataLog | None = None
    kraft_state: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    producer: dict[str, Any] | None = None  # summary of producer.jsonl
    acks_per_second: list[dict[str, Any]] = field(default_factory=list)
    states: list[dict[str, Any]] = field(default_factory=list)
    tables_dir: Path | None = None
    metadata_logs: dict[int, MetadataLog] = field(default_factory=dict, repr=False)

    @property
    def key(self) -> str:
        return self.source.key

    def errors(self) -> list[AuditError]:
        """Bad input, in the order `checkers.audit.audit` lists it."""
        lineage_errors = {
            (r.log_dir, r.topic, r.partition): r.errors for r in self.replicas if r.judged
        }
        by_dir = {}
        for r in self.replicas:
            by_dir.setdefault(r.log_dir, r.broker)
        out: list[AuditError] = []
        for slot in self.source.error_slots:
            if isinstance(slot, AuditError):
                out.append(slot)
            elif slot[0] == "lineage":
                broker = self.source.log_dirs[slot[1]].broker_id
                out.extend(
                    AuditError(T.error_from_value(e), broker)
                    for e in lineage_errors.get((slot[1], slot[2], slot[3]), [])
                )
            elif slot[0] == "metadata":
                log = self.metadata_logs.get(slot[1])
                if log is not None:
                    broker = self.source.log_dirs[slot[1]].broker_id
                    out.extend(AuditError(e, broker) for e in log.errors)
        return out

    def audit_result(self) -> AuditResult:
        """The `AuditResult` that `checkers.audit.audit` returns for the same inputs (the
        pipeline must have run with `verdict_objects=True`)."""
        if any(p.verdict is not None and p.verdict_object is None for p in self.partitions):
            raise ValueError("audit_result needs run_pipeline(..., verdict_objects=True)")
        result = AuditResult()
        result.errors = self.errors()
        result.unreadable = list(self.source.unreadable)
        result.metadata = self.metadata
        result.kraft_state = dict(self.kraft_state)
        log_dirs = [dataclasses.replace(d, lineages={}) for d in self.source.log_dirs]
        for r in sorted(self.replicas, key=lambda r: (r.log_dir, r.child)):
            log_dirs[r.log_dir].lineages[(r.topic, r.partition)] = _light_lineage(r)
        for index, log in self.metadata_logs.items():
            log_dirs[index].metadata_log = log
        result.log_dirs = log_dirs
        result.partitions = [
            p.verdict_object for p in self.partitions if p.verdict_object is not None
        ]
        return result


def _light_lineage(r: ReplicaSummary) -> Lineage:
    torn = r.torn_tail
    return Lineage(
        r.topic,
        r.partition,
        r.broker,
        [],
        derived_epoch_starts=list(r.derived),
        checkpointed_epoch_starts=r.checkpointed,
        log_start_offset=r.log_start_offset,
        high_watermark=r.high_watermark,
        log_end_offset=r.log_end_offset,
        recovery_point=r.recovery_point,
        torn_tail=None if torn is None else TornTail(**torn),
        errors=[T.error_from_value(e) for e in r.errors],
        path=r.path,
        topic_id=r.topic_id,
    )


@dataclass
class PipelineResult:
    runs: list[RunResult]
    master: str
    timings: dict[str, float] = field(default_factory=dict)

    def run(self, key: str) -> RunResult:
        return next(r for r in self.runs if r.key == key)


# --------------------------------------------------------------------------------------


def run_pipeline(
    sources: Sequence[RunSource],
    *,
    master: str | None = None,
    write_tables: bool = True,
    tables_dir: Path | None = None,
    verdict_objects: bool = False,
) -> PipelineResult:
    """Scan, judge and tabulate every source. Tables go to `<run>/tables/` for reported run
    directories, or under `tables_dir` (one folder per source key when there are several)
    for audits; `write_tables=False` writes none. `verdict_objects` keeps each partition's
    `PartitionVerdict` (for `RunResult.audit_result`)."""
    quiet_pandas_warning()
    spark = get_session(master)
    timings: dict[str, float] = {}
    started = time.monotonic()
    results = {s.key: RunResult(s) for s in sources}
    tasks = [t for s in sources for t in s.tasks]

    mark = time.monotonic()
    replicas = _scan(spark, tasks)
    with SparkProgress(spark, f"reading {len(tasks)} replica(s) of {len(sources)} run(s)"):
        summaries = _collect_summaries(replicas)
    for key, items in summaries.items():
        results[key].replicas = items
    timings["scan"] = time.monotonic() - mark

    mark = time.monotonic()
    _metadata(replicas, sources, results)
    config = _judge_config(sources, results, verdict_objects)
    sends = _producer_frame(spark, sources)
    acked = (
        sends.filter("error IS NULL AND offset IS NOT NULL AND partition IS NOT NULL")
        if sends is not None
        else None
    )
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    assignment = buckets(results, parallelism)
    # Every bucket its own task: Spark's adaptive coalescing would fold a small shuffle into
    # one task, which is all of the judging on one core.
    spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")
    spark.conf.set(
        "spark.sql.shuffle.partitions", str(max(1, min(len(assignment) or 1, parallelism * 4)))
    )
    verdicts = _judge(spark, replicas, acked, config, assignment)
    with SparkProgress(spark, f"judging {len(assignment)} partition(s)"):
        rows = _rows(verdicts)
    for row in sorted(rows, key=lambda r: (r["run"], r["topic"], r["partition"])):
        results[row["run"]].partitions.append(_partition_result(row))
    timings["judge"] = time.monotonic() - mark

    mark = time.monotonic()
    if sends is not None:
        with SparkProgress(spark, "summarising producer histories"):
            _producer_summary(sends, results)
    for source in sources:
        results[source.key].states = _states(source, results[source.key])
    timings["producer"] = time.monotonic() - mark

    if write_tables:
        mark = time.monotonic()
        destinations = _destinations(sources, tables_dir)
        with SparkProgress(spark, "writing tables"):
            _write_tables(spark, replicas, sends, results, destinations)
        for key, dest in destinations.items():
            results[key].tables_dir = dest
        timings["tables"] = time.monotonic() - mark
    replicas.unpersist()
    timings["total"] = time.monotonic() - started
    master_name = spark.sparkContext.master
    return PipelineResult([results[s.key] for s in sources], master_name, timings)


# --------------------------------------------------------------------------------------
# Scan


def _rows(frame: Any) -> list[dict[str, Any]]:
    """Collect through Arrow: far cheaper than pickled Rows for nested columns."""
    return frame.toArrow().to_pylist()


def _interleave(tasks: Sequence[ReplicaTask], slices: int) -> list[ReplicaTask]:
    # parallelize() cuts contiguous slices; dealing the tasks round-robin first spreads
    # each topic's partitions (often alike in size) over every slice.
    return [t for i in range(slices) for t in tasks[i::slices]]


def _scan(spark: Any, tasks: Sequence[ReplicaTask]) -> Any:
    from pyspark import StorageLevel
    from pyspark.sql.pandas.types import from_arrow_schema

    task_schema = from_arrow_schema(T.TASK_SCHEMA)
    names = T.TASK_SCHEMA.names
    rows = [tuple(getattr(t, n) for n in names) for t in tasks]
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    slices = max(1, min(len(rows), parallelism * 3))
    rows = _interleave(rows, slices) if rows else rows
    rdd = spark.sparkContext.parallelize(rows, slices)
    frame = spark.createDataFrame(rdd, task_schema)
    scanned = frame.mapInArrow(scan_replicas, from_arrow_schema(T.REPLICA_SCHEMA))
    return scanned.persist(StorageLevel.MEMORY_AND_DISK)


def _collect_summaries(replicas: Any) -> dict[str, list[ReplicaSummary]]:
    from pyspark.sql import functions as F

    r = "replica."
    rows = replicas.select(
        "run",
        "log_dir",
        "child",
        "broker",
        "topic",
        "partition",
        "judged",
        "metadata",
        F.col(r + "path").alias("path"),
        F.col(r + "batch_count").alias("batches"),
        F.col(r + "log_start_offset").alias("log_start_offset"),
        F.col(r + "high_watermark").alias("high_watermark"),
        F.col(r + "log_end_offset").alias("log_end_offset"),
        F.col(r + "recovery_point").alias("recovery_point"),
        F.col(r + "torn_tail").alias("torn_tail"),
        F.col(r + "errors").alias("errors"),
        F.col(r + "checkpointed").alias("checkpointed"),
        F.col(r + "derived").alias("derived"),
        F.col(r + "topic_id").alias("topic_id"),
    )
    rows = _rows(rows)
    out: dict[str, list[ReplicaSummary]] = defaultdict(list)
    for row in sorted(rows, key=lambda x: (x["run"], x["log_dir"], x["child"])):
        checkpointed = row["checkpointed"]
        out[row["run"]].append(
            ReplicaSummary(
                log_dir=row["log_dir"],
                child=row["child"],
                broker=row["broker"],
                topic=row["topic"],
                partition=row["partition"],
                judged=row["judged"],
                metadata=row["metadata"],
                path=row["path"],
                batches=row["batches"],
                log_start_offset=row["log_start_offset"],
                high_watermark=row["high_watermark"],
                log_end_offset=row["log_end_offset"],
                recovery_point=row["recovery_point"],
                torn_tail=row["torn_tail"],
                errors=list(row["errors"] or []),
                checkpointed=None
                if checkpointed is None
                else [(e["epoch"], e["start_offset"]) for e in checkpointed],
                derived=[(e["epoch"], e["start_offset"]) for e in row["derived"] or []],
                topic_id=row["topic_id"],
            )
        )
    return out


def _metadata(replicas: Any, sources: Sequence[RunSource], results: dict[str, RunResult]) -> None:
    """Decoded KRaft metadata logs, and per run the longest one (as the audit picks it)."""
    if not any(t.metadata for s in sources for t in s.tasks):
        return
    rows = replicas.filter("metadata AND metadata_log IS NOT NULL").select(
        "run", "log_dir", "metadata_log", "judged"
    )
    for row in sorted(_rows(rows), key=lambda x: (x["run"], x["log_dir"])):
        result = results[row["run"]]
        source = result.source
        log_dir = source.log_dirs[row["log_dir"]]
        if not log_dir.readable or log_dir.broker_id is None:
            continue
        log = T.metadata_log_from_json(row["metadata_log"])
        result.metadata_logs[row["log_dir"]] = log
        if result.metadata is None or log.end_offset > result.metadata.end_offset:
            result.metadata = log


def _judge_config(
    sources: Sequence[RunSource], results: dict[str, RunResult], verdict_objects: bool
) -> JudgeConfig:
    protocols = {s.key: s.protocol.value for s in sources}
    leaders: dict[tuple[str, str, int], int] = {}
    for source in sources:
        result = results[source.key]
        quorum = [q for q in source.quorum_states.values() if q is not None]
        quorum_leader = None
        if quorum:
            best = max(quorum, key=lambda s: s.leader_epoch)
            quorum_leader = best.leader_id if best.leader_id >= 0 else None
        judged = sorted({(t.topic, t.partition) for t in source.tasks if t.judged})
        for tp in judged:
            leader = None
            if result.metadata is not None:
                event = result.metadata.current(*tp)
                if event is not None:
                    result.kraft_state[tp] = event.to_dict()
                    leader = event.leader if event.leader >= 0 else None
            if tp[0] in METADATA_TOPICS:
                leader = quorum_leader
            if leader is not None:
                leaders[(source.key, *tp)] = leader
    brief = frozenset(
        s.key
        for s in sources
        if len({(t.topic, t.partition) for t in s.tasks if t.judged}) > DETAILED_UP_TO
    )
    return JudgeConfig(
        protocols=protocols, leaders=leaders, brief_runs=brief, verdict_objects=verdict_objects
    )


def _producer_frame(spark: Any, sources: Sequence[RunSource]) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = from_arrow_schema(pa.schema(T.PRODUCER_FIELDS))
    frames = []
    for source in sources:
        path = source.artifacts.producer
        if path is None:
            continue
        frame = (
            spark.read.schema(schema)
            .option("mode", "PERMISSIVE")
            .json(str(path.resolve()))
            .filter("topic IS NOT NULL")
            .withColumn("run", F.lit(source.key))
        )
        frames.append(frame)
    if not frames:
        return None
    return functools.reduce(lambda a, b: a.unionByName(b), frames)


# A bucket of partitions is judged in one call: at most this many batches, so that a
# worker holds a bounded amount at a time (a larger partition gets a bucket of its own).
BUCKET_BATCHES = 100_000
BUCKETS_PER_CORE = 8


def buckets(results: dict[str, RunResult], parallelism: int) -> dict[tuple[str, str, int], int]:
    """(run, topic, partition) -> bucket, balanced by batch count (largest first into the
    lightest bucket), the same whatever the order of the input."""
    sizes: dict[tuple[str, str, int], int] = defaultdict(int)
    for key, result in results.items():
        for r in result.replicas:
            if r.judged:
                sizes[(key, r.topic, r.partition)] += r.batches + 1
    if not sizes:
        return {}
    total = sum(sizes.values())
    count = max(parallelism * BUCKETS_PER_CORE, -(-total // BUCKET_BATCHES))
    count = max(1, min(len(sizes), count))
    load = [0] * count
    out = {}
    for tp, size in sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0])):
        lightest = min(range(count), key=lambda i: (load[i], i))
        load[lightest] += size
        out[tp] = lightest
    return out


def _judge(
    spark: Any,
    replicas: Any,
    acked: Any,
    config: JudgeConfig,
    assignment: dict[tuple[str, str, int], int],
) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StructType

    keys = ["run", "topic", "partition"]
    bucket_schema = StructType.fromDDL("run string, topic string, partition int, bucket int")
    ordered = sorted(assignment.items())
    table = pa.table(
        {
            "run": pa.array([k[0] for k, _ in ordered], pa.string()),
            "topic": pa.array([k[1] for k, _ in ordered], pa.string()),
            "partition": pa.array([k[2] for k, _ in ordered], pa.int32()),
            "bucket": pa.array([b for _, b in ordered], pa.int32()),
        }
    )
    bucket_frame = F.broadcast(spark.createDataFrame(table, bucket_schema))
    left = (
        replicas.filter("judged")
        .join(bucket_frame, keys)
        .select("run", "bucket", "topic", "partition", "broker", "replica", "batches")
        .groupBy("run", "bucket")
    )
    if acked is None:
        schema = StructType.fromDDL(
            "run string, topic string, partition int, offset long, key string, value string, "
            "acks string, acked double"
        )
        acked = spark.createDataFrame([], schema)
    # Sends to partitions no replica holds go to bucket -1, judged as "absent".
    right = (
        acked.join(bucket_frame, keys, "left")
        .withColumn("bucket", F.coalesce(F.col("bucket"), F.lit(-1)))
        .select("run", "bucket", "topic", "partition", "offset", "key", "value", "acks", "acked")
        .groupBy("run", "bucket")
    )
    return left.cogroup(right).applyInPandas(
        functools.partial(judge_bucket, config), from_arrow_schema(T.VERDICT_SCHEMA)
    )


def _partition_result(row: Any) -> PartitionResult:
    blob = row["verdict_pickle"]
    return PartitionResult(
        run=row["run"],
        topic=row["topic"],
        partition=row["partition"],
        status=row["status"],
        diverged_at=row["diverged_at"],
        below_high_watermark=row["below_high_watermark"],
        high_watermark=row["high_watermark"],
        leader=row["leader"],
        replicas=list(row["replicas"] or []),
        protocol=row["protocol"],
        acked=row["acked"],
        lost=row["lost"],
        verdict=None if row["verdict_json"] is None else json.loads(row["verdict_json"]),
        report=json.loads(row["report_json"] or "{}"),
        verdict_object=None if blob is None else pickle.loads(bytes(blob)),
    )


# --------------------------------------------------------------------------------------
# Producer history and partition states


def _producer_summary(sends: Any, results: dict[str, RunResult]) -> None:
    """Counts per acks setting, the most frequent errors, and acks per second: one
    aggregation, collected small."""
    from pyspark.sql import functions as F

    second = F.floor(F.coalesce(F.col("acked"), F.col("sent"))).cast("long")
    ok = F.col("error").isNull() & F.col("offset").isNotNull()
    grouped = sends.groupBy("run", "acks", second.alias("second"), ok.alias("ok"), "error").agg(
        F.count(F.lit(1)).alias("n")
    )
    grouped = _rows(grouped)
    per_run: dict[str, list[Any]] = defaultdict(list)
    for row in grouped:
        per_run[row["run"]].append(row)
    for run, rows in per_run.items():
        by_acks: dict[str, dict[str, int]] = defaultdict(lambda: {"sent": 0, "acked": 0})
        errors: dict[str, int] = defaultdict(int)
        seconds: dict[int, dict[str, int]] = defaultdict(lambda: {"acked": 0, "failed": 0})
        for row in rows:
            acks = str(row["acks"])
            by_acks[acks]["sent"] += row["n"]
            if row["ok"]:
                by_acks[acks]["acked"] += row["n"]
            elif row["error"] is not None:
                errors[row["error"]] += row["n"]
            if row["second"] is not None:
                seconds[row["second"]]["acked" if row["ok"] else "failed"] += row["n"]
        sent = sum(v["sent"] for v in by_acks.values())
        acked = sum(v["acked"] for v in by_acks.values())
        results[run].producer = {
            "sent": sent,
            "acked": acked,
            "failed": sent - acked,
            "by_acks": {k: dict(v) for k, v in sorted(by_acks.items())},
            "errors": sorted(errors.items(), key=lambda kv: (-kv[1], kv[0]))[:10],
        }
        results[run].acks_per_second = [{"second": s, **v} for s, v in sorted(seconds.items())]


def _states(source: RunSource, result: RunResult) -> list[dict[str, Any]]:
    """The partition-state history: states.jsonl, else what timeline "state" events and
    the KRaft metadata log tell."""
    out: list[dict[str, Any]] = []
    for item in source.artifacts.states:
        isr = item.get("isr")
        out.append(
            {
                "wall": _num(item.get("wall")),
                "topic": _str(item.get("topic")),
                "partition": _int(item.get("partition")),
                "leader": _int(item.get("leader")),
                "leader_epoch": _int(item.get("leader_epoch")),
                "isr": [int(x) for x in isr] if isinstance(isr, list) else None,
                "recovery_state": _str(item.get("recovery_state")),
                "version": _int(item.get("version")),
                "source": _str(item.get("source")) or "states.jsonl",
            }
        )
    if not out:
        for event in source.artifacts.timeline:
            if event.get("kind") != "state" or event.get("leader") is None:
                continue
            isr = event.get("isr")
            out.append(
                {
                    "wall": _num(event.get("wall")),
                    "topic": _str(event.get("topic")),
                    "partition": _int(event.get("partition")),
                    "leader": _int(event.get("leader")),
                    "leader_epoch": _int(event.get("epoch", event.get("leader_epoch"))),
                    "isr": [int(x) for x in isr] if isinstance(isr, list) else None,
                    "recovery_state": _str(event.get("recovery_state")),
                    "version": None,
                    "source": "timeline",
                }
            )
    if result.metadata is not None:
        for event in result.metadata.events:
            if event.topic is None or event.topic in METADATA_TOPICS:
                continue
            state = event.to_dict()
            out.append(
                {
                    "wall": None,
                    "topic": event.topic,
                    "partition": event.partition,
                    "leader": event.leader,
                    "leader_epoch": event.leader_epoch,
                    "isr": list(event.isr),
                    "recovery_state": state["leader_recovery_state"],
                    "version": event.offset,
                    "source": "metadata-log",
                }
            )
    return out


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return None


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


# --------------------------------------------------------------------------------------
# Tables


def _destinations(sources: Sequence[RunSource], tables_dir: Path | None) -> dict[str, Path]:
    """Where each source's tables go: beside a reported run (`<run>/tables`), else under
    `tables_dir` (itself for one source, `tables_dir/<key>` for several); else nowhere."""
    out: dict[str, Path] = {}
    loose = [s for s in sources if not (s.tables_beside and s.path is not None)]
    for source in sources:
        if source.tables_beside and source.path is not None:
            out[source.key] = source.path / TABLES_DIR
        elif tables_dir is not None:
            out[source.key] = tables_dir if len(loose) == 1 else tables_dir / source.key
    return out


def _write_tables(
    spark: Any,
    replicas: Any,
    sends: Any,
    results: dict[str, RunResult],
    destinations: dict[str, Path],
) -> None:
    if not destinations:
        return
    for key, dest in destinations.items():
        dest.mkdir(parents=True, exist_ok=True)
        for name, table in _driver_tables(results[key]).items():
            _write_arrow(dest / f"{name}.parquet", table)
    _write_spark(spark, "batches", _batches_frame(replicas), destinations)
    if sends is not None:
        _write_spark(spark, "producer", sends, destinations)
    else:
        empty = pa.schema([("run", pa.string()), *T.PRODUCER_FIELDS]).empty_table()
        for dest in destinations.values():
            _write_arrow(dest / "producer.parquet", empty)


def _write_arrow(path: Path, table: pa.Table) -> None:
    """One Parquet dataset folder, like those Spark writes: `<name>.parquet/part-0.parquet`."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    pq.write_table(table, path / "part-00000.parquet")


def _batches_frame(replicas: Any) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return replicas.select("run", "broker", "topic", "partition", "judged", "batches").mapInArrow(
        T.explode_batches, from_arrow_schema(T.BATCHES_SCHEMA)
    )


def _write_spark(spark: Any, name: str, frame: Any, destinations: dict[str, Path]) -> None:
    """Write `frame` once, split by run, then move each run's files to its destination."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema

    staging_root = next(iter(destinations.values())).parent
    staging = staging_root / f".logfork-staging-{uuid.uuid4().hex[:12]}"
    wanted = list(destinations)
    try:
        (
            frame.filter(F.col("run").isin(wanted))
            .withColumn("run_partition", F.col("run"))
            .sortWithinPartitions(
                "run", *[c for c in ("topic", "partition", "broker", "seq") if c in frame.columns]
            )
            .write.mode("overwrite")
            .partitionBy("run_partition")
            .parquet(str(staging))
        )
        empty = to_arrow_schema(frame.schema).empty_table()
        for key, dest in destinations.items():
            target = dest / f"{name}.parquet"
            if target.exists():
                shutil.rmtree(target)
            part = staging / f"run_partition={key}"
            if part.is_dir():
                shutil.move(str(part), str(target))
            else:
                _write_arrow(target, empty)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _driver_tables(result: RunResult) -> dict[str, pa.Table]:
    source = result.source
    key = source.key
    art = source.artifacts
    verdict_doc = art.verdict or {}
    run_doc = art.run or {}

    def doc(*names: str) -> Any:
        for name in names:
            for d in (verdict_doc, run_doc):
                if d.get(name) is not None:
                    return d[name]
        return None

    runs = pa.Table.from_pylist(
        [
            {
                "run": key,
                "path": None if source.path is None else str(source.path),
                "scenario": _str(doc("scenario")),
                "title": _str(doc("title")),
                "kip": _str(doc("kip")),
                "jira": _str(doc("jira")),
                "fixed_in": _str(doc("fixed_in")),
                "release": source.release,
                "mode": _str(doc("mode")),
                "outcome": _str(doc("outcome")),
                "expected": _str(doc("expected")),
                "as_expected": doc("as_expected") if isinstance(doc("as_expected"), bool) else None,
                "summary": _str(doc("summary")),
                "started": _num(run_doc.get("started")),
                "finished": _num(run_doc.get("finished")),
                "protocol": source.protocol.value,
                "run_json": json.dumps(art.run) if art.run is not None else None,
                "verdict_json": json.dumps(art.verdict) if art.verdict is not None else None,
                "cluster_json": json.dumps(art.cluster) if art.cluster is not None else None,
            }
        ],
        schema=T.RUNS_SCHEMA,
    )
    lineage_rows, epoch_rows, error_rows = [], [], []
    for r in result.replicas:
        lineage_rows.append(
            {
                "run": key,
                "log_dir": source.log_dirs[r.log_dir].path,
                "broker": r.broker,
                "topic": r.topic,
                "partition": r.partition,
                "judged": r.judged,
                "path": r.path,
                "topic_id": r.topic_id,
                "batches": r.batches,
                "log_start_offset": r.log_start_offset,
                "high_watermark": r.high_watermark,
                "log_end_offset": r.log_end_offset,
                "recovery_point": r.recovery_point,
                "torn_tail": None if r.torn_tail is None else json.dumps(r.torn_tail),
                "errors": len(r.errors),
            }
        )
        for origin, entries in (("checkpoint", r.checkpointed or []), ("batches", r.derived)):
            for epoch, start in entries:
                epoch_rows.append(
                    {
                        "run": key,
                        "broker": r.broker,
                        "topic": r.topic,
                        "partition": r.partition,
                        "source": origin,
                        "epoch": epoch,
                        "start_offset": start,
                    }
                )
    for e in result.errors():
        error_rows.append({"run": key, "broker": e.broker_id, **e.error.to_dict()})
    lineage = pa.Table.from_pylist(
        lineage_rows,
        schema=pa.schema(
            [
                ("run", pa.string()),
                ("log_dir", pa.string()),
                ("broker", pa.int32()),
                ("topic", pa.string()),
                ("partition", pa.int32()),
                ("judged", pa.bool_()),
                ("path", pa.string()),
                ("topic_id", pa.string()),
                ("batches", pa.int64()),
                ("log_start_offset", pa.int64()),
                ("high_watermark", pa.int64()),
                ("log_end_offset", pa.int64()),
                ("recovery_point", pa.int64()),
                ("torn_tail", pa.string()),
                ("errors", pa.int32()),
            ]
        ),
    )
    epochs = pa.Table.from_pylist(
        epoch_rows,
        schema=pa.schema(
            [
                ("run", pa.string()),
                ("broker", pa.int32()),
                ("topic", pa.string()),
                ("partition", pa.int32()),
                ("source", pa.string()),
                ("epoch", pa.int32()),
                ("start_offset", pa.int64()),
            ]
        ),
    )
    errors = pa.Table.from_pylist(
        error_rows,
        schema=pa.schema(
            [
                ("run", pa.string()),
                ("broker", pa.int32()),
                ("kind", pa.string()),
                ("path", pa.string()),
                ("offset", pa.int64()),
                ("reason", pa.string()),
            ]
        ),
    )
    timeline = pa.Table.from_pylist(
        [_timeline_row(key, i, e) for i, e in enumerate(art.timeline)], schema=T.TIMELINE_SCHEMA
    )
    states = pa.Table.from_pylist(
        [{"run": key, "seq": i, **s} for i, s in enumerate(result.states)],
        schema=T.STATES_SCHEMA,
    )
    verdicts = pa.Table.from_pylist(
        [
            {
                "run": key,
                "topic": p.topic,
                "partition": p.partition,
                "status": p.status,
                "diverged_at": p.diverged_at,
                "below_high_watermark": p.below_high_watermark,
                "high_watermark": p.high_watermark,
                "leader": p.leader,
                "replicas": p.replicas,
                "protocol": p.protocol,
                "acked": p.acked,
                "lost": p.lost,
                "verdict_json": None if p.verdict is None else json.dumps(p.verdict),
                "report_json": json.dumps(p.report),
            }
            for p in result.partitions
        ],
        schema=pa.schema([f for f in T.VERDICT_SCHEMA if f.name != "verdict_pickle"]),
    )
    return {
        "runs": runs,
        "lineage": lineage,
        "epochs": epochs,
        "errors": errors,
        "states": states,
        "timeline": timeline,
        "verdicts": verdicts,
    }


def _timeline_row(key: str, seq: int, event: dict[str, Any]) -> dict[str, Any]:
    return {
        "run": key,
        "seq": seq,
        "kind": _str(event.get("kind")),
        "name": _str(event.get("name")),
        "wall": _num(event.get("wall")),
        "mono": _num(event.get("mono")),
        "node": _str(event.get("node")),
        "broker": _int(event.get("broker")),
        "topic": _str(event.get("topic")),
        "partition": _int(event.get("partition")),
        "leader": _int(event.get("leader")),
        "epoch": _int(event.get("epoch")),
        "fields_json": json.dumps(event, default=str),
    }


def read_table(run_tables: Path | str, name: str) -> pa.Table:
    """A table written by the pipeline, as one Arrow table."""
    return pq.read_table(Path(run_tables) / f"{name}.parquet")
