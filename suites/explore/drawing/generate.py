"""Draw candidate schedules from a seed, so that `logfork explore` has schedules to rank
(suites.explore.drawing.guide) and run.

Candidate `i` of seed `S` comes from its own random stream (seeded with "S:i"), so a
candidate does not depend on how many were drawn before it. Its cluster is drawn first
(CLUSTER_CHOICES), then 4 to 12 steps: a step kind or a move by the weights
(suites.explore.drawing.options), then its parameters, as the kind's family draws them
(suites.explore.drawing.registry). In model-aware drawing (the default) a step is kept only
if the simulator, which follows the schedule as it is drawn, says it would run now rather
than be skipped; a kind that cannot run is set aside for that position and another is
drawn. Blind drawing keeps whatever comes out. Without `unclean`, no schedule enables
unclean leader election and none has an `elect-unclean` step.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import replace
from typing import Any

from checkers.simulate import Simulator
from runrecord.schedule import BrokerConfig, Cluster, Schedule, TopicConfig
from runrecord.steps import STEP_KINDS
from runrecord.steps.base import Step
from suites.explore.drawing import families  # noqa: F401 - every kind and move registered
from suites.explore.drawing.choices import choose
from suites.explore.drawing.options import MOVE_WEIGHTS, STEP_WEIGHTS, DrawOptions
from suites.explore.drawing.registry import DRAWINGS, MOVES

assert set(STEP_WEIGHTS) == set(STEP_KINDS) == set(DRAWINGS)
assert set(MOVE_WEIGHTS) == set(MOVES)

# The cluster of a candidate: (value, weight) choices.
CLUSTER_CHOICES: dict[str, list[tuple[Any, float]]] = {
    "replication_factor": [(2, 0.7), (3, 0.3)],
    "min.insync.replicas": [(1, 0.7), (2, 0.3)],  # capped at the replication factor
    # Long: a follower that stops fetching stays in the ISR for the whole schedule (as in
    # KIP-279 scenario 1). Short: it leaves after 10 s of `wait`, kills or expiries.
    "replica.lag.time.max.ms": [(600000, 0.5), (10000, 0.5)],
    "background_partitions": [(1, 0.5), (3, 0.5)],  # KRaft only
}
SESSION_MS = 6000
ATTEMPTS = 3  # parameter draws per kind before the kind is set aside for this position


def explore_shape(options: DrawOptions, lag_ms: int = 600000) -> DrawOptions:
    """The options with the cluster's shape fixed as `logfork explore` runs them: in
    ZooKeeper mode the controller on the last broker (a replica only at replication factor
    3), and one replica.lag.time.max.ms (600000 by default: a follower that stops fetching
    stays in the ISR, KIP-279 scenario 1's precondition)."""
    controller = options.brokers if options.mode == "zk" else None
    return replace(options, controller=controller, lag_ms=lag_ms)


def candidate_seed(seed: int, index: int) -> int:
    """The run-time seed of candidate `index`: stable across Python versions."""
    digest = hashlib.sha256(f"logfork-explore:{seed}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def draw_cluster(rng: random.Random, options: DrawOptions) -> Cluster:
    rf = min(choose(rng, CLUSTER_CHOICES["replication_factor"]), options.brokers)
    brokers = list(range(1, options.brokers + 1))
    fixed = options.controller if options.mode == "zk" else None
    if fixed is not None and rf < options.brokers:
        brokers.remove(fixed)  # the fixed controller holds no replica while one can be spared
    replicas = tuple(rng.sample(brokers, rf))
    spare = [b for b in range(1, options.brokers + 1) if b not in replicas]
    min_isr = min(choose(rng, CLUSTER_CHOICES["min.insync.replicas"]), rf)
    lag = choose(rng, CLUSTER_CHOICES["replica.lag.time.max.ms"])
    if options.lag_ms is not None:
        lag = options.lag_ms
    controller = fixed if fixed is not None else (spare[0] if spare else None)
    # KRaft: several background partitions, leaders apart, half the time (drawn in KRaft
    # only, so that a ZooKeeper-mode seed gives the schedules it always did).
    background = (
        choose(rng, CLUSTER_CHOICES["background_partitions"]) if options.mode == "kraft" else 1
    )
    return Cluster(
        mode=options.mode,
        brokers=options.brokers,
        replication_factor=rf,
        replicas=replicas,
        # As the scenarios do: the controller on a broker that holds no replica, if any.
        controller=controller if options.mode == "zk" else None,
        topic_config=TopicConfig(min_isr, options.unclean),
        broker_config=BrokerConfig(replica_lag_time_max_ms=lag, session_timeout_ms=SESSION_MS),
        controllers=options.controllers if options.mode == "kraft" else 1,
        quorum="dynamic" if options.voters and options.kraft else "static",
        spare_controllers=1 if options.voters and options.kraft else 0,
        features=dict(options.features),
        background_partitions=background,
        log_dirs=2 if options.jbod else 1,
    )


def kind_weights(options: DrawOptions) -> dict[str, float]:
    """The kinds and moves the options draw, with their weights, in the tables' order."""
    return {
        k: w
        for k, w in {**options.weights, **options.moves}.items()
        if w > 0 and (MOVES[k] if k in MOVES else DRAWINGS[k]).allowed(options)
    }


def next_steps(
    rng: random.Random,
    cluster: Cluster,
    sim: Simulator | None,
    weights: dict[str, float],
    options: DrawOptions,
) -> tuple[list[Step], Simulator | None]:
    """Draw the next step (or move). With a simulator, only what it says would run now; a
    kind that does not after ATTEMPTS draws is set aside for this position. Returns the
    steps (none: nothing can run) and the simulator after them."""
    pool = dict(weights)
    while pool:
        kind = rng.choices(list(pool), list(pool.values()))[0]
        move = MOVES.get(kind)
        for _ in range(ATTEMPTS if sim is not None else 1):
            if move is not None:
                drawn = move.draw(rng, cluster)
            else:
                drawn = [DRAWINGS[kind].draw(rng, cluster, options)]
            if sim is None:
                return drawn, None
            trial, kept = sim.copy(), []
            for step in drawn:
                if kept and move is not None:
                    step = move.pin(step, trial.records[-1].targets)
                if trial.apply(step).status != "done":
                    break
                kept.append(step)
            if len(kept) == len(drawn):
                return kept, trial
        pool.pop(kind)
    return [], sim


def draw(seed: int, index: int, options: DrawOptions | None = None) -> Schedule:
    """Candidate `index` of `seed`: the same schedule every time."""
    options = options or DrawOptions()
    rng = random.Random(f"{seed}:{index}")
    cluster = draw_cluster(rng, options)
    weights = kind_weights(options)
    length = rng.randint(options.min_steps, options.max_steps)
    sim = Simulator(cluster, options.protocol) if options.aware else None
    steps: list[Step] = []
    while len(steps) < length:
        chosen, sim = next_steps(rng, cluster, sim, weights, options)
        if not chosen or len(steps) + len(chosen) > options.max_steps:
            break  # nothing can run now, or a move would not fit: the schedule ends here
        steps.extend(chosen)
    origin = {"explore_seed": seed, "index": index, "drawn": "aware" if options.aware else "blind"}
    return Schedule(cluster, candidate_seed(seed, index), tuple(steps), origin)


def draw_many(seed: int, count: int, options: DrawOptions | None = None) -> list[Schedule]:
    return [draw(seed, i, options) for i in range(count)]
