"""A schedule's evidence, copied out of a cluster that other schedules share, into the
schedule's own run directory: its topic's partition dirs, the checkpoint files and
meta.properties beside them, the KRaft metadata log, the transaction coordinators' log,
each node's config, and what each node logged while the schedule ran. Its audit and
report then speak of that schedule only; the cluster's own dirs are left as they are."""

from __future__ import annotations

import shutil
from pathlib import Path

from checkers.coordinator_log import TXN_STATE_TOPIC
from checkers.metadata_log import METADATA_TOPICS
from fixtures.cluster import Cluster
from fixtures.config import log_dir_name
from runrecord.rundir import RunDir


def _wanted(entry: Path, topic: str) -> bool:
    if entry.suffix == ".tmp":
        return False  # a checkpoint being written: the live cluster renames it at once
    if entry.is_file():
        return True  # meta.properties, the offset checkpoints, bootstrap.checkpoint
    name, _, part = entry.name.rpartition("-")
    # The coordinators' log: the audit compares the topic's markers with what they completed.
    return part.isdigit() and (name in (topic, TXN_STATE_TOPIC) or name in METADATA_TOPICS)


def copy_evidence(cluster: Cluster, topic: str, run: RunDir, marks: dict[str, int]) -> None:
    """Copy what judges the schedule into `run`; `marks` are where each node's log stood
    (by node name) when the schedule began."""
    for name, node in cluster.nodes.items():
        if node.role.name == "zookeeper":
            continue
        for i, log_dir in enumerate(node.log_dirs):
            target = run.node_dir(name) / log_dir_name(i)
            target.mkdir(parents=True, exist_ok=True)
            for entry in sorted(log_dir.iterdir()) if log_dir.is_dir() else []:
                if not _wanted(entry, topic):
                    continue
                if entry.is_dir():
                    shutil.copytree(
                        entry, target / entry.name, dirs_exist_ok=True, copy_function=_copy
                    )
                else:
                    _copy(entry, target / entry.name)
        if node.config_dir.is_dir():
            shutil.copytree(node.config_dir, run.node_dir(name) / "config", dirs_exist_ok=True)
        logs = run.node_dir(name) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        if node.log_file.is_file():
            with node.log_file.open("rb") as f:
                f.seek(marks.get(name, 0))
                (logs / node.log_file.name).write_bytes(f.read())


# Runs of zeros at least this long become holes in the copy.
HOLE = 1 << 16


def _copy(source: Path | str, target: Path | str) -> None:
    """Copy a file of the live cluster; one its broker renamed or deleted since the listing
    (a checkpoint's temporary file, a segment being cleaned) is no evidence of anything."""
    try:
        _sparse_copy(Path(source), Path(target))
    except FileNotFoundError:
        if Path(source).exists():
            raise


def _sparse_copy(source: Path, target: Path) -> None:
    """Copy with holes where the source has zeros: a broker preallocates each active
    segment's offset and time index at segment.index.bytes (10 MiB), mostly unwritten, and
    a plain copy writes every zero, about 250 MB per schedule of a 4.4.0 explore."""
    with source.open("rb") as src, target.open("wb") as dst:
        while block := src.read(HOLE):
            if block.count(0) == len(block):
                dst.seek(len(block), 1)
            else:
                dst.write(block)
        dst.truncate()  # a trailing hole: the length is the source's
    shutil.copystat(source, target)
