"""A broker's process and power on real nodes: kill (a crash, a controlled shutdown, or a
fast restart before its session ends), restart, pause, resume, power loss, and an outage of
every broker's power; the model's side is checkers.simulate."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from basics.errors import NotReached
from faults import power, process
from faults.power import Loss
from fixtures.cluster import Cluster
from fixtures.crashfs import CrashReport
from fixtures.nodes import Node
from fixtures.waiting import WaitTimeout, wait_until
from observe import kraft
from runrecord import schedule_roles as roles
from runrecord.power import CUT, PowerCut
from runrecord.steps.processes import Kill, Outage, Pause, PowerLoss, Restart, Resume
from suites.broker_logs import log_lines, log_mark, shutdown_backoffs
from suites.explore.live.registry import action

if TYPE_CHECKING:
    from suites.explore.live.context import Live


@action(Kill)
def kill(live: Live, step: Kill) -> tuple[dict[str, Any], float]:
    view = live.view()

    def ok(b: Any) -> str | None:
        if step.signal == "SIGTERM" and live.alive(b):
            return roles.cannot_shut_down(b, view.controller, live.linked)
        restart = roles.cannot_register(b, live.linked) if step.restart else None
        return live.running(b) or restart

    b = roles.pick(step.target, view, ok, "kill")
    if step.restart:
        return _fast_restart(live, b, step.signal)
    if step.signal == "SIGTERM":
        mark = log_mark(live.node(b))
        process.kill(live.cluster, live.node(b), signal="SIGTERM")
        backoffs = shutdown_backoffs(live.node(b), mark, live.cluster.spec.broker_config)
        return {"broker": b}, backoffs
    waits = live.crash(b, lambda: process.kill(live.cluster, live.node(b)))
    live.note_hw_checkpoint(b)
    return {"broker": b}, waits


def _fast_restart(live: Live, b: int, signal: str) -> tuple[dict[str, Any], float]:
    def start() -> None:
        if signal == "SIGKILL":  # a clean shutdown checkpoints: the model knows it
            live.note_hw_checkpoint(b)
        live.start_broker(b)

    targets, since = fast_restart(live.cluster, live.node(b), b, signal, start)
    # A controller that refused the registration made the broker wait out its session.
    waits = live.session_wait(b, since) if targets["registration_refused"] else 0.0
    return targets, waits


@action(Restart)
def restart(live: Live, step: Restart) -> tuple[dict[str, Any], float]:
    view = live.view()

    def ok(b: Any) -> str | None:
        if live.status(b) != "stopped":
            return live.describe(b)
        return roles.cannot_register(b, live.linked)

    b = roles.pick(step.target, view, ok, "restart")
    # A ZooKeeper-mode broker learns the cluster's metadata from the controller only.
    ctl = view.controller
    serving = ctl is None or ctl == b or live.linked(b, ctl)
    live.start_broker(b, serving=serving)
    return {"broker": b}, 0.0


@action(Pause)
def pause(live: Live, step: Pause) -> tuple[dict[str, Any], float]:
    b = roles.pick(step.target, live.view(), live.running, "pause")
    process.pause(live.cluster, live.node(b))
    return {"broker": b}, 0.0


@action(Resume)
def resume(live: Live, step: Resume) -> tuple[dict[str, Any], float]:
    def ok(b: Any) -> str | None:
        return None if live.status(b) == "paused" else live.describe(b)

    b = roles.pick(step.target, live.view(), ok, "resume")
    process.resume(live.cluster, live.node(b))
    return {"broker": b}, 0.0


@action(PowerLoss)
def power_loss(live: Live, step: PowerLoss) -> tuple[dict[str, Any], float]:
    b = roles.pick(step.target, live.view(), live.running, "cut the power of")
    cut = PowerCut(len(live.history.steps), b)

    def kill() -> None:
        cut_power(live.cluster, live.node(b), step, live.topic, cut)

    waits = live.crash(b, kill)
    live.history.power_cuts.append(cut)
    live.note_hw_checkpoint(b)  # what survived the loss, as the broker will read it
    lost = {p: after - before for p, (before, after) in cut.ends.items() if after != before}
    return {"broker": b, "lost": {str(p): -n for p, n in lost.items()}}, waits


@action(Outage)
def outage(live: Live, step: Outage) -> tuple[dict[str, Any], float]:
    brokers = sorted(live.cluster.brokers)
    paused = [b for b in brokers if live.status(b) == "paused"]
    if paused:  # frozen already: the outage could not freeze it at the same moment
        raise roles.Skip(live.describe(paused[0]))
    running = [b for b in brokers if live.alive(b)]
    if not running:
        raise roles.Skip("no broker is running")
    index = len(live.history.steps)
    since = time.monotonic()
    losses = power.outage(
        live.cluster,
        [live.node(b) for b in running],
        model=step.model,
        seed=step.seed or 0,
        topics={live.topic},
    )
    lost = {}
    for b in running:
        cut = PowerCut(index, b, model=step.model)
        record_cut(live.cluster, live.node(b), losses[live.node(b).name], live.topic, cut)
        live.history.power_cuts.append(cut)
        live.note_hw_checkpoint(b)
        lost |= {f"{b}/{p}": after - before for p, (before, after) in cut.ends.items()}
    # Its effect: the cluster lost every broker (their sessions ended, or KRaft fenced them).
    try:
        wait_until(
            live.cluster.registered_brokers,
            lambda ids: not set(ids) & set(running),
            what="the cluster to lose every broker of the outage",
            timeout=120,
            describe=sorted,
        )
    except WaitTimeout as exc:
        raise NotReached(exc.what, str(exc.last)) from None
    waits = max(live.session_wait(b, since) for b in running)
    return {"brokers": running, "lost": {k: -n for k, n in lost.items() if n}}, waits


def fences(cluster: Cluster, broker: int) -> int:
    """KRaft: how often the metadata log has fenced the broker so far (0 in ZooKeeper
    mode)."""
    if cluster.mode != "kraft":
        return 0
    return len(kraft.fence_offsets(cluster.controllers, broker))


def fast_restart(
    cluster: Cluster, node: Node, broker: int, signal: str, start: Callable[[], None]
) -> tuple[dict[str, Any], float]:
    """Kill the broker, then `start` it at once; proven by it serving again, with what its
    registration met on the way: the refusals of a controller that waits out the old session
    (DUPLICATE_BROKER_REGISTRATION, KRaft from 4.0, KAFKA-18106) and whether it was fenced
    in between. Returns the step's targets and when the kill happened (monotonic)."""
    mark = log_mark(node)
    fenced_before = fences(cluster, broker)
    since = time.monotonic()
    process.kill(cluster, node, signal=signal)
    start()
    refusals = sum(1 for _ in log_lines(node, "DUPLICATE_BROKER_REGISTRATION", since=mark))
    targets = {
        "broker": broker,
        "back_in_seconds": round(time.monotonic() - since, 1),
        "registration_refused": refusals,
        "fenced_meanwhile": fences(cluster, broker) > fenced_before,
    }
    return targets, since


