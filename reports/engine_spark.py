"""The Spark engine: each source's read tasks run in Spark tasks.

    metadata-log tasks (mapInArrow) -> the driver chooses each run's leaders
    read tasks (one small row per replica) cogrouped with acknowledged sends by (run,
      bucket) (applyInPandas) -> `reports.scan.judge_bucket` reads, judges and writes the
      large tables one partition at a time -> one compact row per partition, collected
      through Arrow
    producer.jsonl read and counted by Spark -> `reports.pipeline.summarise_sends`

No batch crosses the JVM or the shuffle: the executors read the segments themselves, and
what a task holds is one partition's replicas at a time, so neither the driver's nor an
executor's memory grows with the fleet. Every collected row is sorted on its keys, so the
answer does not depend on how many tasks or cores did the work.
"""

from __future__ import annotations

import functools
import heapq
import json
import pickle
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from checkers.audit import decide
from checkers.audit.plan import ReadTask
from checkers.coordinator_log import Decisions, merge
from checkers.gcpause import gc_paused
from reports import rows as R
from reports import tables as T
from reports import tables_out
from reports.judge import PartitionRow
from reports.outputs import Location, child, fresh
from reports.progress import SparkProgress
from reports.results import Assemble, EngineOutput, RunResult, judge_config
from reports.scan import (
    EXECUTOR_TABLES,
    decisions_from_json,
    decode_coordinators,
    decode_metadata,
    judge_bucket,
    task_json,
)
from reports.sources import RunSource
from reports.spark import get_session, quiet_pandas_warning, task_placement

# A bucket of partitions is judged in one pandas call, a partition at a time: about this
# many bytes of segments, so that work spreads evenly and a failed task redoes little (a
# larger partition gets a bucket of its own). Below that, one bucket per core: every group
# and every task costs Spark and pandas a round trip, and fewer of them is faster.
BUCKET_BYTES = 128 * 1024 * 1024
# What the judge needs of an acknowledged send (`checkers.history.check_history`).
SEND_COLUMNS = ("topic", "partition", "offset", "key", "value", "acks", "acked", "error")


@dataclass
class SparkRun:
    runs: list[RunResult]
    timings: dict[str, float]
    master: str
    placement: dict[tuple[str, str, int], str]  # (run, topic, partition) -> its executor


def run(
    sources: Sequence[RunSource],
    assemble: Assemble,
    *,
    master: str | None = None,
    write_tables: bool = True,
    tables_dir: Location | None = None,
) -> SparkRun:
    quiet_pandas_warning()
    spark = get_session(master)
    final = tables_out.destinations(sources, tables_dir) if write_tables else {}
    # The tables are written aside and moved in place once complete: a failed run leaves
    # no tables that look whole.
    with tables_out.staged(final) as dests:
        for dest in dests.values():
            for name in EXECUTOR_TABLES:
                fresh(child(dest, name))
        # The driver builds a row and a verdict per partition, and assembles them, while
        # the whole plan is alive: cyclic collections would walk every object again and
        # again (two seconds of a 20,000-partition audit). It reads no batches itself.
        with gc_paused():
            done = _execute(spark, sources, assemble, dests)
    for run in done.runs:
        run.tables_dir = final.get(run.key)
    return done


def _execute(
    spark: Any, sources: Sequence[RunSource], assemble: Assemble, dests: dict[str, Location]
) -> SparkRun:
    timings: dict[str, float] = {}
    outputs = {s.key: EngineOutput() for s in sources}
    mark = time.monotonic()
    _metadata(spark, sources, outputs)
    decisions = _coordinators(spark, sources)
    known = {
        s.key: decide.know(s.plan, outputs[s.key].metadata_logs, decisions.get(s.key))
        for s in sources
    }
    timings["metadata"] = time.monotonic() - mark

    mark = time.monotonic()
    config = judge_config(sources, known)
    sends = _producer_frame(spark, sources)
    acked = (
        sends.filter("error IS NULL AND offset IS NOT NULL AND partition IS NOT NULL")
        if sends is not None
        else None
    )
    tasks = [(s.key, t) for s in sources for t in s.plan.tasks]
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    assignment, partitions = buckets(spark, tasks, parallelism)
    # The buckets land on distinct shuffle partitions (see `buckets`); Spark's adaptive
    # execution must not fold them back into fewer tasks.
    spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    judged = _judge(spark, tasks, acked, config, assignment, dests)
    label = f"reading and judging {len(tasks)} replica(s) of {len(sources)} run(s)"
    with SparkProgress(spark, label):
        rows = _collect(judged)
    where = task_placement(spark, {(r["stage"], r["task"]) for r in rows})
    placement: dict[tuple[str, str, int], str] = {}
    for row in sorted(rows, key=lambda r: (r["run"], r["topic"], r["partition"])):
        outputs[row["run"]].rows.append(_partition_row(row))
        placement[(row["run"], row["topic"], row["partition"])] = where[(row["stage"], row["task"])]
    timings["scan+judge"] = time.monotonic() - mark

    if sends is not None:
        mark = time.monotonic()
        with SparkProgress(spark, "summarising producer histories"):
            _count_sends(sends, outputs)
        timings["producer"] = time.monotonic() - mark
    runs = [assemble(s, outputs[s.key]) for s in sources]
    if dests:
        mark = time.monotonic()
        with SparkProgress(spark, "writing tables"):
            tables_out.write_tables(spark, runs, sends, dests)
        timings["tables"] = time.monotonic() - mark
    return SparkRun(runs, timings, spark.sparkContext.master, placement)


