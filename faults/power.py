"""Simulated power loss: SIGKILL a node, then drop what an OS crash would have lost.

Kafka does not fsync appends (log.flush.* default to never); the page cache holds them until
the OS writes back. After a power cut a partition keeps roughly what was flushed at its
recovery point, and loses the tail after it: KIP-101 scenario 2's "messages are flushed
asynchronously". logfork cuts each partition's log at its checkpointed recovery point, or at
a chosen offset, on a batch boundary. Checkpoint files are written with fsync, so they
survive, except that a recovery point above the new log end is lowered (the recovery pass
then rebuilds the truncated segment's indexes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from checkers.checkpoints import read_offset_checkpoint
from checkers.segments import scan_partition
from faults import process
from fixtures.cluster import Cluster
from fixtures.errors import LogforkError, NotReached
from fixtures.nodes import Node

RECOVERY_POINT = "recovery-point-offset-checkpoint"
_COMPANIONS = (".index", ".timeindex", ".txnindex")


@dataclass(frozen=True)
class Loss:
    topic: str
    partition: int
    cut_at: int  # the offset asked for
    end_before: int
    end_after: int  # on a batch boundary at or below cut_at
    bytes_dropped: int


def _partition_dirs(data_dir: Path, topics: set[str] | None) -> dict[tuple[str, int], Path]:
    out = {}
    for entry in data_dir.iterdir():
        topic, _, part = entry.name.rpartition("-")
        wanted = topics is None or topic in topics
        if entry.is_dir() and part.isdigit() and topic and not topic.startswith("__") and wanted:
            out[(topic, int(part))] = entry
    return out


def truncate_partition(pdir: Path, cut_at: int) -> tuple[int, int, int]:
    """Cut a partition dir's log at the last batch boundary <= cut_at.
    Returns (end before, end after, bytes dropped)."""
    scan = scan_partition(pdir)
    if scan.errors:
        raise LogforkError(f"cannot simulate power loss on {pdir}: {scan.errors[0]}")
    end_before = scan.batches[-1].last_offset + 1 if scan.batches else 0
    keep = [b for b in scan.batches if b.last_offset < cut_at]
    end_after = (
        keep[-1].last_offset + 1 if keep else (scan.segments[0].base_offset if scan.segments else 0)
    )
    dropped = 0
    first_lost = next((b for b in scan.batches if b.last_offset >= cut_at), None)
    if first_lost is None:
        return end_before, end_before, 0
    for segment in scan.segments:
        stem = segment.path.with_suffix("")
        if segment.name == first_lost.segment:
            dropped += segment.size - first_lost.position
            os.truncate(segment.path, first_lost.position)
        elif segment.base_offset > first_lost.base_offset:
            dropped += segment.size
            segment.path.unlink()
        else:
            continue
        # Kafka rebuilds a missing index on load; a stale one could point past the end.
        for suffix in _COMPANIONS:
            Path(f"{stem}{suffix}").unlink(missing_ok=True)
    for snapshot in pdir.glob("*.snapshot"):  # producer state written after the cut is gone
        if snapshot.stem.isdigit() and int(snapshot.stem) > end_after:
            snapshot.unlink()
    return end_before, end_after, dropped


def _lower_recovery_points(data_dir: Path, ends: dict[tuple[str, int], int]) -> None:
    path = data_dir / RECOVERY_POINT
    points = read_offset_checkpoint(path)
    lowered = {tp: min(off, ends.get(tp, off)) for tp, off in points.items()}
    lines = ["0", str(len(lowered))] + [f"{t} {p} {o}" for (t, p), o in sorted(lowered.items())]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)


def power_loss(
    cluster: Cluster,
    node: Node,
    *,
    cut_at: dict[tuple[str, int], int] | None = None,
    topics: set[str] | None = None,
    lose: int | None = None,
) -> dict[tuple[str, int], Loss]:
    """Kill the node and cut each partition after its recovery point (or at `cut_at`).
    `lose`: drop only the last `lose` batches, never below the recovery point."""
    process.kill(cluster, node)
    points = read_offset_checkpoint(node.data_dir / RECOVERY_POINT)
    losses: dict[tuple[str, int], Loss] = {}
    for tp, pdir in _partition_dirs(node.data_dir, topics).items():
        target = (cut_at or {}).get(tp, points.get(tp, 0))
        if lose is not None and tp not in (cut_at or {}):
            batches = scan_partition(pdir).batches
            last_kept = batches[-lose].base_offset if lose <= len(batches) else 0
            target = max(target, last_kept)
        before, after, dropped = truncate_partition(pdir, target)
        losses[tp] = Loss(tp[0], tp[1], target, before, after, dropped)
    _lower_recovery_points(node.data_dir, {tp: loss.end_after for tp, loss in losses.items()})
    # Check the effect the way the checker will see it.
    for tp, loss in losses.items():
        scan = scan_partition(_partition_dirs(node.data_dir, {tp[0]})[tp])
        end = scan.batches[-1].last_offset + 1 if scan.batches else loss.end_after
        if end != loss.end_after or end > loss.cut_at:
            raise NotReached(
                f"{node.name}'s {tp[0]}-{tp[1]} cut at {loss.cut_at}", f"log end offset {end}"
            )
    cluster.timeline.record(
        "fault",
        "power-loss",
        node=node.name,
        losses={f"{t}-{p}": [x.end_before, x.end_after] for (t, p), x in losses.items()},
    )
    return losses
