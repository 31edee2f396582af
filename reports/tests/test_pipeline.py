"""The report pipeline on crafted run directories and log dirs: verdicts, loss, tables, and
audits that answer the same on both engines and as `checkers.audit`."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from basics.protocol import Protocol
from checkers.audit import audit
from checkers.audit.render import render
from checkers.tests import test_compaction as compacted
from reports.pipeline import run_pipeline
from reports.results import PipelineResult
from reports.sources import audit_source, release_protocol, run_source
from reports.tables_out import read_table
from reports.tests.conftest import HOSTILE_RUN, KIP_RUN, MASTER, NOT_REACHED_RUN, SMOKE_RUN
from testsupport import craft, damage
from testsupport.craft import PartitionSpec

LOG = [(0, 9, 1), (10, 19, 1), (20, 29, 2), (30, 39, 2), (40, 49, 3)]
compacted_logs = (compacted.cleaned(), compacted.raw())
TABLES = {
    "batches",
    "epochs",
    "errors",
    "lineage",
    "producer",
    "runs",
    "states",
    "timeline",
    "verdicts",
}


def test_kip279_run_diverges_at_11_and_the_model_says_why(
    pipeline_result: PipelineResult,
) -> None:
    run = pipeline_result.run(KIP_RUN)
    assert run.source.protocol is Protocol.KIP_101  # release 1.1.1
    (t0,) = run.partitions
    v = t0.verdict
    assert (t0.topic, t0.partition, t0.status, v.diverged_at) == ("t", 0, "diverged", 11)
    assert v.below_high_watermark and v.high_watermark == 31 and v.leader == 1
    versions = {(v["span"], v["leader_epoch"], tuple(v["replicas"])) for v in t0.report["versions"]}
    assert versions == {("[11, 20]", 1, (1,)), ("[11, 20]", 2, (2,))}
    (replay,) = t0.report["replays"]
    assert replay["lines"][0] == (
        "follower asked for epoch 2; leader answered offset 21 (KIP-101 rules); "
        "follower kept [11, 20]"
    )
    assert replay["outcome"] == "diverged" and replay["diverged_at"] == 11
    diagram = t0.report["diagram"]
    assert diagram["diverged"] == [11, 20] and diagram["high_watermark"] == 31
    marks = {r["broker"]: [s[3] for s in r["segments"]] for r in diagram["rows"]}
    assert marks == {1: ["same"] * 3, 2: ["same", "differs", "same"]}
    loss = t0.report["loss"]
    assert (loss["acked"], loss["present"], loss["lost_count"]) == (41, 31, 10)
    assert [w["offset"] for w in loss["lost"]] == list(range(11, 21))
    assert all(w["held_by"] == [2] for w in loss["lost"])
    assert run.producer is not None and run.producer["failed"] == 3
    assert [s.leader for s in run.states] == [1, 1, 2, -1, 1, 1]


def test_runs_without_partitions_or_files_still_go_through(
    pipeline_result: PipelineResult, runs_dir: Path
) -> None:
    not_reached = pipeline_result.run(NOT_REACHED_RUN)
    assert not_reached.partitions == [] and not_reached.producer is None
    smoke = pipeline_result.run(SMOKE_RUN)
    assert [p.status for p in smoke.partitions] == ["consistent"]
    assert smoke.states == [] and smoke.source.artifacts.conformance is None
    hostile = pipeline_result.run(HOSTILE_RUN)
    assert hostile.source.protocol is Protocol.KIP_279  # release 2.0.1
    absent = [p for p in hostile.partitions if p.status == "absent"]
    assert [p.topic for p in absent] == ["<script>alert(1)</script>"]
    assert absent[0].lost == 1


def test_tables_are_written_beside_each_run(pipeline_result: PipelineResult) -> None:
    run = pipeline_result.run(KIP_RUN)
    assert run.tables_dir == run.source.path / "tables"
    assert {p.name.removesuffix(".parquet") for p in run.tables_dir.iterdir()} == TABLES
    batches = read_table(run.tables_dir, "batches").to_pylist()
    assert sorted((b["broker"], b["base_offset"], b["leader_epoch"]) for b in batches) == [
        (1, 0, 1),
        (1, 11, 1),
        (1, 21, 3),
        (2, 0, 1),
        (2, 11, 2),
        (2, 21, 3),
    ]
    assert {b["run"] for b in batches} == {KIP_RUN}
    verdicts = read_table(run.tables_dir, "verdicts").to_pylist()
    assert [(v["topic"], v["diverged_at"]) for v in verdicts] == [("t", 11)]
    assert json.loads(verdicts[0]["verdict_json"])["diverged_at"] == 11
    assert read_table(run.tables_dir, "producer").num_rows == 44
    assert read_table(run.tables_dir, "timeline").num_rows == 16
    epochs = read_table(run.tables_dir, "epochs").to_pylist()
    assert {(e["broker"], e["source"], e["epoch"], e["start_offset"]) for e in epochs} >= {
        (2, "checkpoint", 2, 11),
        (1, "batches", 3, 21),
    }
    # An empty table still has its schema.
    empty = pipeline_result.run(NOT_REACHED_RUN).tables_dir
    assert pq.read_table(empty / "batches.parquet").num_rows == 0
    assert (
        "base_offset" in pq.read_schema(next((empty / "batches.parquet").glob("*.parquet"))).names
    )


def test_protocol_follows_the_release() -> None:
    assert release_protocol("0.10.2.2") is Protocol.HIGH_WATERMARK
    assert release_protocol("1.1.1") is Protocol.KIP_101
    assert release_protocol("2.6.3") is Protocol.KIP_279
    assert release_protocol("3.9.2") is Protocol.DIVERGING_EPOCH
    assert release_protocol(None) is Protocol.KIP_279
    assert release_protocol("/opt/kafka") is Protocol.KIP_279


def brokers(root: Path, specs: dict, kraft: bool = False) -> list[Path]:
    return [
        craft.write_log_dir(root / f"broker-{b}", b, parts, kraft=kraft)
        for b, parts in specs.items()
    ]


def kraft_run(root: Path) -> Path:
    t = craft.kafka_uuid("t")
    run = craft.write_run_dir(
        root,
        {
            "broker1": {
                "broker_id": 1,
                "kraft": True,
                "partitions": {("t", 0): PartitionSpec(LOG, high_watermark=50)},
            },
            "broker2": {
                "broker_id": 2,
                "kraft": True,
                "partitions": {("t", 0): PartitionSpec([*LOG[:4], (40, 44, 5)])},
            },
            "controller": {"broker_id": 3000, "kraft": True, "partitions": {}},
        },
    )
    meta = craft.MetadataLogBuilder()
    meta.leader_change(1, 3000, [3000])
    meta.records(
        1,
        craft.encode_topic_record("t", t),
        craft.encode_partition_record(t, 0, replicas=[1, 2], isr=[1, 2], leader=1, leader_epoch=3),
    )
    meta.records(
        1, craft.encode_partition_change_record(t, 0, leader=1, isr=[1], leader_recovery_state=1)
    )
    mdir = run / "nodes" / "controller" / "data" / "__cluster_metadata-0"
    meta.write(mdir)
    craft.write_quorum_state(mdir, 3000, 1, voters=[3000])
    return run


def test_both_engines_answer_as_checkers_audit(tmp_path: Path) -> None:
    cases: dict[str, tuple[list[Path], dict]] = {}
    parts = {("t", p): PartitionSpec(LOG, high_watermark=50) for p in range(6)}
    other = dict(parts)
    other[("t", 4)] = PartitionSpec([*LOG[:3], (30, 34, 4)], high_watermark=30)
    cases["many"] = (brokers(tmp_path / "many", {1: parts, 2: other, 3: parts}), {})
    cases["topic"] = (cases["many"][0], {"topic": "t"})
    bad = brokers(
        tmp_path / "bad", {1: {("t", 0): LOG, ("u", 0): LOG}, 2: {("t", 0): LOG, ("u", 0): LOG}}
    )
    seg = bad[1] / "u-0" / craft.segment_name(0)
    damage.flip_byte(seg, damage.batch_positions(seg.read_bytes())[1] + 40)
    damage.cut_file(bad[0] / "t-0" / craft.segment_name(0), 5)
    (bad[0] / "t-0" / "00000000000000000000.log.swap").write_bytes(b"x")
    cases["bad"] = ([*bad, tmp_path / "missing"], {})
    twice = craft.write_log_dir(tmp_path / "twice-a", 1, {("t", 0): LOG})
    twice_b = craft.write_log_dir(tmp_path / "twice-b", 1, {("t", 0): LOG[:2]})
    cases["twice"] = ([twice, twice_b, twice], {})
    cases["kraft"] = ([kraft_run(tmp_path / "kraft")], {})
    v1 = [
        (b, e, -1, tag, codec, 1)
        for b, e, tag, codec in [(0, 0, "", "none"), (1, 4, "", "gzip"), (5, 9, "", "snappy")]
    ]
    legacy = brokers(
        tmp_path / "legacy",
        {
            1: {("t", 0): PartitionSpec(v1, high_watermark=10, leader_epochs=[])},
            2: {
                ("t", 0): PartitionSpec(
                    [*v1[:2], (5, 9, -1, "lost", "snappy", 1)], high_watermark=5, leader_epochs=[]
                )
            },
        },
    )
    cases["legacy"] = (legacy, {"protocol": Protocol.HIGH_WATERMARK})
    no_meta = craft.write_log_dir(tmp_path / "no-meta", 4, {("t", 0): LOG})
    (no_meta / "meta.properties").unlink()
    cases["no-meta"] = ([*bad[:1], no_meta], {})
    cases["compacted"] = (compacted.brokers(tmp_path / "compacted", *compacted_logs), {})

    sources = [audit_source(dirs, key=key, **kw) for key, (dirs, kw) in cases.items()]
    spark = run_pipeline(sources, master=MASTER, write_tables=False)
    local = run_pipeline(sources, engine="local")
    for key, (dirs, kw) in cases.items():
        expected = audit(dirs, **kw)
        for engine in (spark, local):
            got = engine.run(key).audit
            assert got.to_dict() == expected.to_dict(), (engine.engine, key)
            assert render(got) == render(expected), (engine.engine, key)
            assert got.exit_code == expected.exit_code, (engine.engine, key)
        assert [p.report for p in spark.run(key).partitions] == [
            p.report for p in local.run(key).partitions
        ], key
    assert spark.run("many").audit.exit_code == 1
    assert spark.run("bad").audit.exit_code == 2


def test_audit_tables_go_where_asked(tmp_path: Path) -> None:
    dirs = brokers(tmp_path, {1: {("t", 0): LOG}, 2: {("t", 0): [*LOG[:3], (30, 31, 9)]}})
    out = tmp_path / "tables"
    result = run_pipeline([audit_source(dirs)], master=MASTER, tables_dir=out)
    assert result.runs[0].tables_dir == out
    assert read_table(out, "verdicts").to_pylist()[0]["diverged_at"] == 30
    assert read_table(out, "batches").num_rows == 9
    assert not any(p.name == "tables" for d in dirs for p in d.iterdir())  # inputs untouched


def test_run_dir_given_to_an_audit_brings_its_timeline(runs_dir: Path) -> None:
    source = audit_source([runs_dir / KIP_RUN], protocol=Protocol.KIP_101)
    assert source.path == runs_dir / KIP_RUN and source.artifacts.timeline
    source = run_source(runs_dir / SMOKE_RUN, "s")
    assert source.release == "3.9.2" and source.protocol is Protocol.DIVERGING_EPOCH
