"""The data pipeline behind reports and ``logfork audit --html``, on Spark.

    sources (driver: list dirs, read small files)
      -> scan: partition dirs spread over Spark tasks, each read by `checkers` (mapInArrow);
         the tasks write the large tables (batches, lineage, epochs) themselves
      -> judge: replicas grouped by partition, cogrouped with acknowledged sends; each
         group rebuilds its `Lineage` objects and calls `judge_partition` (applyInPandas)
      -> tables: Parquet beside each run (`<run>/tables/<name>.parquet`) or where asked
      -> `RunResult` per source: what a report shows, and the `AuditResult` of an audit

Scanning and judging are one Spark job with one shuffle: what crosses the JVM is compact
(a replica's batches travel as one binary value), so the work is the Python tasks', which
is what more cores speed up.

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
from reports.judge import DETAILED_UP_TO, REPLICA_COLUMNS, UNREAD, JudgeConfig, judge_bucket
from reports.progress import SparkProgress
from reports.scan import (
    BATCHES_TABLE,
    EPOCHS_TABLE,
    EXECUTOR_TABLES,
    LINEAGE_TABLE,
    decode_metadata,
    scan_slices,
)
from reports.sources import ReplicaTask, RunSource
from reports.spark import get_session, quiet_pandas_warning

TABLES_DIR = "tables"


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
    verdict_json: str | None  # PartitionVerdict.to_dict(), as JSON
    report_json: str  # see reports.judge.report_data
    verdict_object: PartitionVerdict | None = field(default=None, repr=False, compare=False)

    # Decoded on first use: a run of thousands of partitions reports on a few.
    @functools.cached_property
    def verdict(self) -> dict[str, Any] | None:
        return None if self.verdict_json is None else json.loads(self.verdict_json)

    @functools.cached_property
    def report(self) -> dict[str, Any]:
        return json.loads(self.report_json or "{}")


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
        if any(p.verdict_json is not None and p.verdict_object is None for p in self.partitions):
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
    destinations = _destinations(sources, tables_dir) if write_tables else {}
    for dest in destinations.values():
        for name in EXECUTOR_TABLES:
            _fresh(dest / name)

    mark = time.monotonic()
    _metadata(spark, sources, results)
    timings["metadata"] = time.monotonic() - mark

    mark = time.monotonic()
    config = _judge_config(sources, results, verdict_objects)
    sends = _producer_frame(spark, sources)
    acked = (
        sends.filter("error IS NULL AND offset IS NOT NULL AND partition IS NOT NULL")
        if sends is not None
        else None
    )
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    assignment, partitions = buckets(spark, tasks, parallelism)
    # The buckets land on distinct shuffle partitions (see `buckets`); Spark's adaptive
    # execution must not fold them back into fewer tasks.
    spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    scanned, shared = _scan(spark, tasks, assignment, destinations)
    verdicts = _judge(spark, scanned, acked, config, assignment)
    label = f"reading and judging {len(tasks)} replica(s) of {len(sources)} run(s)"
    try:
        with SparkProgress(spark, label):
            rows = _rows(verdicts)
    finally:
        shared.destroy()
    for row in sorted(rows, key=lambda r: (r["run"], r["topic"], r["partition"])):
        result = results[row["run"]]
        result.replicas.extend(_summaries(row))
        if row["status"] != UNREAD:
            result.partitions.append(_partition_result(row))
    for result in results.values():
        result.replicas.sort(key=lambda r: (r.log_dir, r.child))
    timings["scan+judge"] = time.monotonic() - mark

    mark = time.monotonic()
    if sends is not None:
        with SparkProgress(spark, "summarising producer histories"):
            _producer_summary(sends, results)
    for source in sources:
        results[source.key].states = _states(source, results[source.key])
    timings["producer"] = time.monotonic() - mark

    if destinations:
        mark = time.monotonic()
        with SparkProgress(spark, "writing tables"):
            _write_tables(spark, sends, results, destinations)
        for key, dest in destinations.items():
            results[key].tables_dir = dest
        timings["tables"] = time.monotonic() - mark
    timings["total"] = time.monotonic() - started
    master_name = spark.sparkContext.master
    return PipelineResult([results[s.key] for s in sources], master_name, timings)


# --------------------------------------------------------------------------------------
# Scan and judge


def _rows(frame: Any) -> list[dict[str, Any]]:
    """Collect through Arrow: far cheaper than pickled Rows for nested columns."""
    return frame.toArrow().to_pylist()


def _task_frame(spark: Any, rows: Sequence[tuple[Any, ...]], schema: pa.Schema) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    parallelism = max(1, spark.sparkContext.defaultParallelism)
    slices = max(1, min(len(rows), parallelism * 3))
    rdd = spark.sparkContext.parallelize(list(rows), slices)
    return spark.createDataFrame(rdd, from_arrow_schema(schema))


def _scan(
    spark: Any,
    tasks: Sequence[ReplicaTask],
    assignment: dict[tuple[str, str, int], int],
    destinations: dict[str, Path],
) -> tuple[Any, Any]:
    """Replica rows from Spark tasks, each reading a slice of the partition dirs, and the
    broadcast that carries the slices (Spark itself only hands out slice numbers)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    tables = {run: str(dest) for run, dest in destinations.items()}
    rows = [
        {
            "run": t.run,
            "log_dir": t.log_dir,
            "child": t.child,
            "broker": t.broker,
            "topic": t.topic,
            "partition": t.partition,
            "judged": t.judged,
            "metadata": t.metadata,
            "bucket": assignment[(t.run, t.topic, t.partition)],
            "path": t.path,
            "high_watermark": t.high_watermark,
            "log_start_checkpoint": t.log_start_checkpoint,
            "recovery_point": t.recovery_point,
            "tables": tables.get(t.run),
        }
        for t in tasks
    ]
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    count = max(1, min(len(rows), parallelism * 3))
    # Dealt round-robin: each slice gets its share of every topic (often alike in size).
    slices = [rows[i::count] for i in range(count)]
    shared = spark.sparkContext.broadcast(slices)
    numbers = spark.range(0, count, 1, numPartitions=count)
    frame = numbers.mapInArrow(
        functools.partial(scan_slices, shared), from_arrow_schema(T.REPLICA_SCHEMA)
    )
    return frame, shared


