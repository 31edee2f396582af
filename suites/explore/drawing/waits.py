"""Time passing, as explore draws and shrinks it."""

from __future__ import annotations

import random
from dataclasses import replace

from runrecord.schedule import Cluster
from runrecord.steps.waits import Wait
from suites.explore.drawing.options import DrawOptions
from suites.explore.drawing.registry import Change, Drawing, register

WAITS = [1, 5, 6, 11, 30, 60]  # seconds


def _draw(rng: random.Random, c: Cluster, _o: DrawOptions) -> Wait:
    return Wait(rng.choice(WAITS))


def _shorter(step: Wait) -> list[Change]:
    if step.seconds <= 1:
        return []
    return [
        (replace(step, seconds=v), f"wait {step.seconds:g} -> {v:g} s")
        for v in sorted({1, step.seconds / 2})
        if v < step.seconds
    ]


register(Drawing(Wait, _draw, reduce=_shorter))  # type: ignore[arg-type]
