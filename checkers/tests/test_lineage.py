"""Lineages: epoch starts, the log dir reader, and where two replicas first differ."""

from __future__ import annotations

from pathlib import Path

from checkers.abstract import from_spec
from checkers.errors import BadCheckpoint, BadPropertiesFile, UnreadableFile
from checkers.lineage import (
    Lineage,
    compare_epoch_starts,
    derive_epoch_starts,
    first_divergence,
    read_log_dir,
)
from testsupport import craft
from testsupport.craft import PartitionSpec


def spans(lineage: Lineage) -> list[tuple[int, int, int]]:
    return [(b.base_offset, b.last_offset, b.leader_epoch) for b in lineage.batches]


def test_from_spec_and_derived_epochs() -> None:
    lin = from_spec(1, [(0, 10, 1), (11, 20, 1), (21, 30, 3)], high_watermark=11)
    assert spans(lin) == [(0, 10, 1), (11, 20, 1), (21, 30, 3)]
    assert lin.epoch_starts == [(1, 0), (3, 21)]
    assert (lin.log_start_offset, lin.leo, lin.high_watermark, lin.tail_epoch) == (0, 31, 11, 3)
    same = from_spec(2, [(0, 10, 1), (11, 20, 1), (21, 30, 3)])
    assert [b.key for b in same.batches] == [b.key for b in lin.batches]
    other = from_spec(2, [(0, 10, 1, "other data")])
    assert other.batches[0].key != lin.batches[0].key
    assert lin.batch_containing(15).span == "[11, 20]" and lin.batch_containing(31) is None


def test_derived_epochs_follow_the_epoch_cache_rules() -> None:
    lin = from_spec(1, [(0, 0, -1), (1, 1, 2), (2, 2, 1), (3, 3, 2), (4, 4, 5)])
    # v0/v1 (epoch -1) adds nothing; an epoch lower than the latest is not assigned
    assert derive_epoch_starts(lin.batches) == [(2, 1), (5, 4)]


def test_epoch_cache_prefers_the_checkpoint_and_drops_entries_past_the_end() -> None:
    lin = from_spec(1, [(0, 9, 1)], epochs=[(1, 0), (2, 10), (3, 50)])
    assert lin.epoch_cache() == [(1, 0), (2, 10)]
    assert from_spec(1, [(0, 9, 1)]).epoch_cache() == [(1, 0)]


def test_compare_epoch_starts() -> None:
    derived = [(1, 0), (3, 21)]
    assert compare_epoch_starts(derived, None, 0, 31) == []
    assert compare_epoch_starts(derived, [(1, 0), (3, 21)], 0, 31) == []
    # a leader elected in epoch 2 that wrote nothing, and the current leader's empty epoch
    assert compare_epoch_starts(derived, [(1, 0), (2, 21), (3, 21), (4, 31)], 0, 31) == []
    # the first entry moved up to the log start offset after retention
    assert compare_epoch_starts([(1, 100), (3, 121)], [(1, 105), (3, 121)], 105, 131) == []
    findings = compare_epoch_starts(derived, [(1, 0), (2, 15), (3, 22), (5, 40)], 0, 31)
    assert findings == [
        "epoch 2: checkpoint says it starts at 15 but no batch carries it",
        "epoch 3: checkpoint says it starts at 22, the batches at 21",
        "checkpoint entry epoch 5 at 40 lies beyond the log end offset 31 (Kafka drops it on "
        "restart after an unclean shutdown)",
    ]
    assert compare_epoch_starts(derived, [(1, 0)], 0, 31) == [
        "epoch 3: batches start it at 21 but the checkpoint has no entry"
    ]


def test_first_divergence() -> None:
    leader = from_spec(1, [(0, 9, 1), (10, 19, 1), (20, 29, 2)]).batches
    assert first_divergence(leader, leader) is None
    assert first_divergence(leader, leader[:2]) is None  # lag
    assert first_divergence(leader, leader[2:]) is None  # trimmed log start
    assert first_divergence(leader, []) is None
    at_zero = from_spec(2, [(0, 9, 2)]).batches
    assert first_divergence(leader, at_zero) == 0
    other_boundary = from_spec(2, [(0, 9, 1), (10, 14, 1)]).batches
    assert first_divergence(leader, other_boundary) == 10
    other_crc = from_spec(2, [(0, 9, 1), (10, 19, 1, "x")]).batches
    assert first_divergence(other_crc, leader) == 10
    # a later start inside the other's batch: the first offset both hold
    late = from_spec(2, [(15, 19, 1), (20, 29, 2)]).batches
    assert first_divergence(leader, late) == 15