def _summaries(row: dict[str, Any]) -> list[ReplicaSummary]:
    return [
        ReplicaSummary(**item, topic=row["topic"], partition=row["partition"])
        for item in json.loads(row["replicas_json"] or "[]")
    ]


def _metadata(spark: Any, sources: Sequence[RunSource], results: dict[str, RunResult]) -> None:
    """KRaft metadata logs, decoded by Spark tasks before the judging (which needs the
    leaders they name); per run the longest one counts, as in the audit."""
    from pyspark.sql.pandas.types import from_arrow_schema

    wanted = [
        (t.run, t.log_dir, t.path)
        for s in sources
        for t in s.tasks
        if t.metadata
        and s.log_dirs[t.log_dir].readable
        and s.log_dirs[t.log_dir].broker_id is not None
    ]
    if not wanted:
        return
    frame = _task_frame(spark, wanted, T.METADATA_TASK_SCHEMA)
    decoded = frame.mapInArrow(decode_metadata, from_arrow_schema(T.METADATA_SCHEMA))
    with SparkProgress(spark, f"decoding {len(wanted)} metadata log(s)"):
        rows = _rows(decoded)
    for row in sorted(rows, key=lambda x: (x["run"], x["log_dir"])):
        result = results[row["run"]]
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


# A bucket of partitions is judged in one pandas call: at most about this many bytes of
# segments, so that a worker holds a bounded amount at a time (a larger partition gets a
# bucket of its own). Below that, one bucket per core: every group and every task costs
# Spark and pandas a round trip, and fewer of them is faster.
BUCKET_BYTES = 128 * 1024 * 1024


