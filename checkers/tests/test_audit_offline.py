"""The audit of a JBOD broker whose one log dir failed: the dir's disk answers EIO (a real
FUSE mount, detached), the dir is named offline, and its partitions are judged on the
replicas that remain, with the missing one listed. A path that does not exist stays bad
input."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from checkers.audit import audit
from checkers.audit.render import render
from fixtures.crashfs import Mount
from suites.cli import main as logfork
from testsupport import craft
from testsupport.fuse import need_fuse

LOG = [(0, 4, 1), (5, 9, 1), (10, 14, 2)]


@pytest.fixture
def dirs(tmp_path: Path) -> Iterator[list[Path]]:
    """Broker 1 holds t-0 and t-1 in one log dir; broker 2 holds t-0 in its first and t-1
    in its second, whose disk has failed; the controller's metadata log assigns both
    partitions to brokers 1 and 2."""
    need_fuse()
    b1 = craft.write_log_dir(
        tmp_path / "b1" / "data", 1, {("t", 0): LOG, ("t", 1): LOG}, kraft=True
    )
    b2 = craft.write_log_dir(tmp_path / "b2" / "data", 2, {("t", 0): LOG}, kraft=True)
    lost = craft.write_log_dir(tmp_path / "b2" / "data2", 2, {("t", 1): LOG[:2]}, kraft=True)
    controller = craft.write_log_dir(tmp_path / "c" / "data", 3000, {}, kraft=True)
    t = craft.kafka_uuid("t")
    meta = craft.MetadataLogBuilder()
    meta.leader_change(1, 3000, [3000])
    meta.records(
        1,
        craft.encode_topic_record("t", t),
        *(
            craft.encode_partition_record(
                t, p, replicas=[1, 2], isr=[1, 2], leader=1, leader_epoch=2
            )
            for p in (0, 1)
        ),
    )
    meta.write(controller / "__cluster_metadata-0")
    with Mount(lost, tmp_path / "trash", tmp_path / "ctl.sock") as disk:
        disk.detach()
        yield [controller, b1, b2, lost]


def test_an_offline_log_dir_is_named_and_its_partitions_judged_on_the_rest(dirs) -> None:
    result = audit(dirs)
    assert result.exit_code == 0 and not result.errors and not result.unreadable
    [offline] = result.offline
    assert (offline.path, offline.broker_id) == (str(dirs[3]), 2)  # its sibling's broker
    assert "Input/output error" in offline.offline
    data = result.to_dict()
    by_partition = {(p["topic"], p["partition"]): p for p in data["partitions"]}
    assert by_partition[("t", 0)]["replicas"] == [1, 2]
    assert by_partition[("t", 0)]["missing_replicas"] == []
    assert by_partition[("t", 1)]["replicas"] == [1]
    assert by_partition[("t", 1)]["missing_replicas"] == [
        {"broker": 2, "offline_log_dirs": [str(dirs[3])]}
    ]
    text = render(result)
    assert f"[broker 2] {dirs[3]}: cannot list directory: Input/output error" in " ".join(
        text.split()
    )
    assert "t-1: broker 2 (an offline log dir)" in text


def test_the_command_exits_0_and_a_missing_path_is_still_bad_input(dirs, capsys) -> None:
    assert logfork(["audit", *map(str, dirs)]) == 0
    assert "offline log dir(s) (1)" in capsys.readouterr().out
    assert logfork(["audit", *map(str, dirs), str(dirs[0].parent / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().out


def test_spark_names_the_offline_dir_as_the_local_engine_does(dirs, tmp_path) -> None:
    out = {}
    for engine in ("local", "spark"):
        args = ["audit", *map(str, dirs), "--json", str(tmp_path / f"{engine}.json")]
        assert logfork([*args, *(["--spark-master", "local[1]"] if engine == "spark" else [])]) == 0
        out[engine] = json.loads((tmp_path / f"{engine}.json").read_text())
    assert out["spark"]["inputs"] == out["local"]["inputs"]
    assert out["spark"]["partitions"] == out["local"]["partitions"]
