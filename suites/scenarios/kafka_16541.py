"""KAFKA-16541: a leader-epoch-checkpoint rewritten without fsync, then a power loss.

KAFKA-15046 (3.7.0) stopped fsyncing the leader-epoch-checkpoint when the epoch cache is
truncated (LeaderEpochFileCache.truncateFromStart/End): the new contents go to a temporary
file, which is renamed over the checkpoint, with neither the file nor its directory synced.
The rename becomes durable at the next fsync of the partition directory, which a segment
roll does (the flush of the rolled segment syncs its directory, KAFKA-3968, 3.0.0), while
the file's data may still be only in the page cache. A power loss then leaves the checkpoint
empty. apache/kafka#15993 (3.8.0) writes it again with fsync, asynchronously, and syncs the
directory; 3.7.1 and 3.7.2 do not have it.

On broker A (b1), the leader of the scenario's partition, on a crash-simulating filesystem:
  1. four batches in one epoch; the checkpoint holds [(e, 0)], durable;
  2. DeleteRecords to offset 10: A's epoch cache is truncated from its start, and the
     checkpoint reads [(e, 10)] (the precondition on every release);
  3. A rolls a segment and flushes the rolled one (the crash-simulating filesystem shows
     its pages synced): that flush syncs the partition directory;
  4. A loses power; its checkpoint as the disk kept it is read; A restarts and must serve.
Before the fix the checkpoint is empty after the power loss (its rename survived, its data
did not); from the fix on it holds either its old or its new contents, whole.
"""

from __future__ import annotations

from pathlib import Path

from checkers.checkpoints import LEADER_EPOCH_CHECKPOINT, read_leader_epoch_checkpoint
from checkers.errors import LogReadError
from faults import power, process
from fixtures.cluster import ClusterSpec
from fixtures.config import EXTERNAL_PORT
from fixtures.waiting import WaitTimeout, wait_until
from observe import wire
from observe.replicas import replica
from runrecord.events import DELETE_RECORDS, EventKind
from runrecord.outcome import CONSISTENT, VIOLATED, Symptom
from runrecord.power import FS_MODELS, ORDERED
from suites import steps
from suites.convergence import converge
from suites.scenario import Finding, RunContext, Scenario, Topic

TOPIC = "epochckpt"
A, B = 1, 2
BATCHES, RECORDS = 4, 5
DELETE_TO = 10
SEGMENT_MS = 1000  # a segment rolls on the first append a second after it began


def spec(kafka: str, mode: str) -> ClusterSpec:
    return ClusterSpec(kafka, mode, brokers=3, controller=3 if mode == "zk" else None)


def read_checkpoint(path: Path) -> list[tuple[int, int]] | str:
    """The checkpoint's entries, or what is wrong with the file."""
    if not path.exists():
        return "missing"
    if path.stat().st_size == 0:
        return "empty (0 bytes)"
    try:
        return read_leader_epoch_checkpoint(path)
    except LogReadError as exc:
        return f"unreadable: {exc}"


def _delete_records(ctx: RunContext, offset: int) -> None:
    port = ctx.broker(A).published[EXTERNAL_PORT]
    with wire.Connection("127.0.0.1", port) as conn:
        answer = conn.delete_records(TOPIC, 0, offset)
    ctx.expect(answer.error == "NONE", f"DeleteRecords to {offset} accepted", answer)
    ctx.timeline.record(EventKind.FAULT, DELETE_RECORDS, topic=TOPIC, partition=0, offset=offset,
                        answer=str(answer))  # fmt: skip


def _roll_and_flush(ctx: RunContext) -> dict[str, object]:
    """Batches until A's log has rolled past the deletion and a flush of a rolled segment
    has synced the partition directory: every segment's creation durable on A's
    crash-simulating disk. (The first roll after a DeleteRecords may not sync it: its flush
    starts at the recovery point the new log start raised, inside the old segment, and
    LocalLog.flush syncs the directory only when it flushes a segment that starts there.)
    What the disk still holds unsynced, for the timeline."""
    cluster, a = ctx.cluster, ctx.broker(A)
    pdir = f"{TOPIC}-0"
    rolled_from = replica(cluster, A, TOPIC).leo
    assert cluster.disks is not None
    mount = cluster.disks.of(a)[0].mount

    def probe() -> tuple[int, list[str]]:
        steps.produce_batch(ctx, TOPIC, 1, to=A, acks="all")
        base = max(int(p.stem) for p in (a.data_dir / pdir).glob("*.log"))
        pending = [n.path for n in mount.status().namespace_pending
                   if n.path.startswith(f"{pdir}/") and n.path.endswith(".log")]  # fmt: skip
        return base, pending

    try:
        base, _ = wait_until(
            probe,
            lambda found: found[0] >= rolled_from and not found[1],
            what="A rolling a segment, and a flush syncing its partition directory",
            timeout=60,
            interval=SEGMENT_MS / 4000,
        )
    except WaitTimeout as exc:
        ctx.expect(False, "3: a roll and a directory sync on A after the deletion", exc.last)
    status = mount.status()
    held = {
        "checkpoint_unsynced": f"{pdir}/{LEADER_EPOCH_CHECKPOINT}" in status.unsynced,
        "namespace_pending": [
            f"{n.op} {n.path}" for n in status.namespace_pending if n.path.startswith(pdir)
        ],
        "last_segment": base,
    }
    ctx.timeline.record("note", "rolled", **held)
    return held


