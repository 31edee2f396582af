"""What a drawing option adds to a step as it is drawn (suites.explore.generate): a power
model for a power loss, the coordinator as a target, a filler before a write, a heal of one
link, a transaction spanning partitions, a held EndTxn. Each draws only where its option is
on, so that a seed with the option off gives the schedules it always did. Also the two
random choices every draw makes (`choose`, `replica_or`)."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from runrecord.power import CUT
from runrecord.schedule import Cluster
from runrecord.steps.base import QUORUM, Role, Step
from runrecord.steps.links import Cut, Heal
from runrecord.steps.processes import Kill, Pause, PowerLoss
from runrecord.steps.txn import TxnAbort, TxnCommit, TxnWrite
from runrecord.steps.writes import Produce

FILLERS = [300, 700]  # KB: what a produce step may write first, with slow links
FILLED = 0.3  # of the produce steps drawn with slow links, those that write a filler


def choose(rng: random.Random, options: list[tuple[Any, float]]) -> Any:
    values, weights = zip(*options, strict=True)
    return rng.choices(values, weights)[0]


def replica_or(rng: random.Random, cluster: Cluster, roles: list[tuple[Any, float]]) -> Any:
    """A role by weight, or (with the weight left) one of the partition's replicas by id."""
    rest = 1 - sum(w for _, w in roles)
    pick = choose(rng, [*roles, ("id", rest)])
    return rng.choice(cluster.replicas) if pick == "id" else pick


def with_power_model(rng: random.Random, step: Step, models: tuple[str, ...]) -> Step:
    """A power loss under a model drawn from `models`; with a filesystem model, what it
    loses is the filesystem's to say (no `lose`), and a seed draws what torn and reorder
    keep."""
    if not isinstance(step, PowerLoss) or models == (CUT,):
        return step
    model = rng.choice(models)
    if model == CUT:
        return replace(step, model=CUT)
    return PowerLoss(step.target, None, model, rng.randrange(1 << 16))


# Of the kill, pause and cut steps drawn with DrawOptions.coordinator, those that name the
# transaction coordinator instead of their drawn target.
AT_COORDINATOR = 0.3


def at_coordinator_at_times(rng: random.Random, step: Step) -> Step:
    """The step aimed at the transaction coordinator, at times, if it is a kill, a pause or
    (its first end) a cut."""
    if not isinstance(step, Kill | Pause | Cut) or rng.random() >= AT_COORDINATOR:
        return step
    if isinstance(step, Cut):
        return replace(step, a=Role.COORDINATOR)
    return replace(step, target=Role.COORDINATOR)


# Of the commits and aborts drawn with DrawOptions.late_ends, those whose first EndTxn is held.
HELD_END = 0.4


def filled(rng: random.Random, step: Step) -> Step:
    if not isinstance(step, Produce) or rng.random() >= FILLED:
        return step
    return replace(step, filler=rng.choice(FILLERS))


# Of the heals drawn with slow links, those of one link: a heal of every cut lifts the slow
# links too, and what they hold back arrives at once, so KAFKA-18723's window (a held-back
# follower let fetch again while a response is still in flight) needs one link healed.
PAIRED = 0.5


def paired(rng: random.Random, step: Step, c: Cluster) -> Step:
    if not isinstance(step, Heal) or step.a is not None or rng.random() >= PAIRED:
        return step
    a = replica_or(rng, c, [(Role.LEADER, 0.5)])
    b = choose(rng, [(Role.ANY_BROKER, 0.5), (QUORUM, 0.2), ("id", 0.3)])
    return Heal(a, rng.choice(c.broker_ids) if b == "id" else b)


# Of the transactional writes drawn with DrawOptions.spanning, those that span partitions.
SPANNING = 0.4


def spanning_at_times(rng: random.Random, step: Step, c: Cluster) -> Step:
    if not isinstance(step, TxnWrite) or rng.random() >= SPANNING:
        return step
    return replace(step, partitions=rng.randint(2, 1 + c.background_partitions))


def held_end(rng: random.Random, step: Step) -> Step:
    if not isinstance(step, TxnCommit | TxnAbort) or rng.random() >= HELD_END:
        return step
    return replace(step, held=True)
