"""Faults of the KRaft controller quorum, as explore draws them."""

from __future__ import annotations

import random

from runrecord.schedule import Cluster
from runrecord.steps.quorum import ACTIVE, Quorum
from suites.explore.drawing.choices import choose
from suites.explore.drawing.options import DrawOptions
from suites.explore.drawing.registry import Drawing, register


def _draw(rng: random.Random, c: Cluster, _o: DrawOptions) -> Quorum:
    action = choose(rng, [("kill", 0.3), ("restart", 0.2), ("pause", 0.2), ("resume", 0.15),
                          ("isolate", 0.15)])  # fmt: skip
    voter = ACTIVE if rng.random() < 0.7 else rng.randint(1, c.controllers)
    return Quorum(action, voter)


def _three_voters(options: DrawOptions) -> bool:
    return options.kraft and options.controllers >= 3


register(Drawing(Quorum, _draw, allowed=_three_voters))
