"""Power loss: the node stops at once, and its disks keep only what was durable.

Kafka does not fsync appends (log.flush.* default to never); the page cache holds them until
the OS writes back. Two ways to say what a power cut leaves, chosen per fault (the model is
recorded in the timeline):

- "cut" (the first wave's model, kept so that old runs replay the same): SIGKILL, then
  each partition's log is cut at its checkpointed recovery point, or at a chosen offset, on a
  batch boundary: KIP-101 scenario 2's "messages are flushed asynchronously". Checkpoint
  files are assumed to survive, except that a recovery point above the new log end is
  lowered (the recovery pass then rebuilds the truncated segment's indexes).
- "unsynced", "torn", "reorder": the node's log dirs sit on a crash-simulating filesystem
  (fixtures.disks), which loses every write, create, rename, unlink and truncate that no
  fsync made durable, in every file (segments, indexes, every checkpoint, the clean-shutdown
  marker, the KRaft metadata log); "torn" keeps a prefix of each file's unsynced pages,
  "reorder" any subset; "ordered" loses what ext4 in data=ordered mode loses (metadata as
  an ordered prefix committed by any fsync, appends only with their size change). The node
  is frozen, its disks rolled back, then killed; what each file lost is recorded. What the
  filesystem keeps is decided by the broker's own fsyncs (and by `writeback`, the OS writing
  dirty pages back on its own).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from basics.errors import NotReached, Refused
from checkers.checkpoints import read_offset_checkpoint
from checkers.segments import scan_partition
from faults import process
from fixtures.cluster import Cluster
from fixtures.nodes import Node
from runrecord.power import CUT
from runrecord.typed import to_json, write_text

RECOVERY_POINT = "recovery-point-offset-checkpoint"
_COMPANIONS = (".index", ".timeindex", ".txnindex")


@dataclass(frozen=True)
class Loss:
    topic: str
    partition: int
    cut_at: int | None  # the offset asked for (None: a filesystem model decided)
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
        raise Refused(f"cannot simulate power loss on {pdir}: {scan.errors[0]}")
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
    write_text(path, "\n".join(lines) + "\n")


def power_loss(
    cluster: Cluster,
    node: Node,
    *,
    cut_at: dict[tuple[str, int], int] | None = None,
    topics: set[str] | None = None,
    lose: int | None = None,
    model: str | None = None,
    seed: int = 0,
) -> dict[tuple[str, int], Loss]:
    """Cut the node's power under `model` (default: the cluster's). "cut": kill it and cut
    each partition after its recovery point (or at `cut_at`; `lose`: drop only the last
    `lose` batches, never below the recovery point). A filesystem model decides itself
    what is lost (`cut_at` and `lose` do not apply); `seed` draws what "torn", "reorder" and
    "ordered" keep."""
    model = model or cluster.power_model
    if model != CUT:
        if cut_at is not None or lose is not None:
            raise ValueError(f"the {model} model decides what is lost: no cut_at or lose")
        return _filesystem_loss(cluster, node, model, seed, topics)
    process.kill(cluster, node)
    losses: dict[tuple[str, int], Loss] = {}
    where: dict[tuple[str, int], Path] = {}
    # Every log dir (JBOD, KIP-112), each with its own recovery points: a partition in the
    # second dir loses its unflushed tail like one in the first.
    for data_dir in node.log_dirs:
        checkpoint = data_dir / RECOVERY_POINT
        points = read_offset_checkpoint(checkpoint) if checkpoint.exists() else {}
        cut_here = {}
        for tp, pdir in _partition_dirs(data_dir, topics).items():
            target = (cut_at or {}).get(tp, points.get(tp, 0))
            if lose is not None and tp not in (cut_at or {}):
                batches = scan_partition(pdir).batches
                last_kept = batches[-lose].base_offset if lose <= len(batches) else 0
                target = max(target, last_kept)
            before, after, dropped = truncate_partition(pdir, target)
            losses[tp], where[tp] = Loss(tp[0], tp[1], target, before, after, dropped), pdir
            cut_here[tp] = after
        if points:
            _lower_recovery_points(data_dir, cut_here)
    # Check the effect the way the checker will see it.
    for tp, loss in losses.items():
        scan = scan_partition(where[tp])
        end = scan.batches[-1].last_offset + 1 if scan.batches else loss.end_after
        if end != loss.end_after or end > loss.cut_at:
            raise NotReached(
                f"{node.name}'s {tp[0]}-{tp[1]} cut at {loss.cut_at}", f"log end offset {end}"
            )
    cluster.timeline.record(
        "fault",
        "power-loss",
        node=node.name,
        model=CUT,
        losses={f"{t}-{p}": [x.end_before, x.end_after] for (t, p), x in losses.items()},
    )
    return losses


def _log_ends(node: Node, topics: set[str] | None) -> dict[tuple[str, int], tuple[int, int]]:
    """Each partition's (log end, bytes of segments), over all the node's log dirs."""
    ends = {}
    for data_dir in node.log_dirs:
        for tp, pdir in _partition_dirs(data_dir, topics).items():
            scan = scan_partition(pdir)
            end = scan.batches[-1].last_offset + 1 if scan.batches else 0
            ends[tp] = (end, sum(s.size for s in scan.segments))
    return ends


def outage(
    cluster: Cluster,
    nodes: list[Node],
    *,
    model: str | None = None,
    seed: int = 0,
    topics: set[str] | None = None,
) -> dict[str, dict[tuple[str, int], Loss]]:
    """A power cut of several nodes at once (a rack's or a datacenter's): every node frozen
    first, so that none writes or fsyncs after another lost power, then each rolled back
    under the filesystem model (default: the cluster's) and killed. Per node, its losses."""
    model = model or cluster.power_model
    if model == CUT:
        raise ValueError("an outage needs a filesystem model: the cut model loses per node")
    before = {}
    for node in nodes:
        before[node.name] = _frozen(cluster, node, model, topics)
    return {
        node.name: _roll_back(cluster, node, model, seed + 100 * i, topics, before[node.name])
        for i, node in enumerate(nodes)
    }


def _frozen(
    cluster: Cluster, node: Node, model: str, topics: set[str] | None
) -> dict[tuple[str, int], tuple[int, int]]:
    """The node frozen (it does nothing more, as at a power cut) on its crash-simulating
    disks; its partitions' log ends just before."""
    disks = cluster.disks
    if disks is None or not disks.of(node):
        raise NotReached(
            f"{node.name}'s log dirs on a crash-simulating filesystem ({model})",
            f"the cluster was started with power model {cluster.power_model}",
        )
    if node.status() != "running":
        raise NotReached(f"{node.name} running before its power loss", f"status {node.status()}")
    before = _log_ends(node, topics)
    process.pause(cluster, node)
    return before


def _filesystem_loss(
    cluster: Cluster, node: Node, model: str, seed: int, topics: set[str] | None
) -> dict[tuple[str, int], Loss]:
    """Freeze the node, roll its disks back under the model, kill it, and mount the
    survivors for its next start."""
    before = _frozen(cluster, node, model, topics)
    return _roll_back(cluster, node, model, seed, topics, before)


def _roll_back(
    cluster: Cluster,
    node: Node,
    model: str,
    seed: int,
    topics: set[str] | None,
    before: dict[tuple[str, int], tuple[int, int]],
) -> dict[tuple[str, int], Loss]:
    """A frozen node's disks rolled back under the model; the node killed, its survivors
    mounted for its next start, and what each file lost recorded."""
    disks = cluster.disks
    assert disks is not None  # _frozen checked
    reports = disks.crash(node, model, seed)  # type: ignore[arg-type]
    node.kill("SIGKILL")  # a frozen container dies at once; nothing it held runs again
    process.await_status(node, {"exited"}, "exited after its power loss")
    disks.remount(node)
    after = _log_ends(node, topics)
    losses = {
        tp: Loss(tp[0], tp[1], None, end, after.get(tp, (0, 0))[0], size - after.get(tp, (0, 0))[1])
        for tp, (end, size) in before.items()
    }
    cluster.timeline.record(
        "fault",
        "power-loss",
        node=node.name,
        model=model,
        seed=seed,
        losses={f"{t}-{p}": [x.end_before, x.end_after] for (t, p), x in losses.items()},
        dropped=[
            {
                "log_dir": disk.log_dir.name,
                "files": [to_json(f) for f in report.files],
                "namespace": [to_json(n) for n in report.namespace],
            }
            for disk, report in zip(disks.of(node), reports, strict=True)
        ],
    )
    return losses


def writeback(cluster: Cluster, node: Node) -> None:
    """The OS writes back every dirty page of the node's disks (and their directories) on
    its own, as its flusher threads do seconds after a write: what was written so far
    survives a later power loss. Only on a crash-simulating filesystem."""
    if cluster.disks is None:
        raise NotReached(f"{node.name}'s disks on a crash-simulating filesystem", "none")
    cluster.disks.writeback(node)
    cluster.timeline.record("note", "writeback", node=node.name)