# --------------------------------------------------------------------------------------
# Tasks


def _collect(frame: Any) -> list[dict[str, Any]]:
    """Collect through Arrow: far cheaper than pickled Rows for nested columns."""
    return frame.toArrow().to_pylist()


def _pre_stage(
    spark: Any, wanted: list[tuple[Any, ...]], schemas: tuple[Any, Any], fn: Any, label: str
) -> list[dict[str, Any]]:
    """A small Spark stage run before the judging: `wanted` rows (of `schemas[0]`) through
    the mapInArrow function `fn` (to `schemas[1]`), collected."""
    from pyspark.sql.pandas.types import from_arrow_schema

    slices = max(1, min(len(wanted), spark.sparkContext.defaultParallelism * 3))
    rdd = spark.sparkContext.parallelize(wanted, slices)
    frame = spark.createDataFrame(rdd, from_arrow_schema(schemas[0]))
    with SparkProgress(spark, label):
        return _collect(frame.mapInArrow(fn, from_arrow_schema(schemas[1])))


def _metadata(spark: Any, sources: Sequence[RunSource], outputs: dict[str, EngineOutput]) -> None:
    """KRaft metadata logs, decoded by Spark tasks before the judging (which needs the
    leaders they name)."""
    wanted = [(s.key, t.log_dir, t.path) for s in sources for t in s.plan.metadata_tasks()]
    if not wanted:
        return
    schemas = (T.METADATA_TASK_SCHEMA, T.METADATA_SCHEMA)
    label = f"decoding {len(wanted)} metadata log(s)"
    for row in _pre_stage(spark, wanted, schemas, decode_metadata, label):
        outputs[row["run"]].metadata_logs[row["log_dir"]] = R.metadata_log_from_json(
            row["metadata_log"]
        )


def _coordinators(spark: Any, sources: Sequence[RunSource]) -> dict[str, Decisions]:
    """What the transaction coordinators completed, read by Spark tasks from their own
    partitions before the judging (which compares each partition's markers with it)."""
    wanted = [
        (s.key, json.dumps([task_json(t) for t in tasks]))
        for s in sources
        for tasks in s.plan.coordinator_tasks()
    ]
    if not wanted:
        return {}
    schemas = (T.COORDINATOR_TASK_SCHEMA, T.COORDINATOR_SCHEMA)
    label = f"reading {len(wanted)} transaction coordinator partition(s)"
    parts: dict[str, list[Decisions]] = {}
    for row in _pre_stage(spark, wanted, schemas, decode_coordinators, label):
        parts.setdefault(row["run"], []).append(decisions_from_json(row["decisions_json"]))
    return {run: merge(found) for run, found in parts.items()}


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
            .filter("topic IS NOT NULL")  # the schema header line has no topic
            .withColumn("run", F.lit(source.key))
        )
        frames.append(frame)
    if not frames:
        return None
    return functools.reduce(lambda a, b: a.unionByName(b), frames)


def _count_sends(sends: Any, outputs: dict[str, EngineOutput]) -> None:
    """The counts `reports.pipeline.summarise_sends` takes: one aggregation, collected small."""
    from pyspark.sql import functions as F

    second = F.floor(F.coalesce(F.col("acked"), F.col("sent"))).cast("long")
    ok = F.col("error").isNull() & F.col("offset").isNotNull()
    grouped = sends.groupBy("run", "acks", second.alias("second"), ok.alias("ok"), "error").agg(
        F.count(F.lit(1)).alias("n")
    )
    counts: dict[str, dict[Any, int]] = defaultdict(dict)
    for row in _collect(grouped):
        key = (str(row["acks"]), row["second"], bool(row["ok"]), row["error"])
        counts[row["run"]][key] = row["n"]
    for run, found in counts.items():
        outputs[run].send_counts = found


# --------------------------------------------------------------------------------------
# Buckets: which partitions are judged together


def buckets(
    spark: Any, tasks: Sequence[tuple[str, ReadTask]], cores: int
) -> tuple[dict[tuple[str, str, int], int], int]:
    """(run, topic, partition) -> bucket, and the number of shuffle partitions to judge in.

    Partitions are packed into buckets by size (largest first into the lightest bucket of
    their run); bucket numbers are chosen so that Spark's hash partitioning of the group key
    (run, bucket) sends the buckets to distinct shuffle partitions in turn, so that no core
    gets two buckets while another gets none."""
    sizes: dict[tuple[str, str, int], int] = defaultdict(int)
    for run, t in tasks:
        sizes[(run, t.topic, t.partition)] += t.size + 1
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
        lightest = [(0, i) for i in range(len(mine))]  # a heap of (load, bucket index)
        for key, size in sorted(per_run[run], key=lambda kv: (-kv[1], kv[0])):
            load, i = lightest[0]
            heapq.heapreplace(lightest, (load + size, i))
            out[key] = mine[i]
    return out, partitions


