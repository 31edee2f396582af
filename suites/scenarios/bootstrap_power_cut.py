"""bootstrap-power-cut: a broker's new disk formatted, then its power cut before its first
start.

`kafka-storage format` writes the node's bootstrap metadata (the metadata.version and the
other feature levels) into `bootstrap.checkpoint` in the metadata log dir: from 3.3 (KIP-778)
to 4.3, BootstrapDirectory.writeBinaryFile writes `bootstrap.checkpoint.tmp` through a
BatchFileWriter whose close never forces the file, then moves it into place. The format
then writes meta.properties (PropertiesUtils with fsync, its rename followed by a fsync of
the directory): the directory's entries are durable, bootstrap.checkpoint's data is not. Every
KRaft node reads that file as it starts (KafkaRaftServer.initializeLogDirs, BootstrapDirectory
.read): a file that lost its data leaves no FeatureLevelRecord for metadata.version, and the
node refuses to start until it is formatted again. From 4.4.0 (KIP-1170, KAFKA-19648,
apache/kafka#20707) the format writes the bootstrap as the metadata log's first snapshot
through a snapshot writer, and only a controller reads it.

An operator's routine makes the window: a broker's disk is replaced (or a broker added), its
storage formatted, and the node started moments later. On broker C (b3), with its log dir
on a crash-simulating filesystem:
  1. C stops cleanly; its log dir is emptied and the OS writes that back (a new disk);
  2. C starts: its start script formats the empty log dir and is held before the broker
     starts (fixtures.config.HOLD_AFTER_FORMAT), bootstrap.checkpoint unsynced;
  3. C loses power;
  4. C starts on what survived: it must serve, and rejoin with no acknowledged write lost.

Under `ordered` it holds: the fsync of meta.properties commits the journal, bootstrap's size
change with it, and ALICE's ext4 writes an append's data before the size that exposes it.
Real ext4 does not: it delays allocation, and `auto_da_alloc` covers a rename over an
existing file only, which this one is not. On Debian's 6.1 kernel the file came back empty
(docs/findings/real-kernel/, run without logfork); the model's limit is named in
docs/clusters.md.
"""

from __future__ import annotations

import shutil
from typing import Any

from faults import power, process
from fixtures.cluster import ClusterSpec
from fixtures.config import HELD_AFTER_FORMAT, HOLD_AFTER_FORMAT
from fixtures.crashfs import Status
from fixtures.nodes import Node
from fixtures.waiting import WaitTimeout, wait_until
from runrecord.outcome import UNSTARTABLE, Symptom
from runrecord.power import ORDERED, UNSYNCED
from suites import steps
from suites.broker_logs import log_lines, log_mark
from suites.scenario import Finding, RunContext, Scenario, Topic

TOPIC = "formatted"
A, B, C = 1, 2, 3
RECORDS = 5
BOOTSTRAP = "bootstrap.checkpoint"
# 4.4.0's bootstrap: the metadata log's first snapshot (KIP-1170)
SNAPSHOT = "__cluster_metadata-0/00000000000000000000-0000000000.checkpoint"
WHY_NOT = ("ERROR", "FATAL")


def spec(kafka: str, mode: str) -> ClusterSpec:
    return ClusterSpec(kafka, mode, brokers=3)


def _bootstrap_pending(status: Status) -> dict[str, Any]:
    """What the format left unsynced of the bootstrap files, and the names not durable."""
    return {
        "unsynced": {
            path: {"bytes": u.bytes, "size": u.size, "durable_size": u.durable_size}
            for path, u in status.unsynced.items()
            if path.startswith((BOOTSTRAP, SNAPSHOT))
        },
        "namespace_pending": [f"{n.op} {n.path}" for n in status.namespace_pending],
    }


def _replace_disk(ctx: RunContext, c: Node) -> None:
    """1. C stopped cleanly and its log dir emptied, durably: a new disk."""
    process.kill(ctx.cluster, c, signal="SIGTERM")
    for log_dir in c.log_dirs:
        for entry in log_dir.iterdir():
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    power.writeback(ctx.cluster, c)
    left = {d.name: sorted(p.name for p in d.iterdir()) for d in c.log_dirs}
    ctx.expect(not any(left.values()), "1: C's log dir empty (a new disk)", left)


