"""The KRaft metadata log: records, tagged fields, leader changes, snapshots, bad input."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from basics.protocol import RecoveryState
from checkers.errors import BadMetadataRecord
from checkers.metadata_log import (
    decode_leader_change,
    decode_metadata_log,
    decode_metadata_record,
)
from testsupport import craft, damage

RECOVERED, RECOVERING = RecoveryState.RECOVERED, RecoveryState.RECOVERING
DATA = Path(__file__).parent / "data" / "real"

ORDERS = craft.kafka_uuid("orders")
AUDIT = craft.kafka_uuid("audit")


def build_history() -> craft.MetadataLogBuilder:
    log = craft.MetadataLogBuilder()
    log.leader_change(1, 3000, [3000, 3001, 3002])
    log.records(
        1,
        craft.encode_topic_record("orders", ORDERS),
        craft.encode_partition_record(
            ORDERS, 0, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1, leader_epoch=0
        ),
        craft.encode_partition_record(
            ORDERS, 1, replicas=[2, 3, 1], isr=[2, 3, 1], leader=2, leader_epoch=0, version=1
        ),
    )
    # ISR shrink: no Leader field, so the leader epoch stays
    log.records(1, craft.encode_partition_change_record(ORDERS, 0, isr=[1, 2]))
    log.leader_change(2, 3001, [3000, 3001, 3002])
    # broker 1 fails: new leader, epoch + 1
    log.records(2, craft.encode_partition_change_record(ORDERS, 0, leader=2, isr=[2]))
    # unclean election of 3 (KIP-704): RECOVERING, then RECOVERED on its next ISR change
    log.records(
        2,
        craft.encode_partition_change_record(
            ORDERS, 0, leader=3, isr=[3], leader_recovery_state=RECOVERING
        ),
    )
    log.records(
        2,
        craft.encode_partition_change_record(
            ORDERS, 0, isr=[3, 2], leader_recovery_state=RECOVERED
        ),
    )
    return log


def test_partition_history(tmp_path: Path) -> None:
    build_history().write(tmp_path / "__cluster_metadata-0")
    log = decode_metadata_log(tmp_path / "__cluster_metadata-0")
    assert not log.errors
    assert log.topics == {ORDERS: "orders"}
    history = log.history("orders", 0)
    assert [
        (e.leader, e.leader_epoch, e.partition_epoch, e.isr, e.leader_recovery_state, e.record)
        for e in history
    ] == [
        (1, 0, 0, (1, 2, 3), RECOVERED, "PartitionRecord"),
        (1, 0, 1, (1, 2), RECOVERED, "PartitionChangeRecord"),
        (2, 1, 2, (2,), RECOVERED, "PartitionChangeRecord"),
        (3, 2, 3, (3,), RECOVERING, "PartitionChangeRecord"),
        (3, 2, 4, (3, 2), RECOVERED, "PartitionChangeRecord"),
    ]
    assert [e.raft_epoch for e in history] == [1, 1, 2, 2, 2]
    assert [e.offset for e in history] == [2, 4, 6, 7, 8]
    assert history[0].batch_offset == 1 and history[0].replicas == (1, 2, 3)
    assert log.current("orders", 1).leader == 2
    assert [(c.leader_id, c.voters, c.raft_epoch, c.offset) for c in log.leader_changes] == [
        (3000, (3000, 3001, 3002), 1, 0),
        (3001, (3000, 3001, 3002), 2, 5),
    ]
    assert log.end_offset == 9
    assert log.partitions() == {("orders", 0), ("orders", 1)}


def test_partition_record_versions_and_tagged_recovery_state() -> None:
    for version in (0, 1, 2):
        raw = craft.encode_partition_record(
            ORDERS,
            4,
            replicas=[1, 2],
            isr=[1],
            leader=1,
            leader_epoch=5,
            partition_epoch=9,
            leader_recovery_state=RECOVERING,
            version=version,
            eligible_leader_replicas=[2] if version == 2 else None,
        )
        rec = decode_metadata_record(raw)
        assert (rec.api_key, rec.version) == (3, version)
        f = rec.fields
        assert (
            f["partition"],
            f["topic_id"],
            f["leader"],
            f["leader_epoch"],
            f["partition_epoch"],
            f["leader_recovery_state"],
        ) == (4, ORDERS, 1, 5, 9, RECOVERING)
        assert f["isr"] == (1,) and f["replicas"] == (1, 2)


def test_unknown_tagged_fields_are_skipped() -> None:
    raw = craft.encode_partition_change_record(
        ORDERS, 0, leader=4, extra_tags={17: b"future", 9: b"\x01\x02"}
    )
    f = decode_metadata_record(raw).fields
    assert f["leader"] == 4 and f["isr"] is None and f["leader_recovery_state"] is None
    raw = craft.encode_partition_record(
        ORDERS, 0, replicas=[1], isr=[1], leader=1, leader_epoch=0, extra_tags={30: b"x" * 40}
    )
    assert decode_metadata_record(raw).fields["leader"] == 1


def test_unknown_record_types_are_skipped(tmp_path: Path) -> None:
    log = craft.MetadataLogBuilder()
    log.records(
        1,
        craft.metadata_frame(15, 0, b"\x00\x01opaque"),  # e.g. a ProducerIdsRecord
        craft.encode_topic_record("orders", ORDERS),
        craft.encode_partition_record(ORDERS, 0, replicas=[1], isr=[1], leader=1, leader_epoch=3),
    )
    log.write(tmp_path / "m")
    decoded = decode_metadata_log(tmp_path / "m")
    assert not decoded.errors and decoded.skipped_records == 1
    assert decoded.current("orders", 0).leader_epoch == 3


def test_eligible_leader_replicas_and_features(tmp_path: Path) -> None:
    """KIP-966: ELR and LastKnownElr set by PartitionRecord v2, changed by
    PartitionChangeRecord v2 tags 6 and 7 (absent: unchanged); feature levels kept."""
    log = craft.MetadataLogBuilder()
    log.records(
        1,
        craft.encode_feature_level_record("eligible.leader.replicas.version", 1),
        craft.encode_topic_record("orders", ORDERS),
        craft.encode_partition_record(
            ORDERS,
            0,
            replicas=[3, 1, 2],
            isr=[3],
            leader=3,
            leader_epoch=0,
            version=2,
            eligible_leader_replicas=[2],
        ),
    )
    # the last ISR member fenced: its ELR member leads, it moves to the ELR
    log.records(
        1,
        craft.encode_partition_change_record(
            ORDERS, 0, leader=2, isr=[2], eligible_leader_replicas=[3], version=2
        ),
    )
    log.records(1, craft.encode_partition_change_record(ORDERS, 0, isr=[2, 1], version=2))
    log.records(
        1,
        craft.encode_partition_change_record(
            ORDERS, 0, leader=-1, isr=[], eligible_leader_replicas=[], last_known_elr=[2], version=2
        ),
    )
    log.write(tmp_path / "m")
    decoded = decode_metadata_log(tmp_path / "m")
    assert not decoded.errors
    assert decoded.features == {"eligible.leader.replicas.version": 1}
    assert [(e.leader, e.isr, e.elr, e.last_known_elr) for e in decoded.history("orders", 0)] == [
        (3, (3,), (2,), ()),
        (2, (2,), (3,), ()),
        (2, (2, 1), (3,), ()),
        (-1, (), (), (2,)),
    ]
    assert decoded.history("orders", 0)[-1].to_dict()["last_known_elr"] == [2]


def test_a_leader_elected_while_fenced_is_flagged(tmp_path: Path) -> None:
    """KAFKA-19522 (4.0.x): the batch that registers broker 1 again, still fenced, also
    elects it as the last known leader. Electing it once it is unfenced is fine."""
    log = craft.MetadataLogBuilder()
    log.records(
        1,
        *(craft.encode_register_broker_record(b, 10 + b, fenced=False) for b in (1, 2, 3)),
        craft.encode_topic_record("orders", ORDERS),
        craft.encode_partition_record(
            ORDERS, 0, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1, leader_epoch=0, version=2
        ),
    )
    log.records(1, *(craft.encode_broker_fencing_record(b, 10 + b, fenced=True) for b in (2, 3)))
    log.records(1, craft.encode_broker_fencing_record(1, 11, fenced=True))
    log.records(
        1,
        craft.encode_partition_change_record(
            ORDERS,
            0,
            leader=-1,
            isr=[],
            eligible_leader_replicas=[],
            last_known_elr=[1],
            version=2,
        ),
    )
    log.records(
        1,
        craft.encode_register_broker_record(1, 40, fenced=True),
        craft.encode_partition_change_record(
            ORDERS,
            0,
            leader=1,
            isr=[1],
            leader_recovery_state=RECOVERING,
            last_known_elr=[],
            version=2,
        ),
    )
    log.records(1, craft.encode_broker_fencing_record(1, 40, fenced=False))
    log.records(1, craft.encode_partition_change_record(ORDERS, 0, leader=-1, isr=[]))
    log.records(1, craft.encode_partition_change_record(ORDERS, 0, leader=1, isr=[1]))
    log.write(tmp_path / "m")
    decoded = decode_metadata_log(tmp_path / "m")
    assert not decoded.errors
    assert [(e.leader, e.leader_fenced) for e in decoded.history("orders", 0)] == [
        (1, False),
        (-1, False),
        (1, True),  # registered fenced in the same batch, and elected
        (-1, False),
        (1, False),  # unfenced by then
    ]


def test_real_4_3_1_features_and_registrations(tmp_path: Path) -> None:
    """A fresh 4.3.1 cluster finalizes ELR at level 1; every broker registration is kept."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "00000000000000000000.log").write_bytes(
        (DATA / "kafka-4.3.1-cluster-metadata.log").read_bytes()
    )
    decoded = decode_metadata_log(tmp_path / "m")
    assert decoded.features["eligible.leader.replicas.version"] == 1
    assert [(r.broker_id, r.broker_epoch) for r in decoded.registrations][:2] == [(1, 11), (2, 15)]
    assert all(r.broker_epoch == r.offset for r in decoded.registrations)


