"""clean-shutdown-marker: writes a broker acknowledged while the deletion of its
clean-shutdown marker was not yet durable, then a power loss.

At start-up LogManager.loadLogs deletes `.kafka_cleanshutdown` from each log dir
(CleanShutdownFileHandler.delete, KAFKA-10471's "a crash while loading is a hard
shutdown") without syncing the directory. The unlink becomes durable with the directory's
next fsync: the first high-watermark checkpoint that writes in that log dir (ReplicaManager.
checkpointHighWatermarks: tmp file, fsync, rename, directory fsync). That checkpoint runs
once the broker hosts a partition there: at its first metadata publish (KRaft) or its first
LeaderAndIsr (ZooKeeper mode), before it serves any write; measured on 3.9.2 (both modes)
and 4.3.1, the unlink is durable 33 to 211 ms before the first write the broker
acknowledges (about 8 s on 4.3.1 when it restarts within its session timeout). The
checkpoint is an asynchronous task: that order is a race it wins, not a guarantee.

A log dir that holds no partition when the broker starts is not checkpointed then: its
unlink stays pending until the checkpoint after a partition lands there
(replica.high.watermark.checkpoint.interval.ms, 5 s) or the first recovery-point
checkpoint (log.initial.task.delay.ms, 30 s), and the broker serves writes meanwhile.

On broker A (b1), with two log dirs on a crash-simulating filesystem:
  1. A hosts `resident` in one log dir, nothing in the other; it stops cleanly, a marker in
     each log dir; the OS writes everything back while A is down (both markers durable);
  2. A restarts: the unlink in the resident log dir is made durable by the checkpoint, the
     empty log dir's stays pending;
  3. a new topic led by A is created: its partition goes to A's empty log dir;
  4. acks=all batches acknowledged by A while that unlink is still pending (proven from
     the crash-simulating filesystem's status after the acknowledgement);
  5. A loses power: the empty log dir's marker is back on disk;
  6. A restarts; its log says what it did with each log dir (recovery skipped, run, or
     nothing to load), and the replicas must converge with no acknowledged write lost.

A's replica.high.watermark.checkpoint.interval.ms is raised to 60 s so that the window
(which the default leaves open for up to 5 s after the partition's creation) does not
close by chance before step 5; nothing else reads that setting. The partition's directory
is created in the same log dir with no directory fsync either (LogManager.
createLogDirectory), so a power loss that brings the marker back takes the new partition
with it: the skipped recovery finds nothing to skip, A creates the partition again and
fetches it from the new leader. Must hold everywhere: a release that kept the partition
but not the unlink would load it unrecovered (a torn last batch kept as live data), and
the audit would say so.

Under `ordered` (ext4) the marker comes back only if the journal's last commit preceded its
deletion, and then nothing written after the deletion survives either: the window needs
POSIX's weakest rules, as with the follower appends below.

Not covered here, since the broker acknowledges nothing in it: in KRaft the restarted
broker's replica fetchers start when BrokerMetadataPublisher applies the first delta,
before it starts the checkpoint thread, so follower appends can precede the unlink's
durability (observed on 3.9.2 and 4.3.1, not in ZooKeeper mode). A torn append cut there is
kept by the skipped recovery, and the broker appends after it.
"""

from __future__ import annotations

from pathlib import Path

from checkers.checkpoints import CLEAN_SHUTDOWN
from faults import power, process
from fixtures.cluster import ClusterSpec
from fixtures.config import NODE_ROOT
from fixtures.crashfs import Mount, Status
from fixtures.nodes import Node
from runrecord.power import ORDERED, TORN, UNSYNCED
from suites import steps
from suites.broker_logs import log_lines, log_mark
from suites.scenario import Finding, RunContext, Scenario, Topic

RESIDENT, TOPIC = "resident", "marker"
A, B, C = 1, 2, 3
BATCHES, RECORDS = 3, 5
HW_CHECKPOINT_MS = 60_000  # Kafka's default: 5000
METADATA_LOG = "__cluster_metadata-"
LOAD_LINES = ("Skipping recovery of", "Recovering ", "No logs found to be loaded in")


