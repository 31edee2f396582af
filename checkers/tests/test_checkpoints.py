"""Checkpoint files, meta.properties, partition.metadata and quorum-state."""

from __future__ import annotations

from pathlib import Path

import pytest

from checkers.checkpoints import (
    read_leader_epoch_checkpoint,
    read_meta_properties,
    read_offset_checkpoint,
    read_partition_metadata,
    read_quorum_state,
)
from checkers.errors import BadCheckpoint, BadPropertiesFile, UnreadableFile
from testsupport import craft


def test_leader_epoch_checkpoint(tmp_path: Path) -> None:
    path = craft.write_leader_epoch_checkpoint(tmp_path, [(0, 0), (3, 120), (7, 4000)])
    assert path.read_text() == "0\n3\n0 0\n3 120\n7 4000\n"
    assert read_leader_epoch_checkpoint(path) == [(0, 0), (3, 120), (7, 4000)]


def test_offset_checkpoint(tmp_path: Path) -> None:
    path = craft.write_offset_checkpoint(
        tmp_path / "replication-offset-checkpoint", {("orders", 0): 10, ("my.topic-x", 12): 99}
    )
    assert read_offset_checkpoint(path) == {("orders", 0): 10, ("my.topic-x", 12): 99}
    path.write_text("0\n1\nt  3\t77\n")  # any whitespace splits fields
    assert read_offset_checkpoint(path) == {("t", 3): 77}


def test_empty_checkpoint_is_no_entries(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("")
    assert read_leader_epoch_checkpoint(path) == []
    path.write_text("0\n")
    assert read_leader_epoch_checkpoint(path) == []


@pytest.mark.parametrize(
    ("text", "position", "reason"),
    [
        ("1\n0\n", 0, "unrecognised version"),
        ("0\nx\n", 2, "entry count"),
        ("0\n2\n0 0\n", 2, "expected 2 entries but found 1"),
        ("0\n1\n0 0 0\n", 4, "malformed entry line"),
        ("0\n1\n0 zero\n", 4, "is not a number"),
    ],
)
def test_bad_checkpoint_names_the_line(
    tmp_path: Path, text: str, position: int, reason: str
) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(text)
    with pytest.raises(BadCheckpoint) as info:
        read_leader_epoch_checkpoint(path)
    assert info.value.offset == position and reason in info.value.reason
    assert str(info.value).startswith(f"{path} at byte {position}: ")


def test_unreadable_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(UnreadableFile):
        read_offset_checkpoint(tmp_path / "absent")
    (tmp_path / "bin").write_bytes(b"0\n\xff\xfe\n")
    with pytest.raises(BadCheckpoint):
        read_offset_checkpoint(tmp_path / "bin")


def test_meta_properties_zookeeper_and_kraft(tmp_path: Path) -> None:
    zk = read_meta_properties(craft.write_meta_properties(tmp_path / "zk", 3, cluster_id="c1"))
    assert (zk.broker_id, zk.kraft, zk.cluster_id, zk.version) == (3, False, "c1", 0)
    kraft = read_meta_properties(
        craft.write_meta_properties(tmp_path / "kr", 5, kraft=True, directory_id="dXJ1aWQ")
    )
    assert (kraft.broker_id, kraft.kraft, kraft.version, kraft.directory_id) == (
        5,
        True,
        1,
        "dXJ1aWQ",
    )


def test_bad_meta_properties(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    path.write_text("version=0\ncluster.id=x\n")
    with pytest.raises(BadPropertiesFile, match=r"neither broker\.id nor node\.id"):
        read_meta_properties(path)
    path.write_text("broker.id=one\n")
    with pytest.raises(BadPropertiesFile):
        read_meta_properties(path)


def test_partition_metadata(tmp_path: Path) -> None:
    topic_id = craft.kafka_uuid("orders")
    meta = read_partition_metadata(craft.write_partition_metadata(tmp_path, topic_id))
    assert (meta.version, meta.topic_id) == (0, topic_id)
    (tmp_path / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA")
    with pytest.raises(BadPropertiesFile, match="zero Uuid"):
        read_partition_metadata(tmp_path / "partition.metadata")
    (tmp_path / "partition.metadata").write_text("topic_id: x")
    with pytest.raises(BadPropertiesFile):
        read_partition_metadata(tmp_path / "partition.metadata")


def test_quorum_state(tmp_path: Path) -> None:
    state = read_quorum_state(craft.write_quorum_state(tmp_path, 1, 7, voters=[1, 2, 3]))
    assert (state.leader_id, state.leader_epoch, state.voters) == (1, 7, (1, 2, 3))
    (tmp_path / "quorum-state").write_text(
        '{"leaderId":2,"leaderEpoch":9,"votedId":-1,"votedDirectoryId":"x","data_version":1}'
    )
    state = read_quorum_state(tmp_path / "quorum-state")
    assert (state.leader_id, state.leader_epoch, state.data_version) == (2, 9, 1)
    (tmp_path / "quorum-state").write_text("{not json")
    with pytest.raises(BadPropertiesFile):
        read_quorum_state(tmp_path / "quorum-state")