def test_removed_topic(tmp_path: Path) -> None:
    log = craft.MetadataLogBuilder()
    log.records(
        1,
        craft.encode_topic_record("orders", ORDERS),
        craft.encode_partition_record(ORDERS, 0, replicas=[1], isr=[1], leader=1, leader_epoch=0),
    )
    log.records(1, craft.encode_remove_topic_record(ORDERS))
    log.write(tmp_path / "m")
    decoded = decode_metadata_log(tmp_path / "m")
    assert decoded.removed_topics == {ORDERS: 2}
    assert not decoded.live_partitions() and decoded.partitions()
    assert decoded.current("orders", 0) is None and len(decoded.history("orders", 0)) == 1


def test_compressed_metadata_batches(tmp_path: Path) -> None:
    log = craft.MetadataLogBuilder()
    log.records(
        1,
        craft.encode_topic_record("orders", ORDERS),
        craft.encode_partition_record(ORDERS, 0, replicas=[1], isr=[1], leader=1, leader_epoch=0),
        compression="zstd",
    )
    log.write(tmp_path / "m")
    assert decode_metadata_log(tmp_path / "m").current("orders", 0).leader == 1


def test_preview_frame_version_zero() -> None:
    # Kafka 2.8 (@metadata): frame version 0 and non-flexible Topic/PartitionRecord.
    name = b"orders"
    topic = craft.metadata_frame(
        2, 0, struct.pack(">h", len(name)) + name + craft.uuid_bytes(ORDERS), frame_version=0
    )
    assert decode_metadata_record(topic).fields == {"name": "orders", "topic_id": ORDERS}
    body = struct.pack(">i", 2) + craft.uuid_bytes(ORDERS)
    body += struct.pack(">iii", 2, 1, 2) + struct.pack(">ii", 1, 1)  # replicas [1,2], isr [1]
    body += struct.pack(">ii", -1, -1) + struct.pack(">iii", 1, 4, 6)
    f = decode_metadata_record(craft.metadata_frame(3, 0, body, frame_version=0)).fields
    assert (f["partition"], f["replicas"], f["isr"], f["leader"], f["leader_epoch"]) == (
        2,
        (1, 2),
        (1,),
        1,
        4,
    )
    assert decode_leader_change(
        struct.pack(">i", 7) + b"\x02\x00\x00\x00\x07\x00" + b"\x01\x00"
    ) == (7, (7,), ())


