"""A broker's process and power (kill, restart, pause, resume, power loss, outage), as
explore draws and shrinks them, and the bounce move."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from runrecord.power import CUT, FS_MODELS
from runrecord.schedule import Cluster
from runrecord.steps.base import Role
from runrecord.steps.processes import Kill, Outage, Pause, PowerLoss, Restart, Resume
from suites.explore.drawing.choices import AT_COORDINATOR, choose, replica_or, smaller, sometimes
from suites.explore.drawing.options import DrawOptions
from suites.explore.drawing.registry import Change, Drawing, Move, register, register_move


def draw_kill(rng: random.Random, c: Cluster) -> Kill:
    target = replica_or(
        rng, c, [(Role.LEADER, 0.45), (Role.FOLLOWER_IN_ISR, 0.25), (Role.CONTROLLER, 0.1)]
    )
    if target == Role.CONTROLLER and c.mode == "kraft":
        target = Role.LEADER
    signal = "SIGKILL" if rng.random() < 0.6 else "SIGTERM"
    # KRaft: a fast restart, back before its session ends, one kill in five (drawn in
    # KRaft only, so that a ZooKeeper-mode seed gives the schedules it always did).
    fast = c.mode == "kraft" and rng.random() < 0.2
    return Kill(target, signal, True if fast else None)


def _at_coordinator(rng: random.Random, step: Any, options: DrawOptions) -> Any:
    if options.at_coordinator and sometimes(rng, AT_COORDINATOR):
        return replace(step, target=Role.COORDINATOR)
    return step


def _draw_kill(rng: random.Random, c: Cluster, options: DrawOptions) -> Kill:
    return _at_coordinator(rng, draw_kill(rng, c), options)


def _draw_restart(rng: random.Random, c: Cluster, _o: DrawOptions) -> Restart:
    return Restart(Role.ANY_BROKER if rng.random() < 0.7 else rng.choice(c.broker_ids))


def _draw_pause(rng: random.Random, c: Cluster, options: DrawOptions) -> Pause:
    step = Pause(replica_or(rng, c, [(Role.LEADER, 0.6), (Role.FOLLOWER_IN_ISR, 0.4)]))
    return _at_coordinator(rng, step, options)


def _draw_resume(rng: random.Random, c: Cluster, _o: DrawOptions) -> Resume:
    return Resume(Role.ANY_BROKER)


def _draw_power_loss(rng: random.Random, c: Cluster, options: DrawOptions) -> PowerLoss:
    """Under a model drawn from the options' power models; with a filesystem model, what it
    loses is the filesystem's to say (no `lose`), and a seed draws what torn, reorder and
    ordered keep."""
    target = replica_or(rng, c, [(Role.LEADER, 0.5), (Role.FOLLOWER_IN_ISR, 0.3)])
    step = PowerLoss(target, choose(rng, [(None, 0.5), (1, 0.3), (2, 0.2)]))
    models = options.power_models
    if models == (CUT,):
        return step
    model = rng.choice(models)
    if model == CUT:
        return replace(step, model=CUT)
    return PowerLoss(step.target, None, model, rng.randrange(1 << 16))


def _draw_outage(rng: random.Random, c: Cluster, options: DrawOptions) -> Outage:
    """Under a filesystem model drawn from the options' power models (`_filesystems`)."""
    models = [m for m in options.power_models if m in FS_MODELS]
    return Outage(rng.choice(models), rng.randrange(1 << 16))


def _filesystems(options: DrawOptions) -> bool:
    """Outages are drawn only where explore runs on crash-simulating filesystems."""
    return any(m in FS_MODELS for m in options.power_models)


def _sigkill(step: Kill) -> list[Change]:
    return (
        [(replace(step, signal="SIGKILL"), "SIGTERM -> SIGKILL")]
        if step.signal == "SIGTERM"
        else []
    )


def _lose_less(step: PowerLoss) -> list[Change]:
    if step.lose is None:
        return []
    return [(replace(step, lose=c), f"lose {step.lose} -> {c}") for c in smaller(step.lose)]


register(
    Drawing(Kill, _draw_kill, simplify=_sigkill),  # type: ignore[arg-type]
    Drawing(Restart, _draw_restart),
    Drawing(Pause, _draw_pause),
    Drawing(Resume, _draw_resume),
    Drawing(PowerLoss, _draw_power_loss, reduce=_lose_less),  # type: ignore[arg-type]
    Drawing(Outage, _draw_outage, allowed=_filesystems),
)


def _pin_restart(step: Any, targets: dict[str, Any]) -> Any:
    broker = targets.get("broker", targets.get("follower"))
    return Restart(broker) if broker is not None and isinstance(step, Restart) else step


register_move(
    Move("bounce", lambda rng, c: [draw_kill(rng, c), Restart(Role.ANY_BROKER)], _pin_restart)
)
