"""The random choices every drawing makes, and what the options add to steps of several
families alike."""

from __future__ import annotations

import random
from typing import Any

from runrecord.schedule import Cluster

COUNTS = [1, 1, 1, 2, 3, 5, 10, 10, 11, 15, 20, 20, 25]  # records per write step
# Of the kill, pause and cut steps drawn with DrawOptions.coordinator, those that name the
# transaction coordinator instead of their drawn target.
AT_COORDINATOR = 0.3


def choose(rng: random.Random, options: list[tuple[Any, float]]) -> Any:
    values, weights = zip(*options, strict=True)
    return rng.choices(values, weights)[0]


def replica_or(rng: random.Random, cluster: Cluster, roles: list[tuple[Any, float]]) -> Any:
    """A role by weight, or (with the weight left) one of the partition's replicas by id."""
    rest = 1 - sum(w for _, w in roles)
    pick = choose(rng, [*roles, ("id", rest)])
    return rng.choice(cluster.replicas) if pick == "id" else pick


def sometimes(rng: random.Random, chance: float) -> bool:
    """True with this chance: one draw of the stream."""
    return rng.random() < chance


def smaller(value: int) -> list[int]:
    """What the shrinker tries for a count: 1, half, one less."""
    return sorted({v for v in (1, value // 2, value - 1) if 1 <= v < value})
