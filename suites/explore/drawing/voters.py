"""The KRaft quorum's membership steps (KIP-853), as explore draws them (with --voters)."""

from __future__ import annotations

import random

from runrecord.schedule import Cluster
from runrecord.steps.quorum import ACTIVE
from runrecord.steps.voters import AddVoter, RemoveVoter, WipeVoter
from suites.explore.drawing.options import DrawOptions
from suites.explore.drawing.registry import Drawing, register


def _controller(rng: random.Random, c: Cluster, active: float) -> str | int:
    return ACTIVE if rng.random() < active else rng.randint(1, c.controller_nodes)


def _add(rng: random.Random, c: Cluster, _o: DrawOptions) -> AddVoter:
    # Mostly whichever controller does not vote: the model picks the one the run will.
    return AddVoter(None if rng.random() < 0.7 else rng.randint(1, c.controller_nodes))


def _remove(rng: random.Random, c: Cluster, _o: DrawOptions) -> RemoveVoter:
    return RemoveVoter(_controller(rng, c, 0.4))


def _wipe(rng: random.Random, c: Cluster, _o: DrawOptions) -> WipeVoter:
    return WipeVoter(_controller(rng, c, 0.3))


def _voters(options: DrawOptions) -> bool:
    return options.kraft and options.voters


register(
    Drawing(AddVoter, _add, allowed=_voters),
    Drawing(RemoveVoter, _remove, allowed=_voters),
    Drawing(WipeVoter, _wipe, allowed=_voters),
)
