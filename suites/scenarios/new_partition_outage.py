"""new-partition-outage: every write of a new partition fsynced on every replica before its
acknowledgement, then a power cut of all of them, before anything fsyncs the log dirs.

LogManager creates a partition's directory (LogManager.createLogDirectory, then
UnifiedLog.create) with Files.createDirectories and never fsyncs the log dir that holds it,
on every release line from 3.0 to 4.4. KAFKA-3968 (3.0.0) fsyncs the partition directory when
a segment rolls, not its parent. The log dir itself is fsynced only by the next checkpoint
written in its root: the high watermarks' (replica.high.watermark.checkpoint.interval.ms,
5 s by default), the recovery points' or the log start offsets' (60 s). Under POSIX's rules a
power loss before then takes the partition's whole directory with it, fsynced data and all:
with flush.messages=1, which users set to survive a correlated power loss, an outage of
every replica within seconds of the partition's creation loses every write it
acknowledged, on every replica at once, and the replicas agree on the empty log.

On ext4 it holds: ext4 keeps one journal, and the first segment's fsync commits every
metadata change made before it, the directory's creation included (`ordered`). XFS's single
log behaves the same; only a filesystem that keeps each directory's entries apart, as POSIX
allows, loses the partition. So this is a hardening case, not a loss users see on Linux.

Every broker's checkpoint intervals are raised to 120 s, so that the window (up to 5 s
with the defaults) does not close by chance before the outage. The high-watermark thread
starts when a broker first hosts a partition (ReplicaManager.becomeLeaderOrFollower, or the
first metadata publish in KRaft) and checkpoints at once, so a resident topic is hosted
first; the new partition's creation comes after that first checkpoint.

  1. `resident` on all three brokers, one batch written (the checkpoint threads started);
  2. `fresh` created on all three with flush.messages=1 and min.insync.replicas=2;
  3. acks=all batches acknowledged by its leader, each fsynced on every replica (the
     crash-simulating filesystems show no unsynced byte in its segments) while the
     creation of `fresh-0` is still pending in every broker's log dir;
  4. every broker loses power at once (all frozen, then each rolled back);
  5. all restart, and no acknowledged write may be lost.
"""

from __future__ import annotations

from typing import Any

from faults import power, process
from fixtures.cluster import ClusterSpec
from fixtures.crashfs import Status
from fixtures.waiting import WaitTimeout, wait_until
from runrecord.outcome import LOST, Symptom
from runrecord.power import ORDERED, UNSYNCED
from suites import steps
from suites.scenario import Finding, RunContext, Scenario, Topic

RESIDENT, TOPIC = "resident", "fresh"
A, B, C = 1, 2, 3
BROKERS = [A, B, C]
BATCHES, RECORDS = 5, 2
CHECKPOINT_MS = 120_000  # Kafka's defaults: 5000 (high watermarks), 60000 (the others)
PDIR = f"{TOPIC}-0"


# Every broker's checkpoints in its log dir root, each of which fsyncs the log dir.
CHECKPOINTS = {
    f"{name}.interval.ms": CHECKPOINT_MS
    for name in (
        "replica.high.watermark.checkpoint",
        "log.flush.offset.checkpoint",
        "log.flush.start.offset.checkpoint",
    )
}


def spec(kafka: str, mode: str) -> ClusterSpec:
    controller = C if mode == "zk" else None
    return ClusterSpec(kafka, mode, brokers=3, controller=controller, broker_config=CHECKPOINTS)


def _held(status: Status) -> dict[str, Any]:
    """What a broker's log dir still holds pending for the new partition."""
    return {
        "directory_pending": [
            f"{n.op} {n.path}" for n in status.namespace_pending if n.path == PDIR
        ],
        "unsynced_segment_bytes": sum(
            u.bytes
            for path, u in status.unsynced.items()
            if path.startswith(f"{PDIR}/") and path.endswith(".log")
        ),
    }