def spec(kafka: str, mode: str) -> ClusterSpec:
    return ClusterSpec(
        kafka,
        mode,
        brokers=3,
        controller=C if mode == "zk" else None,
        log_dirs={f"b{A}": 2},
        node_config={f"b{A}": {"replica.high.watermark.checkpoint.interval.ms": HW_CHECKPOINT_MS}},
    )


def _mounts(ctx: RunContext, node: Node) -> list[Mount]:
    disks = ctx.cluster.disks
    mounts = [d.mount for d in disks.of(node)] if disks is not None else []
    ctx.expect(len(mounts) == 2, f"{node.name}'s two log dirs on crash-simulating mounts", mounts)
    return mounts


def _marker_ops(status: Status) -> list[str]:
    """The namespace changes of the marker not yet durable ("unlink", "create")."""
    return [n.op for n in status.namespace_pending if n.path == CLEAN_SHUTDOWN]


def _pending(status: Status) -> list[str]:
    return [f"{n.op} {n.path}" for n in status.namespace_pending]


def _load_lines(node: Node, log_dir: Path, since: int) -> list[str]:
    """What LogManager.loadLogs said about the log dir (as the broker names it) after
    byte `since` of the node's log: skipping recovery, recovering, or nothing to load."""
    named = f" {NODE_ROOT}/{log_dir.name} "
    return [
        ln.split("] ", 1)[-1]
        for ln in log_lines(node, f"{NODE_ROOT}/{log_dir.name}", since=since)
        if named in ln and any(key in ln for key in LOAD_LINES)
    ]


def _recovery(lines: list[str]) -> str:
    if any("Skipping recovery" in ln for ln in lines):
        return "skipped"
    if any(ln.startswith("INFO Recovering") for ln in lines):
        return "ran"
    if any("No logs found" in ln for ln in lines):
        return "nothing to load"
    return "not logged"


def _partitions(log_dir: Path) -> list[str]:
    """The topic partitions in a log dir (the KRaft metadata log's is not one)."""
    return [
        p.name
        for p in log_dir.glob("*-[0-9]*")
        if p.is_dir() and not p.name.startswith(METADATA_LOG)
    ]


def _roles(ctx: RunContext, a: Node) -> tuple[tuple[Path, Mount], tuple[Path, Mount]]:
    """(the log dir holding the resident partition, the empty one), each with its mount:
    A chooses where a new partition goes (the dir with fewest logs; a tie either way)."""
    dirs = list(zip(a.log_dirs, _mounts(ctx, a), strict=True))
    holding = [(d, m) for d, m in dirs if (d / f"{RESIDENT}-0").is_dir()]
    ctx.expect(len(holding) == 1, f"0: A hosting {RESIDENT}-0 in one of its log dirs",
               {d.name: sorted(p.name for p in d.iterdir()) for d, _ in dirs})  # fmt: skip
    empty = [(d, m) for d, m in dirs if not _partitions(d)]
    ctx.expect(len(empty) == 1, "0: A's other log dir holding no partition",
               {d.name: sorted(p.name for p in d.iterdir()) for d, _ in dirs})  # fmt: skip
    return holding[0], empty[0]


