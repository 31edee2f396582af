"""Log dirs (a replica moved into another, a dir failing), as explore draws and shrinks
them: with --jbod only."""

from __future__ import annotations

import random
from dataclasses import replace

from runrecord.schedule import Cluster
from runrecord.steps.base import Role
from runrecord.steps.disks import FailDir, MoveDir
from suites.explore.drawing.choices import replica_or
from suites.explore.drawing.options import DrawOptions
from suites.explore.drawing.registry import Change, Drawing, register


def _jbod(options: DrawOptions) -> bool:
    return options.jbod


def _draw_move(rng: random.Random, c: Cluster, _o: DrawOptions) -> MoveDir:
    target = replica_or(rng, c, [(Role.LEADER, 0.4), (Role.FOLLOWER_IN_ISR, 0.4)])
    return MoveDir(target, rng.random() < 0.5 or None)


def _draw_fail(rng: random.Random, c: Cluster, _o: DrawOptions) -> FailDir:
    return FailDir(replica_or(rng, c, [(Role.LEADER, 0.4), (Role.FOLLOWER_IN_ISR, 0.4)]))


def _unthrottled(step: MoveDir) -> list[Change]:
    # Unthrottled, a move is swapped in within its step.
    return [(replace(step, throttle=None), "throttle dropped")] if step.throttle else []


register(
    Drawing(MoveDir, _draw_move, allowed=_jbod, reduce=_unthrottled),  # type: ignore[arg-type]
    Drawing(FailDir, _draw_fail, allowed=_jbod),
)