def buckets(
    spark: Any, tasks: Sequence[ReplicaTask], cores: int
) -> tuple[dict[tuple[str, str, int], int], int]:
    """(run, topic, partition) -> bucket, and the number of shuffle partitions to judge in.

    Partitions are packed into buckets by size (largest first into the lightest bucket of
    their run); bucket numbers are chosen so that Spark's hash partitioning of the group key
    (run, bucket) sends the buckets to distinct shuffle partitions in turn, so that no core
    gets two buckets while another gets none."""
    sizes: dict[tuple[str, str, int], int] = defaultdict(int)
    for t in tasks:
        sizes[(t.run, t.topic, t.partition)] += t.size + 1
    if not sizes:
        return {}, 1
    per_run: dict[str, list[tuple[tuple[str, str, int], int]]] = defaultdict(list)
    for key, size in sizes.items():
        per_run[key[0]].append((key, size))
    total = sum(sizes.values())
    count = max(cores, -(-total // BUCKET_BYTES))
    runs = sorted(per_run)
    # Each run gets buckets in proportion to its bytes, at least one.
    shares = {
        run: max(1, min(len(per_run[run]), round(count * sum(s for _, s in per_run[run]) / total)))
        for run in runs
    }
    partitions = max(1, min(cores, sum(shares.values())))
    wanted = []
    target = 0
    for run in runs:
        for _ in range(shares[run]):
            wanted.append((run, target % partitions))
            target += 1
    ids = _bucket_ids(spark, wanted, partitions)
    out: dict[tuple[str, str, int], int] = {}
    for run in runs:
        mine = ids[run]
        load = [0] * len(mine)
        for key, size in sorted(per_run[run], key=lambda kv: (-kv[1], kv[0])):
            lightest = min(range(len(mine)), key=lambda i: (load[i], i))
            load[lightest] += size
            out[key] = mine[lightest]
    return out, partitions


def _bucket_ids(
    spark: Any, wanted: Sequence[tuple[str, int]], partitions: int
) -> dict[str, list[int]]:
    """For each (run, shuffle partition) wanted, a bucket number that Spark's shuffle sends
    there: `pmod(hash(run, bucket), partitions)` is exactly its hash partitioning."""
    from pyspark.sql import functions as F

    runs = sorted({run for run, _ in wanted})
    probe = max(64, partitions * 32)
    table = pa.table(
        {
            "run": pa.array([r for r in runs for _ in range(probe)], pa.string()),
            "bucket": pa.array([i for _ in runs for i in range(probe)], pa.int32()),
        }
    )
    frame = spark.createDataFrame(table).select(
        "run", "bucket", F.pmod(F.hash("run", "bucket"), F.lit(partitions)).alias("target")
    )
    free: dict[tuple[str, int], list[int]] = defaultdict(list)
    for row in _rows(frame):
        free[(row["run"], row["target"])].append(row["bucket"])
    taken: dict[str, list[int]] = defaultdict(list)
    for run, target in wanted:
        choices = sorted(free[(run, target)])
        pick = next((b for b in choices if b not in taken[run]), None)
        if pick is None:  # no number lands there: any unused one will do
            pick = next(b for b in range(probe * 2) if b not in taken[run])
        taken[run].append(pick)
    return dict(taken)


def _judge(
    spark: Any,
    scanned: Any,
    acked: Any,
    config: JudgeConfig,
    assignment: dict[tuple[str, str, int], int],
) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StructType

    keys = ["run", "topic", "partition"]
    left = scanned.select("run", "bucket", *REPLICA_COLUMNS).groupBy("run", "bucket")
    if acked is None:
        schema = StructType.fromDDL(
            "run string, topic string, partition int, offset long, key string, value string, "
            "acks string, acked double"
        )
        acked = spark.createDataFrame([], schema)
    ordered = sorted(assignment.items())
    table = pa.table(
        {
            "run": pa.array([k[0] for k, _ in ordered], pa.string()),
            "topic": pa.array([k[1] for k, _ in ordered], pa.string()),
            "partition": pa.array([k[2] for k, _ in ordered], pa.int32()),
            "bucket": pa.array([b for _, b in ordered], pa.int32()),
        }
    )
    bucket_schema = StructType.fromDDL("run string, topic string, partition int, bucket int")
    bucket_frame = F.broadcast(spark.createDataFrame(table, bucket_schema))
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
        verdict_json=row["verdict_json"],
        report_json=row["report_json"] or "{}",
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
    spark: Any, sends: Any, results: dict[str, RunResult], destinations: dict[str, Path]
) -> None:
    """The driver's small tables; the batches table the scan tasks wrote (a run without a
    batch gets an empty one); the producer history through Spark."""
    for key, dest in destinations.items():
        dest.mkdir(parents=True, exist_ok=True)
        for name, table in _driver_tables(results[key]).items():
            _write_arrow(dest / f"{name}.parquet", table)
        for name, schema in (
            (BATCHES_TABLE, T.BATCHES_SCHEMA),
            (LINEAGE_TABLE, T.LINEAGE_TABLE_SCHEMA),
            (EPOCHS_TABLE, T.EPOCHS_SCHEMA),
        ):
            if not any((dest / name).glob("*.parquet")):
                _write_arrow(dest / name, schema.empty_table())
    if sends is not None:
        _write_spark(spark, "producer", sends, destinations)
    else:
        empty = pa.schema([("run", pa.string()), *T.PRODUCER_FIELDS]).empty_table()
        for dest in destinations.values():
            _write_arrow(dest / "producer.parquet", empty)


def _fresh(folder: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)


def _write_arrow(path: Path, table: pa.Table) -> None:
    """One Parquet dataset folder, like those Spark writes: `<name>.parquet/part-0.parquet`."""
    _fresh(path)
    pq.write_table(table, path / "part-00000.parquet")


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
                "run", *[c for c in ("topic", "partition", "offset") if c in frame.columns]
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
    errors = pa.Table.from_pylist(
        [{"run": key, "broker": e.broker_id, **e.error.to_dict()} for e in result.errors()],
        schema=T.ERRORS_SCHEMA,
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
                "verdict_json": p.verdict_json,
                "report_json": p.report_json,
            }
            for p in result.partitions
        ],
        schema=pa.schema([f for f in T.VERDICT_SCHEMA if f.name != "verdict_pickle"]),
    )
    return {
        "runs": runs,
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
