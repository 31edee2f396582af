"""Reassignments of the schedule's partition (KRaft, --reassign), as explore draws and
shrinks them."""

from __future__ import annotations

import random
from dataclasses import replace

from runrecord.schedule import Cluster
from runrecord.steps.base import Role
from runrecord.steps.reassign import Reassign
from suites.explore.drawing.choices import choose, replica_or
from suites.explore.drawing.options import DrawOptions
from suites.explore.drawing.registry import Change, Drawing, register


def _draw(rng: random.Random, c: Cluster, _o: DrawOptions) -> Reassign:
    """Replace a replica half the time; else add one, remove one or change the preferred
    one. The one removed is the leader a third of the time: it resigns."""
    what = choose(rng, [("replace", 0.5), ("add", 0.2), ("remove", 0.15), ("prefer", 0.15)])
    remove = replica_or(rng, c, [(Role.LEADER, 0.35), (Role.FOLLOWER_IN_ISR, 0.35)])
    add = Role.ANY_BROKER if rng.random() < 0.8 else rng.choice(c.broker_ids)
    throttle = rng.random() < 0.3 or None
    if what == "prefer":
        return Reassign(prefer=replica_or(rng, c, [(Role.FOLLOWER_IN_ISR, 0.5)]))
    return Reassign(
        add=add if what in ("replace", "add") else None,
        remove=remove if what in ("replace", "remove") else None,
        throttle=throttle,
    )


def _allowed(options: DrawOptions) -> bool:
    return options.reassign and options.kraft


def _unthrottled(step: Reassign) -> list[Change]:
    # Unthrottled, a reassignment is done within its step.
    return [(replace(step, throttle=None), "throttle dropped")] if step.throttle else []


register(Drawing(Reassign, _draw, allowed=_allowed, reduce=_unthrottled))  # type: ignore[arg-type]
