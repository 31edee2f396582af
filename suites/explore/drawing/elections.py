"""Elections an operator asks for, as explore draws them."""

from __future__ import annotations

import random

from runrecord.schedule import Cluster
from runrecord.steps.base import Role
from runrecord.steps.elections import ElectPreferred, ElectUnclean
from suites.explore.drawing.choices import replica_or
from suites.explore.drawing.options import DrawOptions
from suites.explore.drawing.registry import Drawing, register


def _draw_preferred(rng: random.Random, c: Cluster, _o: DrawOptions) -> ElectPreferred:
    return ElectPreferred()


def _draw_unclean(rng: random.Random, c: Cluster, _o: DrawOptions) -> ElectUnclean:
    return ElectUnclean(replica_or(rng, c, [(Role.OUT_OF_SYNC, 0.8)]))


def _unclean(options: DrawOptions) -> bool:
    return options.unclean


register(
    Drawing(ElectPreferred, _draw_preferred),
    Drawing(ElectUnclean, _draw_unclean, allowed=_unclean),
)