def test_bad_records_are_typed_errors_and_the_rest_goes_on(tmp_path: Path) -> None:
    log = craft.MetadataLogBuilder()
    log.records(1, craft.encode_topic_record("orders", ORDERS))
    log.records(1, craft.metadata_frame(3, 0, b"\x00\x00"))  # truncated PartitionRecord
    log.records(1, b"\x07\x03\x00")  # unknown frame version
    log.records(
        1,
        craft.encode_partition_record(ORDERS, 0, replicas=[1], isr=[1], leader=1, leader_epoch=2)
        + b"junk",
    )
    log.records(
        1, craft.encode_partition_record(ORDERS, 0, replicas=[1], isr=[1], leader=1, leader_epoch=3)
    )
    path = log.write(tmp_path / "m")
    decoded = decode_metadata_log(tmp_path / "m")
    assert len(decoded.errors) == 3
    assert all(isinstance(e, BadMetadataRecord) and e.path == str(path) for e in decoded.errors)
    assert decoded.current("orders", 0).leader_epoch == 3


def test_change_record_without_base_state(tmp_path: Path) -> None:
    log = craft.MetadataLogBuilder()
    log.records(1, craft.encode_partition_change_record(ORDERS, 0, leader=2))
    log.write(tmp_path / "m")
    decoded = decode_metadata_log(tmp_path / "m")
    assert "no earlier PartitionRecord" in decoded.errors[0].reason


