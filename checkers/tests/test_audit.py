"""``logfork audit`` on crafted log dirs: every kind of consistency and divergence, with exit
codes, JSON, run directories, KRaft metadata and bad input."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from basics.protocol import Protocol
from checkers.audit import audit
from checkers.audit.render import render
from checkers.checkpoints import CLEAN_SHUTDOWN
from suites.cli import main as logfork
from testsupport import craft, damage
from testsupport.craft import PartitionSpec

ROOT = Path(__file__).resolve().parents[2]
LOG = [(0, 9, 1), (10, 19, 1), (20, 29, 2), (30, 39, 2), (40, 49, 3)]


def brokers(
    tmp_path: Path,
    specs: dict[int, dict[tuple[str, int], PartitionSpec | list]],
    kraft: bool = False,
) -> list[Path]:
    return [
        craft.write_log_dir(tmp_path / f"broker-{b}", b, parts, kraft=kraft)
        for b, parts in specs.items()
    ]


def run_cli(*args: str | Path) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "suites.cli", "audit", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    return proc.returncode, proc.stdout + proc.stderr


def entry(result_json: dict, topic: str, partition: int = 0) -> dict:
    return next(
        p for p in result_json["partitions"] if (p["topic"], p["partition"]) == (topic, partition)
    )


# --------------------------------------------------------------------------------------
# Consistent cases: exit 0


def test_lagging_replica_is_consistent(tmp_path: Path) -> None:
    dirs = brokers(
        tmp_path,
        {
            1: {("t", 0): PartitionSpec(LOG, high_watermark=40)},
            2: {("t", 0): PartitionSpec(LOG, high_watermark=40)},
            3: {("t", 0): PartitionSpec(LOG[:3], high_watermark=20)},
        },
    )
    result = audit(dirs)
    assert result.exit_code == 0
    (verdict,) = result.to_dict()["partitions"]
    assert verdict["status"] == "consistent" and verdict["replicas"] == [1, 2, 3]
    assert verdict["diverged_at"] is None and verdict["below_high_watermark"] is False
    assert verdict["log_end_offsets"] == {"1": 50, "2": 50, "3": 30}


def test_different_segment_rolls_are_consistent(tmp_path: Path) -> None:
    dirs = brokers(
        tmp_path,
        {
            1: {("t", 0): PartitionSpec(LOG, roll_at=[20])},
            2: {("t", 0): PartitionSpec(LOG, roll_at=[10, 30, 40])},
            3: {("t", 0): PartitionSpec(LOG)},
        },
    )
    assert len(list((dirs[1] / "t-0").glob("*.log"))) == 4
    assert audit(dirs).exit_code == 0


def test_trimmed_log_starts_are_consistent(tmp_path: Path) -> None:
    dirs = brokers(
        tmp_path,
        {
            1: {("t", 0): PartitionSpec(LOG)},
            2: {
                ("t", 0): PartitionSpec(
                    LOG[2:], log_start_offset=25, leader_epochs=[(2, 25), (3, 40)]
                )
            },
            3: {("t", 0): PartitionSpec(LOG[4:])},
        },
    )
    result = audit(dirs)
    assert result.exit_code == 0
    verdict = result.partitions[0]
    assert verdict.log_start_offsets == {1: 0, 2: 25, 3: 40}
    assert not verdict.notes  # the moved-up first epoch entry is not a disagreement


# --------------------------------------------------------------------------------------
# Divergent cases: exit 1


def test_divergence_at_offset_zero(tmp_path: Path) -> None:
    dirs = brokers(
        tmp_path,
        {
            # No high watermark checkpoint on broker 1: nothing says its tail is uncommitted.
            1: {("t", 0): PartitionSpec([(0, 0, 0), (1, 1, 2)])},
            2: {("t", 0): PartitionSpec([(0, 0, 1), (1, 1, 3)], high_watermark=2)},
        },
    )
    result = audit(dirs)
    assert result.exit_code == 1
    data = result.to_dict()
    verdict = entry(data, "t")
    assert verdict["status"] == "diverged" and verdict["diverged_at"] == 0
    assert verdict["below_high_watermark"] is True
    assert sorted(v["replicas"] for v in verdict["versions"]) == [[1], [2]]
    assert verdict["leader"] == 2
    (prediction,) = verdict["predictions"]
    assert prediction["follower"] == 1 and prediction["truncation_offset"] == 0
    assert len(prediction["rounds"]) == 2  # KIP-279 scenario 3
    assert data["summary"] == {"partitions": 1, "consistent": 0, "diverged": 1, "errors": 0}


@pytest.mark.parametrize(
    ("own_hw", "clean", "status"),
    [(3, True, "consistent"), (3, False, "diverged"), (4, True, "diverged")],
)
def test_an_uncommitted_tail_awaiting_truncation(
    tmp_path: Path, own_hw: int, clean: bool, status: str
) -> None:
    # A leader stopped (controlled shutdown) with a write its followers had not fetched:
    # broker 1's [3, 3] in epoch 0 sits at its own high watermark, and the new leader wrote
    # its own [3, 3] in epoch 1. Broker 1's next fetch truncates it. Had broker 1 counted
    # [3, 3] committed (high watermark 4), committed data would differ. Without the
    # clean-shutdown marker (a SIGKILL, a power cut) broker 1's checkpoint may lag its real
    # high watermark, so the tail may hold acknowledged data: diverged, with the note.
    theirs = [(0, 2, 0), (3, 3, 1)]
    dirs = brokers(
        tmp_path,
        {
            1: {("t", 0): PartitionSpec([(0, 2, 0), (3, 3, 0)], high_watermark=own_hw)},
            2: {("t", 0): PartitionSpec(theirs, high_watermark=4)},
            3: {("t", 0): PartitionSpec(theirs, high_watermark=4)},
        },
    )
    if clean:
        (dirs[0] / CLEAN_SHUTDOWN).write_text('{"version":0,"brokerEpoch":12}')
    result = audit(dirs)
    verdict = entry(result.to_dict(), "t")
    assert verdict["status"] == status
    assert verdict["diverged_at"] == (None if status == "consistent" else 3)
    pending = "broker 1 differs from the leader (broker 2) from offset 3"
    assert any(pending in n for n in verdict["notes"]) == (own_hw == 3)
    if own_hw == 3:
        assert verdict["pending_truncation"] == {
            "replicas": [1],
            "start": 3,
            "end": 4,
            "checkpoint_trusted": clean,
        }
        said = "holds no clean-shutdown marker" if not clean else "proves a clean shutdown"
        assert any(said in n for n in verdict["notes"])
    else:
        assert verdict["pending_truncation"] is None
    if status == "consistent":
        assert "t-0: consistent once truncated: broker(s) 1 hold a tail [3, 4)" in render(result)


def test_divergence_in_one_partition_of_many(tmp_path: Path) -> None:
    parts = {("t", p): PartitionSpec(LOG, high_watermark=50) for p in range(6)}
    parts[("u", 0)] = PartitionSpec(LOG[:2])
    other = dict(parts)
    other[("t", 4)] = PartitionSpec([*LOG[:3], (30, 34, 4)], high_watermark=30)
    dirs = brokers(tmp_path, {1: parts, 2: other, 3: parts})
    result = audit(dirs)
    assert result.exit_code == 1
    statuses = {(v.topic, v.partition): v.status for v in result.partitions}
    assert statuses.pop(("t", 4)) == "diverged"
    assert set(statuses.values()) == {"consistent"} and len(statuses) == 6
    t4 = entry(result.to_dict(), "t", 4)
    assert t4["diverged_at"] == 30 and t4["below_high_watermark"] is True
    assert {tuple(v["replicas"]) for v in t4["versions"]} == {(1, 3), (2,)}
    # --topic narrows the audit
    assert audit(dirs, topic="u").exit_code == 0


def test_kip279_scenario1_on_disk(tmp_path: Path) -> None:
    dirs = brokers(
        tmp_path,
        {
            1: {("t", 0): PartitionSpec([(0, 10, 1), (11, 20, 1), (21, 30, 3)], high_watermark=11)},
            2: {("t", 0): PartitionSpec([(0, 10, 1), (11, 20, 2), (21, 30, 3)], high_watermark=31)},
        },
    )
    result = audit(dirs)
    assert result.exit_code == 1
    verdict = result.partitions[0]
    assert verdict.diverged_at == 11 and verdict.below_high_watermark  # broker 2 saw it committed
    assert "DIVERGED at offset 11" in render(result)


# --------------------------------------------------------------------------------------
# Run directories and KRaft


def kraft_run(tmp_path: Path, leader: int) -> Path:
    t = craft.kafka_uuid("t")
    run = craft.write_run_dir(
        tmp_path / "run",
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
        1,
        craft.encode_partition_change_record(
            t, 0, leader=leader, isr=[leader], leader_recovery_state=1
        ),
    )
    mdir = run / "nodes" / "controller" / "data" / "__cluster_metadata-0"
    meta.write(mdir)
    craft.write_quorum_state(mdir, 3000, 1, voters=[3000])
    return run


def test_kraft_run_directory_uses_the_metadata_leader(tmp_path: Path) -> None:
    run = kraft_run(tmp_path, leader=1)
    result = audit([run])
    assert result.exit_code == 1
    data = result.to_dict()
    verdict = entry(data, "t")
    assert verdict["replicas"] == [1, 2] and verdict["diverged_at"] == 40
    assert verdict["leader"] == 1 and verdict["leader_source"].startswith("current leader")
    assert verdict["kraft"]["leader_epoch"] == 4
    assert verdict["kraft"]["leader_recovery_state"] == "RECOVERING"
    assert entry(data, "__cluster_metadata")["status"] == "consistent"
    assert data["metadata_log"]["leader_changes"] == 1
    assert {i["broker_id"] for i in data["inputs"]} == {1, 2, 3000}


def test_consistent_run_directory(tmp_path: Path) -> None:
    run = craft.write_run_dir(
        tmp_path / "run",
        {
            f"kafka-{b}": {"broker_id": b, "partitions": {("t", 0): LOG, ("t", 1): LOG[:2]}}
            for b in (1, 2, 3)
        },
    )
    code, out = run_cli(run, "--json", tmp_path / "out.json")
    assert code == 0, out
    data = json.loads((tmp_path / "out.json").read_text())
    assert [(p["topic"], p["partition"], p["status"]) for p in data["partitions"]] == [
        ("t", 0, "consistent"),
        ("t", 1, "consistent"),
    ]
    assert data["errors"] == []


# --------------------------------------------------------------------------------------
# Bad input


def test_unreadable_input_exits_2(tmp_path: Path) -> None:
    dirs = brokers(tmp_path, {1: {("t", 0): LOG}, 2: {("t", 0): LOG}})
    result = audit([*dirs, tmp_path / "missing"])
    assert result.exit_code == 2 and result.unreadable == [str(tmp_path / "missing")]
    assert result.partitions[0].status == "consistent"
    code, out = run_cli(*dirs, tmp_path / "missing")
    assert code == 2 and "does not exist" in out


def test_bad_segments_are_reported_and_the_audit_goes_on(tmp_path: Path) -> None:
    dirs = brokers(tmp_path, {1: {("t", 0): LOG, ("u", 0): LOG}, 2: {("t", 0): LOG, ("u", 0): LOG}})
    seg = dirs[1] / "u-0" / craft.segment_name(0)
    damage.flip_byte(seg, damage.batch_positions(seg.read_bytes())[1] + 40)
    damage.cut_file(dirs[0] / "t-0" / craft.segment_name(0), 5)
    result = audit(dirs)
    data = result.to_dict()
    (error,) = data["errors"]
    assert error["kind"] == "crc-mismatch" and error["broker"] == 2 and error["path"] == str(seg)
    assert data["torn_tails"][0]["broker"] == 1
    assert entry(data, "t")["status"] == "consistent"  # broker 1 lags by its torn batch
    # the corrupted batch still carries the CRC of the good one, but not its content
    assert entry(data, "u")["status"] == "diverged"
    assert entry(data, "u")["diverged_at"] == 10
    assert result.exit_code == 1
    summary = render(result)
    assert "[broker 2]" in summary and str(seg) in summary and "CRC-32C mismatch" in summary
    assert "(fails its CRC check)" in summary


def test_inputs_are_never_modified(tmp_path: Path) -> None:
    dirs = brokers(
        tmp_path, {1: {("t", 0): PartitionSpec(LOG, preallocate=8192)}, 2: {("t", 0): LOG[:2]}}
    )
    (dirs[0] / "t-0" / "00000000000000000000.log.cleaned").write_bytes(b"x")

    def snapshot() -> dict[str, tuple[str, int]]:
        return {
            str(p): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for d in dirs
            for p in d.rglob("*")
            if p.is_file()
        }

    before = snapshot()
    result = audit(dirs)
    assert result.exit_code == 0
    assert any("not read as live data" in n for n in result.partitions[0].notes)
    assert snapshot() == before


def test_main_writes_json_and_prints_a_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dirs = brokers(tmp_path, {1: {("t", 0): LOG}, 2: {("t", 0): [*LOG[:3], (30, 31, 9)]}})
    assert logfork(["audit", *map(str, dirs), "--json", str(tmp_path / "a.json")]) == 1
    out = capsys.readouterr().out
    assert "t-0: DIVERGED at offset 30" in out and "exit 1" in out
    data = json.loads((tmp_path / "a.json").read_text())
    for key in ("topic", "partition", "replicas", "status", "diverged_at", "below_high_watermark"):
        assert key in data["partitions"][0]
    assert isinstance(data["errors"], list)
    assert logfork(["audit", *map(str, dirs), "--json", "-"]) == 1
    assert json.loads(capsys.readouterr().out)["exit_code"] == 1
    assert (
        logfork(["audit", *map(str, dirs), "--json", str(tmp_path / "no" / "such" / "dir.json")])
        == 2
    )
    assert "could not write" in capsys.readouterr().err


def test_same_broker_twice(tmp_path: Path) -> None:
    a = craft.write_log_dir(tmp_path / "a", 1, {("t", 0): LOG})
    b = craft.write_log_dir(tmp_path / "b", 1, {("t", 0): LOG})
    result = audit([a, b, a])
    assert len(result.log_dirs) == 2
    assert "two log dirs" in result.errors[0].error.reason
    assert result.partitions[0].replicas == [1]


def test_unreadable_segment_file(tmp_path: Path) -> None:
    # A segment name that is not a readable file (here a directory: unreadable as a segment
    # even for root, who reads files whatever their mode).
    dirs = brokers(tmp_path, {1: {("t", 0): LOG}})
    segment = dirs[0] / "t-0" / craft.segment_name(0)
    segment.unlink()
    segment.mkdir()
    error = audit(dirs).errors[0].error
    assert error.kind == "unreadable-file" and str(segment) in str(error)


def test_pre_0_11_message_formats(tmp_path: Path) -> None:
    # 0.10.2 brokers: v1 messages and compressed wrappers, no leader epochs.
    def v1(spec: list) -> list:
        return [(b, e, -1, tag, codec, 1) for b, e, tag, codec in spec]

    good = v1([(0, 0, "", "none"), (1, 4, "", "gzip"), (5, 9, "", "snappy"), (10, 12, "", "lz4")])
    other = good[:2] + v1([(5, 9, "lost", "snappy")])
    dirs = brokers(
        tmp_path,
        {
            1: {("t", 0): PartitionSpec(good, high_watermark=13, leader_epochs=[])},
            2: {("t", 0): PartitionSpec(good[:3], high_watermark=10, leader_epochs=[])},
            3: {("t", 0): PartitionSpec(other, high_watermark=10, leader_epochs=[])},
        },
    )
    result = audit(dirs, protocol=Protocol.HIGH_WATERMARK)
    verdict = result.partitions[0]
    assert verdict.status == "diverged" and verdict.diverged_at == 5
    assert verdict.below_high_watermark and verdict.pairs == [(1, 3, 5), (2, 3, 5)]
    prediction = verdict.predictions[3]
    assert prediction.rounds[0].request == "high-watermark"
    # Broker 3 counted [5, 9] committed (high watermark 10): truncating to it keeps them.
    assert prediction.truncation_offset == 10 and prediction.outcome.value == "diverged"
    assert not result.errors


def test_epoch_checkpoint_disagreement_is_a_finding(tmp_path: Path) -> None:
    dirs = brokers(
        tmp_path,
        {
            1: {("t", 0): PartitionSpec(LOG, leader_epochs=[(1, 0), (2, 25), (3, 40)])},
            2: {("t", 0): LOG},
        },
    )
    result = audit(dirs)
    assert result.exit_code == 0
    assert result.partitions[0].notes == [
        "replica 1: leader-epoch-checkpoint: epoch 2: checkpoint says it starts at 25, the "
        "batches at 20"
    ]
    assert "leader-epoch-checkpoint: epoch 2" in render(result)


def test_kraft_preview_metadata_dir(tmp_path: Path) -> None:
    t = craft.kafka_uuid("t")
    dirs = brokers(
        tmp_path, {1: {("t", 0): LOG}, 2: {("t", 0): [*LOG[:4], (40, 41, 7)]}}, kraft=True
    )
    meta = craft.MetadataLogBuilder()
    meta.records(
        1,
        craft.encode_topic_record("t", t),
        craft.encode_partition_record(t, 0, replicas=[1, 2], isr=[1, 2], leader=1, leader_epoch=3),
    )
    meta.write(dirs[0] / "@metadata-0")  # Kafka 2.8's name for the metadata log
    result = audit(dirs)
    assert result.metadata is not None and result.partitions[1].leader == 1