def body(ctx: RunContext) -> Finding:
    cluster, a = ctx.cluster, ctx.broker(A)
    # Acknowledged by A: A has applied its leadership, so the partition's log exists.
    steps.produce_batch(ctx, RESIDENT, RECORDS, to=A, acks="all")
    (resident, resident_mount), (empty, mount) = _roles(ctx, a)
    names = {resident: "resident_dir", empty: "empty_dir"}

    # 1. A clean stop, and the OS writing back while A is down.
    process.kill(cluster, a, signal="SIGTERM")
    markers = [(d / CLEAN_SHUTDOWN).exists() for d in a.log_dirs]
    ctx.expect(all(markers), "1: A's clean stop writing the marker in both log dirs", markers)
    power.writeback(cluster, a)
    durable = [_marker_ops(m.status()) for m in (resident_mount, mount)]
    ctx.expect(durable == [[], []], "1: both markers durable before A restarts", durable)

    # 2. A restarts: the empty log dir's marker deleted, the unlink not durable.
    since = log_mark(a)
    process.restart(cluster, a)
    at_restart = {
        names[d]: _pending(m.status()) for d, m in ((resident, resident_mount), (empty, mount))
    }
    ctx.timeline.record("note", "pending-after-restart", **at_restart)
    ctx.expect(not (empty / CLEAN_SHUTDOWN).exists() and _marker_ops(mount.status()) == ["unlink"],
               f"2: the unlink of {empty.name}'s marker pending once A serves",
               at_restart)  # fmt: skip
    first_load = {names[d]: _load_lines(a, d, since) for d in (resident, empty)}

    # 3. A new partition led by A, and 4. writes A acknowledges there. The unlink never
    # becomes pending again once durable, so pending after the last acknowledgement is
    # pending at each.
    cluster.create_topic(TOPIC, [[A, B, C]], {"min.insync.replicas": 2})
    sends = []
    for _ in range(BATCHES):
        sends += steps.produce_batch(ctx, TOPIC, RECORDS, to=A, acks="all")
    at_acks = mount.status()
    placed = [d.name for d in a.log_dirs if (d / f"{TOPIC}-0").is_dir()]
    ctx.expect(placed == [empty.name], f"3: {TOPIC}-0 placed in A's empty log dir {empty.name}",
               placed)  # fmt: skip
    ctx.timeline.record("note", "pending-after-acks", pending=_pending(at_acks))
    ctx.expect(_marker_ops(at_acks) == ["unlink"],
               f"4: the unlink of {empty.name}'s marker still pending after A acknowledged "
               f"{BATCHES} acks=all batches (the window caught)", _pending(at_acks))  # fmt: skip

    # 5. Power loss: the marker is back.
    power.power_loss(cluster, a, seed=cluster.spec.brokers)
    back = (empty / CLEAN_SHUTDOWN).exists()
    kept = (empty / f"{TOPIC}-0").is_dir()
    ctx.timeline.record("note", "after-power-loss", marker_back=back, partition_kept=kept)
    if cluster.power_model == ORDERED:
        # ext4 commits the unlink with any later change its journal commits: the marker
        # comes back only with nothing made after it, so no torn tail stays unrecovered.
        if back and kept:
            raise AssertionError(f"the ordered model kept {TOPIC}-0, made after the marker's "
                                 "deletion, without the deletion")  # fmt: skip
    else:
        ctx.expect(back, f"5: {empty.name}'s marker back on disk after the power loss",
                   sorted(p.name for p in empty.iterdir()))  # fmt: skip

    # 6. A restarts on what survived.
    since = log_mark(a)
    process.restart(cluster, a)
    second_load = {names[d]: _load_lines(a, d, since) for d in (resident, empty)}
    recovery = _recovery(second_load["empty_dir"])
    observed, said, details = steps.judge_loss(ctx, TOPIC, sends, [A, B, C])
    details = {
        **details,
        "log_dirs": {role: d.name for d, role in names.items()},
        "pending_after_restart": at_restart,
        "pending_after_acks": _pending(at_acks),
        "first_start": first_load,
        "marker_back": back,
        "partition_kept_by_the_power_loss": kept,
        "second_start": second_load,
        "recovery_of_empty_dir": recovery,
    }
    story = (
        f"A acknowledged {len(sends)} acks=all records in {BATCHES} batches while the unlink "
        f"of its {empty.name} marker was not durable; after the power loss the marker was "
        f"{'back' if back else 'gone'}, {TOPIC}-0's directory {'kept' if kept else 'lost'}, "
        f"recovery of {empty.name} {recovery}"
    )
    return Finding(observed, f"{story}; {said}", details)


SCENARIO = Scenario(
    id="clean-shutdown-marker",
    title="Writes acknowledged while the clean-shutdown marker's deletion is not durable, "
    "then power lost",
    body=body,
    cluster=spec,
    topic=Topic.fixed(RESIDENT, [A, B, C], **{"min.insync.replicas": 2}),
    jira="KAFKA-10471",
    min_release="3.7.0",
    min_release_reason="a KRaft broker with several log dirs needs 3.7.0 (KIP-858); the "
    "scenario covers the same releases in both modes",
    power_models=(UNSYNCED, TORN, ORDERED),
)
