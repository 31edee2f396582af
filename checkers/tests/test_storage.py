"""Inputs by URI without a server: file:// is a local path, and the stand-ins a remote log dir
is planned and read from (`checkers.storage`) name every path by the URI again."""

from __future__ import annotations

from pathlib import Path

from benchmarks.fleet_data import write_fleet
from checkers.audit import audit
from checkers.errors import CrcMismatch
from checkers.lineage import Lineage
from checkers.storage import LARGE_SUFFIXES, is_remote, local_path, relabel, staged_listing


def test_file_uris_are_local_paths(tmp_path: Path) -> None:
    dirs = write_fleet(tmp_path, partitions=8, batches=10, planted=(2,)).dirs
    by_path = audit(dirs).to_dict()
    by_uri = audit([f"file://{d}" for d in dirs]).to_dict()
    assert by_uri == by_path
    assert by_uri["summary"]["diverged"] == 1
    assert not is_remote(f"file://{dirs[0]}") and is_remote("s3a://b/k")
    assert local_path(f"file://{dirs[0]}") == str(dirs[0])


def test_relabel_names_every_path_by_the_uri() -> None:
    old, new = "/scratch/d", "s3://bucket/fleet/broker-1"
    error = CrcMismatch(f"{old}/t-0/0.log", 61, "CRC-32C", 1, 2)
    lineage = Lineage("t", 0, 1, errors=[error], path=f"{old}/t-0", transient_files=["x.swap"])
    moved = relabel(lineage, old, new)
    assert moved.path == f"{new}/t-0" and moved.transient_files == ["x.swap"]
    assert isinstance(moved.errors[0], CrcMismatch)
    assert moved.errors[0].path == f"{new}/t-0/0.log" and str(moved.errors[0]).startswith(new)
    assert lineage.path == f"{old}/t-0"  # the original is left as it was


def test_a_listing_stand_in_has_sizes_not_bytes(tmp_path: Path) -> None:
    log_dir = write_fleet(tmp_path / "f", partitions=2, batches=500).dirs[0]
    segment = next(log_dir.glob("*/*.log"))
    assert segment.suffix in LARGE_SUFFIXES
    # Any pyarrow filesystem URI is staged alike; file:// needs no server.
    with staged_listing(log_dir.as_uri()) as local:
        stand_in = local / segment.parent.name / segment.name
        assert stand_in.stat().st_size == segment.stat().st_size
        assert stand_in.stat().st_blocks == 0  # sparse: sized, never copied
        assert (local / "meta.properties").read_text() == (log_dir / "meta.properties").read_text()
    assert not local.exists()