# What a filesystem power loss may roll back without the model noticing: segment data and
# indexes (the model's own logs), producer snapshots, files of other topics, a temporary
# file that never became the file it was for, the broker's copy of the metadata log (it
# fetches it again from the controllers).
_MODELLED_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".tmp")


def unmodelled(reports: list[CrashReport], topic: str) -> list[str]:
    """The files and names a power loss rolled back whose loss the model cannot follow: the
    schedule topic's leader-epoch-checkpoint or partition.metadata, the high watermark
    checkpoint, the clean-shutdown marker, meta.properties."""
    found = []
    for report in reports:
        changed = [f.path for f in report.files if f.dropped or not f.survives]
        changed += [p for n in report.namespace if n.undone for p in (n.path, n.to) if p]
        for path in changed:
            head = path.split("/", 1)[0]
            partition_dir = "/" in path
            if path.endswith(_MODELLED_SUFFIXES) or head.startswith("__cluster_metadata"):
                continue
            if partition_dir and head.rpartition("-")[0] != topic:
                continue
            found.append(path)
    return sorted(set(found))


def cut_power(cluster: Cluster, node: Node, step: PowerLoss, topic: str, cut: PowerCut) -> None:
    """Run a `power-loss` step on the broker (faults.power, on the schedule's topic only),
    filling in `cut` with what it dropped."""
    losses = power.power_loss(
        cluster, node, topics={topic}, lose=step.lose, model=step.power_model, seed=step.seed or 0
    )
    cut.model = step.power_model
    record_cut(cluster, node, losses, topic, cut)


def record_cut(
    cluster: Cluster, node: Node, losses: dict[tuple[str, int], Loss], topic: str, cut: PowerCut
) -> None:
    """Fill in `cut` (its model set) with what a power loss dropped on the node: the
    partitions' log ends, and under a filesystem model the files the model cannot follow."""
    cut.ends = {p: (x.end_before, x.end_after) for (_, p), x in losses.items()}
    if cut.model != CUT and cluster.disks is not None:
        reports = [d.crashes[-1] for d in cluster.disks.of(node) if d.crashes]
        cut.unmodelled = unmodelled(reports, topic)