def _await_partition_dir_durable(ctx: RunContext) -> None:
    """The partition directory's creation made durable in A's log dir. Kafka creates it
    and never syncs the log dir for it (LogManager.createLogDirectory): only the next
    checkpoint written in the log dir's root (the high watermarks', every 5 s) does. Until
    then a power loss drops the whole directory, which is not KAFKA-16541's loss."""
    assert ctx.cluster.disks is not None
    mount = ctx.cluster.disks.of(ctx.broker(A))[0].mount
    pdir = f"{TOPIC}-0"
    try:
        wait_until(
            lambda: [
                f"{n.op} {n.path}" for n in mount.status().namespace_pending if n.path == pdir
            ],
            lambda pending: not pending,
            what=f"the creation of {pdir} durable in A's log dir",
            timeout=30,
        )
    except WaitTimeout as exc:
        ctx.expect(False, f"0: the creation of {pdir} synced in A's log dir", exc.last)


def body(ctx: RunContext) -> Finding:
    cluster, a = ctx.cluster, ctx.broker(A)
    for _ in range(BATCHES):
        steps.produce_batch(ctx, TOPIC, RECORDS, to=A, acks="all")
    _await_partition_dir_durable(ctx)
    path = a.data_dir / f"{TOPIC}-0" / LEADER_EPOCH_CHECKPOINT
    before = read_checkpoint(path)
    ctx.expect(isinstance(before, list) and len(before) == 1 and before[0][1] == 0,
               "1: A's checkpoint holds one epoch from offset 0", before)  # fmt: skip
    assert isinstance(before, list)
    epoch = before[0][0]

    _delete_records(ctx, DELETE_TO)
    truncated = [(epoch, DELETE_TO)]
    try:
        wait_until(lambda: read_checkpoint(path), lambda e: e == truncated, timeout=30,
                   what=f"2: A's checkpoint truncated from its start to {truncated}")  # fmt: skip
    except WaitTimeout as exc:
        ctx.expect(False, f"2: A's checkpoint rewritten as {truncated}", exc.last)
    held = _roll_and_flush(ctx)

    power.power_loss(cluster, a, seed=ctx.cluster.spec.brokers)
    after = read_checkpoint(path)
    ctx.timeline.record("note", "checkpoint-after-power-loss", entries=str(after))
    process.restart(cluster, a)
    convergence = converge(ctx, TOPIC, [A, B], timeout=60)
    verdict = steps.judge(ctx, TOPIC)
    reloaded = read_checkpoint(path)
    details = {
        "checkpoint_before": before,
        "checkpoint_truncated": truncated,
        "checkpoint_after_power_loss": after,
        "checkpoint_after_restart": reloaded,
        "at_the_power_loss": held,
        "convergence": convergence.to_dict(),
        "checker": verdict.to_dict(),
    }
    said = (
        f"A's leader-epoch-checkpoint after the power loss: {after}; after its restart: "
        f"{reloaded} (log start {DELETE_TO})"
    )
    if after not in (before, truncated):
        return Finding(Symptom(VIOLATED), f"{said}: neither its old nor its new contents, "
                       "though Kafka wrote both whole", details)  # fmt: skip
    if verdict.status == "diverged":
        return Finding(steps.divergence(verdict), f"{said}; replicas diverged", details)
    if not convergence.converged:
        ctx.expect(False, "A converging with B after its restart", convergence.to_dict())
    return Finding(Symptom(CONSISTENT), f"{said}: whole, and A converged with B", details)


SCENARIO = Scenario(
    id="kafka-16541-epoch-checkpoint",
    title="KAFKA-16541: the leader-epoch-checkpoint truncated without fsync, then power lost",
    body=body,
    cluster=spec,
    topic=Topic.fixed(TOPIC, [A, B], **{"min.insync.replicas": 1, "segment.ms": SEGMENT_MS}),
    jira="KAFKA-16541",
    fixed_in="3.8.0",  # apache/kafka#15993
    broken_since="3.7.0",  # KAFKA-15046 dropped the fsync
    # Before KAFKA-3968 Kafka syncs no directory at all: the partition directory's own
    # creation is never durable (seen on 1.1.1: still pending 30 s on), so a power loss
    # under a filesystem model drops the whole partition, which is not this scenario's loss.
    min_release="3.0.0",
    min_release_reason="before 3.0 (KAFKA-3968) Kafka syncs no directory, so the partition "
    "directory itself is never durable",
    power_models=FS_MODELS,
    # The checkpoint is written to a temporary file and renamed over the old one: ext4 writes
    # such a file's data out before the rename commits (auto_da_alloc, its default; ext4's
    # admin guide), so there the rename never exposes an empty file.
    safe_under={
        ORDERED: "ext4 (auto_da_alloc, its default) writes a file renamed over another "
        "before the rename commits, so the checkpoint comes back old or new, whole; with "
        "noauto_da_alloc the empty checkpoint would be possible"
    },
    symptom=Symptom(VIOLATED),
)