def test_snapshot_supplies_state_when_the_log_was_trimmed(tmp_path: Path) -> None:
    mdir = tmp_path / "__cluster_metadata-0"
    snapshot = craft.MetadataLogBuilder()
    snapshot.records(
        4,
        craft.encode_topic_record("orders", ORDERS),
        craft.encode_topic_record("audit", AUDIT),
        craft.encode_partition_record(
            ORDERS, 0, replicas=[1, 2], isr=[1, 2], leader=1, leader_epoch=6, partition_epoch=10
        ),
    )
    mdir.mkdir()
    (mdir / "00000000000000000100-0000000004.checkpoint").write_bytes(bytes(snapshot.data))
    log = craft.MetadataLogBuilder(next_offset=100)
    log.records(4, craft.encode_partition_change_record(ORDERS, 0, leader=2, isr=[2]))
    log.write(mdir, base_offset=100)
    decoded = decode_metadata_log(mdir)
    assert not decoded.errors
    assert decoded.snapshot == "00000000000000000100-0000000004.checkpoint"
    history = decoded.history("orders", 0)
    assert [(e.leader, e.leader_epoch, e.partition_epoch, e.from_snapshot) for e in history] == [
        (1, 6, 10, True),
        (2, 7, 11, False),
    ]
    assert decoded.topics[AUDIT] == "audit"


@pytest.mark.parametrize("cut", [1, 20])
def test_torn_metadata_log(tmp_path: Path, cut: int) -> None:
    path = build_history().write(tmp_path / "m")
    damage.cut_file(path, cut)
    decoded = decode_metadata_log(tmp_path / "m")
    assert decoded.torn_tail is not None and not decoded.errors
    assert len(decoded.history("orders", 0)) == 4