def body(ctx: RunContext) -> Finding:
    cluster = ctx.cluster
    nodes = [ctx.broker(b) for b in BROKERS]
    assert cluster.disks is not None
    mounts = {b: cluster.disks.of(n)[0].mount for b, n in zip(BROKERS, nodes, strict=True)}
    steps.produce_batch(ctx, RESIDENT, RECORDS, to=A, acks="all")
    if cluster.mode == "zk":
        # The first LeaderAndIsr started the checkpoint thread, which checkpoints at once: let
        # that one pass first. (A KRaft broker started it at its first metadata publish,
        # hosting nothing, so wrote nothing: its next checkpoint is CHECKPOINT_MS on.)
        for b in BROKERS:
            try:
                wait_until(lambda b=b: steps.checkpointed_hw(cluster, b, RESIDENT),
                           lambda hw: hw is not None, timeout=30,
                           what=f"1: broker {b}'s first high-watermark checkpoint")  # fmt: skip
            except WaitTimeout as exc:
                ctx.expect(False, exc.what, exc.last)

    cluster.create_topic(TOPIC, [BROKERS], {"flush.messages": 1, "min.insync.replicas": 2})
    sends = []
    for _ in range(BATCHES):
        sends += steps.produce_batch(ctx, TOPIC, RECORDS, to=A, acks="all")
    held = {f"b{b}": _held(m.status()) for b, m in mounts.items()}
    ctx.timeline.record("note", "pending-before-the-outage", **held)
    synced = all(h["unsynced_segment_bytes"] == 0 for h in held.values())
    ctx.expect(synced, f"3: every acknowledged write of {PDIR} fsynced on every replica", held)
    pending = all(h["directory_pending"] == [f"mkdir {PDIR}"] for h in held.values())
    ctx.expect(pending, f"3: the creation of {PDIR} not yet synced in any log dir", held)

    losses = power.outage(cluster, nodes, seed=cluster.spec.brokers)
    kept = {f"b{b}": (ctx.broker(b).data_dir / PDIR).is_dir() for b in BROKERS}
    ends = {name: {f"{t}-{p}": [x.end_before, x.end_after] for (t, p), x in loss.items()}
            for name, loss in losses.items()}  # fmt: skip
    ctx.timeline.record("note", "after-the-outage", directory_kept=kept)
    for node in nodes:
        process.restart(cluster, node)
    observed, said, details = steps.judge_loss(ctx, TOPIC, sends, BROKERS)
    story = (
        f"{len(sends)} acks=all records in {BATCHES} batches, each fsynced on all three "
        f"replicas (flush.messages=1) before its acknowledgement; then all three lost power "
        f"with {PDIR}'s creation not synced in their log dirs; the directory was "
        + ", ".join(f"{'kept' if k else 'lost'} on {n}" for n, k in kept.items())
    )
    details = {**details, "before_the_outage": held, "directory_kept": kept, "log_ends": ends}
    return Finding(observed, f"{story}; {said}", details)


NEVER_SYNCED = (
    "no release fsyncs a log dir after creating a partition's directory in it "
    "(LogManager.createLogDirectory); only the next checkpoint in the log dir's root does"
)

SCENARIO = Scenario(
    id="new-partition-outage",
    title="A new partition's fsynced writes, then every replica's power lost before its "
    "directory is synced in the log dir",
    body=body,
    cluster=spec,
    topic=Topic.fixed(RESIDENT, BROKERS, **{"min.insync.replicas": 2}),
    # Before KAFKA-3968 no directory is ever fsynced, the partition's own entries included:
    # the loss is older, and wider, than this scenario's.
    min_release="3.0.0",
    min_release_reason="before 3.0 (KAFKA-3968) Kafka syncs no directory at all",
    unfixed={"zk": NEVER_SYNCED, "kraft": NEVER_SYNCED},
    power_models=(UNSYNCED, ORDERED),
    safe_under={
        ORDERED: "ext4 commits one journal, so the first segment's fsync makes the "
        "directory's earlier creation durable too"
    },
    symptom=Symptom(LOST, offset=0),
)
