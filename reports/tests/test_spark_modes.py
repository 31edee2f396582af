"""The pipeline gives the same answer, tables included, on one core and on two."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from benchmarks.fleet_data import write_fleet
from reports.pipeline import run_pipeline
from reports.results import PipelineResult
from reports.sources import audit_source, run_source
from reports.spark import get_session, stop_session
from reports.view import run_view
from testsupport import runs as crafted


def inputs(root: Path) -> list[Any]:
    run = crafted.kip279_s1_equal(root / "kip-279-s1-equal-1.1.1-zk-1")
    dirs = write_fleet(root / "many", partitions=60, batches=12, planted=(3, 41)).dirs
    return [run_source(run, "kip"), audit_source(dirs, key="many")]


def snapshot(result: PipelineResult, tables: dict[str, Path]) -> dict[str, Any]:
    """Everything the pipeline produced, minus timings and where it ran."""
    out: dict[str, Any] = {}
    for run in result.runs:
        view = run_view(run)
        for volatile in ("engine", "timings", "tables_dir"):
            view.pop(volatile)
        out[run.key] = {
            "partitions": [dataclasses.asdict(p) for p in run.partitions],
            "audit": run.audit.to_dict(),
            "view": view,
            "producer": run.producer,
            "acks": run.acks_per_second,
        }
    for key, path in tables.items():
        for table in sorted(path.iterdir()):
            rows = pq.read_table(table).to_pylist()
            out[f"{key}/{table.name}"] = sorted(rows, key=repr)
    return out


def run_on(master: str, sources: list[Any], tables: Path) -> tuple[int, dict[str, Any]]:
    stop_session()
    cores = get_session(master).sparkContext.defaultParallelism
    result = run_pipeline(sources, master=master, tables_dir=tables / "many")
    dests = {"kip": sources[0].path / "tables", "many": tables / "many"}
    return cores, snapshot(result, dests)


def test_local1_and_local2_give_identical_results(tmp_path: Path) -> None:
    sources = inputs(tmp_path)
    try:
        cores1, one = run_on("local[1]", sources, tmp_path / "t1")
        cores2, two = run_on("local[2]", sources, tmp_path / "t2")
    finally:
        stop_session()
    assert (cores1, cores2) == (1, 2)
    assert one.keys() == two.keys()
    for key in one:
        assert one[key] == two[key], key
    many = one["many"]["partitions"]
    assert len(many) == 60
    assert [(p["topic"], p["partition"]) for p in many if p["status"] == "diverged"] == [
        ("topic001", 0),
        ("topic013", 2),
    ]


def test_bucket_numbers_land_on_the_shuffle_partitions_wanted() -> None:
    """`_bucket_ids` asks the JVM's Murmur3 through py4j; Spark's own `hash` expression,
    evaluated in a job, must send each chosen (run, bucket) to its wanted partition."""
    from pyspark.sql import functions as F

    from reports.engine_spark import _bucket_ids

    partitions = 5
    wanted = [(run, target % partitions) for run in ("a", "run-b") for target in range(8)]
    try:
        spark = get_session("local[1]")
        ids = _bucket_ids(spark, wanted, partitions)
        rows = [(run, bucket) for run in ids for bucket in ids[run]]
        frame = spark.createDataFrame(rows, "run string, bucket int").select(
            "run", "bucket", F.pmod(F.hash("run", "bucket"), F.lit(partitions)).alias("target")
        )
        landed = {(r["run"], r["bucket"]): r["target"] for r in frame.collect()}
    finally:
        stop_session()
    for run in ids:
        assert len(set(ids[run])) == len(ids[run]), "a bucket number used twice"
        targets = [target for r, target in wanted if r == run]
        assert [landed[(run, b)] for b in ids[run]] == targets
