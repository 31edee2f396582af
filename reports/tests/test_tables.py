"""Rows and objects: a replica becomes rows field for field, and so do
metadata logs and read errors. No Spark here."""

from __future__ import annotations

import json
from pathlib import Path

from checkers.audit.result import ReplicaSummary
from checkers.errors import CrcMismatch
from checkers.lineage import read_log_dir
from checkers.metadata_log import decode_metadata_log
from reports import rows as R
from reports import tables as T
from testsupport import craft, damage
from testsupport.craft import PartitionSpec

LOG = [(0, 9, 1), (10, 19, 1), (20, 29, 2), (30, 39, 2), (40, 49, 3)]


def crafted_log_dir(tmp_path: Path) -> Path:
    v1 = [(0, 0, -1, "", "none", 1), (1, 4, -1, "", "gzip", 1)]
    root = craft.write_log_dir(
        tmp_path / "b1",
        1,
        {
            ("t", 0): PartitionSpec(LOG, high_watermark=40, roll_at=[20], recovery_point=30),
            ("t", 1): PartitionSpec(LOG[2:], log_start_offset=25, leader_epochs=[]),
            ("legacy", 0): PartitionSpec(v1, high_watermark=5, leader_epochs=[]),
            ("torn", 0): PartitionSpec(LOG, leader_epochs=[(1, 0), (2, 25), (3, 40)]),
            ("empty", 0): PartitionSpec([]),
        },
    )
    segment = root / "torn-0" / craft.segment_name(0)
    damage.flip_byte(segment, damage.batch_positions(segment.read_bytes())[1] + 40)
    damage.cut_file(segment, 7)
    (root / "t-0" / "00000000000000000000.log.deleted").write_bytes(b"x")
    return root


def test_replicas_become_rows_field_for_field(tmp_path: Path) -> None:
    log_dir = read_log_dir(crafted_log_dir(tmp_path))
    originals = [log_dir.lineages[tp] for tp in sorted(log_dir.lineages)]
    assert any(lin.errors for lin in originals) and any(lin.torn_tail for lin in originals)
    for i, lin in enumerate(originals):
        summary = ReplicaSummary.of(lin, log_dir=0, child=i, judged=True, metadata=False)
        rebuilt = R.summary_from_value(json.loads(json.dumps(R.summary_value(summary))))
        assert rebuilt == summary
        assert [type(e) for e in rebuilt.errors] == [type(e) for e in lin.errors]
    flat = R.batch_rows_table(
        [("r", 1, lin.topic, lin.partition, True) for lin in originals],
        [lin.batches for lin in originals],
    )
    assert flat.schema == T.BATCHES_SCHEMA
    assert flat.num_rows == sum(len(lin.batches) for lin in originals)
    rows = flat.to_pylist()
    expected = [b.to_row() for lin in originals for b in lin.batches]
    assert [{k: row[k] for k in want} for row, want in zip(rows, expected, strict=True)] == expected
    assert [row["seq"] for row in rows[: len(originals[0].batches)]] == list(
        range(len(originals[0].batches))
    )


def test_read_errors_keep_their_class_and_text() -> None:
    error = CrcMismatch("/x/0.log", 61, "CRC-32C", 1, 2)
    rebuilt = R.error_from_value(R.error_value(error))
    assert isinstance(rebuilt, CrcMismatch) and rebuilt == error and str(rebuilt) == str(error)
    unknown = R.error_from_value(
        {"kind": "from-the-future", "path": "p", "offset": None, "reason": "r"}
    )
    assert unknown.to_dict() == {
        "kind": "from-the-future",
        "path": "p",
        "offset": None,
        "reason": "r",
    }


def test_metadata_log_survives_json(tmp_path: Path) -> None:
    t = craft.kafka_uuid("t")
    meta = craft.MetadataLogBuilder()
    meta.leader_change(1, 3000, [3000])
    meta.records(
        1,
        craft.encode_feature_level_record("eligible.leader.replicas.version", 1),
        craft.encode_topic_record("t", t),
        craft.encode_partition_record(t, 0, replicas=[1, 2], isr=[1, 2], leader=1, leader_epoch=3),
    )
    meta.records(
        1, craft.encode_partition_change_record(t, 0, eligible_leader_replicas=[1], version=2)
    )
    meta.records(
        1, craft.encode_partition_change_record(t, 0, leader=2, isr=[2], leader_recovery_state=1)
    )
    pdir = tmp_path / "__cluster_metadata-0"
    meta.write(pdir)
    damage.cut_file(pdir / craft.segment_name(0), 3)
    log = decode_metadata_log(pdir)
    assert log.events[-1].elr == (1,) and log.features and log.torn_tail is not None
    assert R.metadata_log_from_json(R.metadata_log_json(log)) == log


def test_a_read_task_crosses_to_the_executors_whole(tmp_path: Path) -> None:
    """The driver ships each read task as a JSON array of its fields; every field, None and
    booleans included, comes back as it went, for every task a plan makes."""
    from checkers.audit.plan import plan_audit
    from reports.scan import task_from_json, task_json

    plan = plan_audit([crafted_log_dir(tmp_path)])
    assert plan.tasks
    for task in plan.tasks:
        assert task_from_json(task_json(task)) == task
    assert any(t.high_watermark is None for t in plan.tasks)
    assert any(t.high_watermark is not None for t in plan.tasks)