def test_read_log_dir_zookeeper(tmp_path: Path) -> None:
    topic_id = craft.kafka_uuid("t")
    craft.write_log_dir(
        tmp_path,
        7,
        {
            ("t", 0): PartitionSpec(
                [(0, 9, 0), (10, 19, 1), (20, 29, 1)],
                high_watermark=25,
                log_start_offset=12,
                recovery_point=20,
                roll_at=[10, 20],
                topic_id=topic_id,
            ),
            ("t", 1): PartitionSpec([(0, 4, 0)], high_watermark=5),
            ("other-topic.x", 3): PartitionSpec([(0, 0, 0)]),
        },
    )
    (tmp_path / "t-9.0123456789abcdef0123456789abcdef-delete").mkdir()
    (tmp_path / "t-8.0123456789abcdef0123456789abcdef-future").mkdir()
    (tmp_path / "cleaner-offset-checkpoint").write_text("0\n0\n")
    log_dir = read_log_dir(tmp_path)
    assert (log_dir.broker_id, log_dir.kraft, log_dir.readable) == (7, False, True)
    assert sorted(log_dir.lineages) == [("other-topic.x", 3), ("t", 0), ("t", 1)]
    assert len(log_dir.sidelined) == 2 and not log_dir.errors
    lin = log_dir.lineages[("t", 0)]
    assert (lin.broker_id, lin.high_watermark, lin.recovery_point, lin.topic_id) == (
        7,
        25,
        20,
        topic_id,
    )
    assert (lin.log_start_offset, lin.leo) == (12, 30)
    assert lin.checkpointed_epoch_starts == [(0, 0), (1, 10)] == lin.epoch_starts
    assert lin.epoch_findings() == []
    assert list(read_log_dir(tmp_path, topic="t").lineages) == [("t", 0), ("t", 1)]


def test_log_start_is_at_least_the_first_segment_base(tmp_path: Path) -> None:
    craft.write_log_dir(tmp_path, 1, {("t", 0): PartitionSpec([(50, 59, 0)])})
    lin = read_log_dir(tmp_path).lineages[("t", 0)]
    assert (lin.log_start_offset, lin.leo) == (50, 60)
    craft.write_log_dir(tmp_path / "empty", 1, {("t", 0): PartitionSpec([], first_segment_base=80)})
    lin = read_log_dir(tmp_path / "empty").lineages[("t", 0)]
    assert (lin.batches, lin.log_start_offset, lin.leo) == ([], 80, 80)


def test_unreadable_log_dirs(tmp_path: Path) -> None:
    missing = read_log_dir(tmp_path / "absent")
    assert not missing.readable and isinstance(missing.errors[0], UnreadableFile)
    (tmp_path / "file").write_text("x")
    assert not read_log_dir(tmp_path / "file").readable
    craft.write_log_dir(tmp_path / "nometa", 1, {("t", 0): [(0, 0, 0)]})
    (tmp_path / "nometa" / "meta.properties").unlink()
    nometa = read_log_dir(tmp_path / "nometa")
    assert not nometa.readable and isinstance(nometa.errors[0], BadPropertiesFile)
    assert ("t", 0) in nometa.lineages


def test_bad_side_files_are_errors_not_failures(tmp_path: Path) -> None:
    craft.write_log_dir(tmp_path, 1, {("t", 0): [(0, 4, 0)]})
    (tmp_path / "replication-offset-checkpoint").write_text("0\n5\nt 0 3\n")
    (tmp_path / "t-0" / "leader-epoch-checkpoint").write_text("garbage")
    (tmp_path / "t-0" / "partition.metadata").write_text("nonsense")
    log_dir = read_log_dir(tmp_path)
    assert log_dir.readable and isinstance(log_dir.errors[0], BadCheckpoint)
    lin = log_dir.lineages[("t", 0)]
    assert lin.high_watermark is None and lin.checkpointed_epoch_starts is None
    assert sorted(type(e).__name__ for e in lin.errors) == ["BadCheckpoint", "BadPropertiesFile"]
    assert any(isinstance(e, BadPropertiesFile) for e in lin.errors)


def test_read_kraft_log_dir_with_metadata(tmp_path: Path) -> None:
    craft.write_log_dir(tmp_path, 3000, {("t", 0): [(0, 4, 0)]}, kraft=True)
    log = craft.MetadataLogBuilder()
    log.leader_change(1, 3000, [3000])
    log.records(
        1,
        craft.encode_topic_record("t", craft.kafka_uuid("t")),
        craft.encode_partition_record(
            craft.kafka_uuid("t"), 0, replicas=[1], isr=[1], leader=1, leader_epoch=0
        ),
    )
    log.write(tmp_path / "__cluster_metadata-0")
    craft.write_quorum_state(tmp_path / "__cluster_metadata-0", 3000, 1, voters=[3000])
    log_dir = read_log_dir(tmp_path)
    assert log_dir.kraft and log_dir.broker_id == 3000
    assert log_dir.metadata_log is not None and log_dir.metadata_log.current("t", 0).leader == 1
    assert log_dir.quorum_state is not None and log_dir.quorum_state.leader_id == 3000
    assert ("__cluster_metadata", 0) in log_dir.lineages