def _bucket_ids(
    spark: Any, wanted: Sequence[tuple[str, int]], partitions: int
) -> dict[str, list[int]]:
    """For each (run, shuffle partition) wanted, a bucket number that Spark's shuffle sends
    there: its hash partitioning sends the group key (run, bucket) to
    `pmod(hash(run, bucket), partitions)`, `hash` being catalyst's Murmur3 over the columns
    in turn, each seeded with the hash so far (42 first). The JVM's own function is called
    through py4j: a Spark job to evaluate it cost the driver about two seconds."""
    jvm = spark.sparkContext._jvm
    murmur = jvm.org.apache.spark.sql.catalyst.expressions.Murmur3HashFunction
    types = jvm.org.apache.spark.sql.types.DataTypes
    utf8 = jvm.org.apache.spark.unsafe.types.UTF8String
    out: dict[str, list[int]] = {}
    for run in sorted({run for run, _ in wanted}):
        targets = [target for r, target in wanted if r == run]
        need = Counter(targets)
        seed = murmur.hash(utf8.fromString(run), types.StringType, 42)
        found: dict[int, list[int]] = defaultdict(list)
        missing = len(targets)
        bucket = 0
        while missing and bucket < max(64, partitions * 64):
            hashed = murmur.hash(bucket, types.IntegerType, seed)
            target = (hashed + 2**31) % 2**32 - 2**31  # the Int the expression yields
            target %= partitions  # pmod: Python's % is never negative here
            if len(found[target]) < need[target]:
                found[target].append(bucket)
                missing -= 1
            bucket += 1
        taken: list[int] = []
        for target in targets:
            pick = found[target].pop(0) if found[target] else None
            if pick is None:  # no number landed there: any unused one will do
                pick = next(b for b in range(bucket, bucket + len(targets) + 1) if b not in taken)
            taken.append(pick)
        out[run] = taken
    return out


# --------------------------------------------------------------------------------------
# Judging


def _judge(
    spark: Any,
    tasks: Sequence[tuple[str, ReadTask]],
    acked: Any,
    config: Any,
    assignment: dict[tuple[str, str, int], int],
    dests: dict[str, Location],
) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    keys = ["run", "topic", "partition"]
    tables = {run: str(dest) for run, dest in dests.items()}
    rows = pa.table(
        {
            "run": pa.array([run for run, _ in tasks], pa.string()),
            "bucket": pa.array(
                [assignment[(run, t.topic, t.partition)] for run, t in tasks], pa.int32()
            ),
            "topic": pa.array([t.topic for _, t in tasks], pa.string()),
            "partition": pa.array([t.partition for _, t in tasks], pa.int32()),
            "task_json": pa.array([task_json(t) for _, t in tasks], pa.string()),
            "tables": pa.array([tables.get(run) for run, _ in tasks], pa.string()),
        },
        schema=T.TASK_SCHEMA,
    )
    left = spark.createDataFrame(rows, from_arrow_schema(T.TASK_SCHEMA)).groupBy("run", "bucket")
    if acked is None:
        # From an empty Arrow table, not an empty Python list: that would be a Python RDD,
        # whose job starts Python workers before the judging needs them.
        empty = pa.schema([*T.PRODUCER_FIELDS, ("run", pa.string())]).empty_table()
        acked = spark.createDataFrame(empty, from_arrow_schema(empty.schema))
    ordered = sorted(assignment.items())
    table = pa.table(
        {
            "run": pa.array([k[0] for k, _ in ordered], pa.string()),
            "topic": pa.array([k[1] for k, _ in ordered], pa.string()),
            "partition": pa.array([k[2] for k, _ in ordered], pa.int32()),
            "bucket": pa.array([b for _, b in ordered], pa.int32()),
        }
    )
    bucket_frame = F.broadcast(spark.createDataFrame(table, from_arrow_schema(table.schema)))
    # Sends to partitions no replica holds go to bucket -1, judged as "absent".
    right = (
        acked.join(bucket_frame, keys, "left")
        .withColumn("bucket", F.coalesce(F.col("bucket"), F.lit(-1)))
        .select("run", "bucket", *SEND_COLUMNS)
        .groupBy("run", "bucket")
    )
    return left.cogroup(right).applyInPandas(
        functools.partial(judge_bucket, config), from_arrow_schema(T.VERDICT_SCHEMA)
    )


def _partition_row(row: dict[str, Any]) -> PartitionRow:
    report, replicas, verdict = pickle.loads(row["judged_pickle"])
    return PartitionRow(
        run=row["run"],
        topic=row["topic"],
        partition=row["partition"],
        status=row["status"],
        replicas=[R.summary_from_value(v) for v in replicas],
        verdict=verdict,
        report=report,
    )