def _format_held(ctx: RunContext, c: Node) -> list[str]:
    """2. C started, formatted and held before the broker starts; what the format wrote."""
    hold, held = c.config_dir / HOLD_AFTER_FORMAT, c.config_dir / HELD_AFTER_FORMAT
    held.unlink(missing_ok=True)
    hold.touch()
    c.start()
    try:
        wait_until(held.exists, bool, what="2: C formatted and held before it starts", timeout=90)
    except WaitTimeout as exc:
        ctx.expect(False, exc.what, c.tail_log())
    data = c.log_dirs[0]
    wrote = sorted(str(p.relative_to(data)) for p in data.rglob("*") if p.is_file())
    ctx.expect("meta.properties" in wrote, "2: the format wrote meta.properties", wrote)
    return wrote


def _start(ctx: RunContext, c: Node) -> str | None:
    """4. C started on what survived: None once it serves, else the line it exited on."""
    for name in (HOLD_AFTER_FORMAT, HELD_AFTER_FORMAT):
        (c.config_dir / name).unlink(missing_ok=True)
    mark = log_mark(c)
    try:
        process.restart(ctx.cluster, c)
    except process.Exited:
        # The error line, and the exception under it that says why.
        lines = [ln.strip() for ln in log_lines(c, "", since=mark)]
        at = next((i for i, ln in enumerate(lines) if any(w in ln for w in WHY_NOT)), None)
        if at is None:
            line = c.tail_log().strip()[:400]
        else:
            cause = [ln for ln in lines[at + 1 : at + 3] if "Exception" in ln][:1]
            line = " ".join([lines[at][:300], *(ln[:400] for ln in cause)])
        ctx.timeline.record("note", "cannot-start", node=c.name, line=line)
        return line
    return None


def body(ctx: RunContext) -> Finding:
    cluster, c = ctx.cluster, ctx.broker(C)
    disks = cluster.disks
    mounts = [d.mount for d in disks.of(c)] if disks is not None else []
    ctx.expect(len(mounts) == 1, "0: C's log dir on a crash-simulating mount", mounts)
    sends = steps.produce_batch(ctx, TOPIC, RECORDS, to=A, acks="all")

    _replace_disk(ctx, c)
    wrote = _format_held(ctx, c)
    pending = _bootstrap_pending(mounts[0].status())
    ctx.timeline.record("note", "formatted", wrote=wrote, **pending)

    # 3. The power cut, while C is held before its start.
    power.power_loss(cluster, c, seed=C)
    report = disks.of(c)[0].crashes[-1] if disks is not None else None
    bootstrap = {
        f.path: {"size_before": f.size_before, "size_after": f.size_after, "survives": f.survives}
        for f in (report.files if report is not None else ())
        if f.path.startswith((BOOTSTRAP, SNAPSHOT))
    }
    ctx.timeline.record("note", "after-power-cut", bootstrap=bootstrap)

    exited = _start(ctx, c)
    details: dict[str, Any] = {
        "formatted": wrote,
        "pending_after_format": pending,
        "bootstrap_after_power_cut": bootstrap,
    }
    kept = "; ".join(
        f"{path}: {b['size_before']} -> {b['size_after']} bytes"
        + ("" if b["survives"] else " (gone)")
        for path, b in bootstrap.items()
    )
    files = ", ".join(p for p in wrote if p.startswith((BOOTSTRAP, SNAPSHOT))) or "no bootstrap"
    story = (
        f"C's new disk formatted ({files}), then its power cut: "
        f"{kept or 'no bootstrap file lost anything'}"
    )
    if exited is not None:
        details["exited"] = exited
        return Finding(
            Symptom(UNSTARTABLE, replicas=[C]), f"{story}; C cannot start: {exited}", details
        )
    observed, said, judged = steps.judge_loss(ctx, TOPIC, sends, [A, B, C])
    return Finding(observed, f"{story}; C started and rejoined; {said}", {**details, **judged})


SCENARIO = Scenario(
    id="bootstrap-power-cut",
    title="A broker's new disk formatted, then its power cut before its first start",
    body=body,
    cluster=spec,
    topic=Topic.fixed(TOPIC, [A, B, C], **{"min.insync.replicas": 2}),
    fixed_in="4.4.0",  # KIP-1170 (KAFKA-19648): the bootstrap written as a synced snapshot
    modes=("kraft",),
    min_release="3.3.0",
    min_release_reason="kafka-storage format writes bootstrap.checkpoint from 3.3 (KIP-778)",
    power_models=(UNSYNCED, ORDERED),
    safe_under={
        ORDERED: "the format's fsync of meta.properties commits the journal, and with it "
        "bootstrap.checkpoint's size and the data under it (ALICE's ordered rule; real ext4, "
        "which delays allocation, loses the file: docs/findings/real-kernel/)"
    },
    symptom=Symptom(UNSTARTABLE, replicas=[C]),
)
