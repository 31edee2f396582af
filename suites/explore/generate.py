"""Draw candidate schedules from a seed, so that `logfork explore` has schedules to rank
(suites.explore.guide) and run.

Candidate `i` of seed `S` comes from its own random stream (seeded with "S:i"), so a
candidate does not depend on how many were drawn before it. Its cluster is drawn first
(CLUSTER_CHOICES), then 4 to 12 steps: a step kind by STEP_WEIGHTS, then its parameters
(`_draw_*`). In model-aware drawing (the default) a step is kept only if the simulator,
which follows the schedule as it is drawn, says it would run now rather than be skipped;
a kind that cannot run is set aside for that position and another is drawn. Blind drawing
keeps whatever comes out. Without `unclean`, no schedule enables unclean leader election
and none has an `elect-unclean` step.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from checkers.protocol import Protocol
from checkers.simulate import Simulator
from runrecord.power import CUT
from runrecord.schedule import BrokerConfig, Cluster, Schedule, TopicConfig
from runrecord.steps.base import QUORUM, STEP_KINDS, Role, Step
from runrecord.steps.disks import FailDir, MoveDir
from runrecord.steps.elections import ElectPreferred, ElectUnclean
from runrecord.steps.links import Cut, ExpireSession, Heal, HoldAlterPartition, HoldBack, Slow
from runrecord.steps.processes import Kill, Pause, PowerLoss, Restart, Resume
from runrecord.steps.quorum import ACTIVE, Quorum
from runrecord.steps.reassign import Reassign
from runrecord.steps.txn import TxnAbort, TxnCommit, TxnWrite
from runrecord.steps.waits import Wait
from runrecord.steps.writes import Produce
from suites.explore.step_variants import (
    FILLERS,
    at_coordinator_at_times,
    choose,
    filled,
    held_end,
    paired,
    replica_or,
    spanning_at_times,
    with_power_model,
)

# How often each step kind is drawn, relative to the others. Produce dominates: a
# divergence needs data written in the right epochs. Elections, kills and restarts come
# next, as they move leadership; hold-back and expire-session are the KAFKA-6361 moves.
STEP_WEIGHTS: dict[str, float] = {
    "produce": 30,
    "hold-back": 8,
    "hold-alter-partition": 3,  # KRaft only
    "cut": 3,
    "slow": 3,  # only with slow_links: a leader's responses to a follower come late
    "heal": 6,
    "expire-session": 6,
    "elect-preferred": 8,
    "elect-unclean": 4,  # only with unclean
    "kill": 9,
    "restart": 10,
    "pause": 2,
    "resume": 3,
    "power-loss": 1,
    "quorum": 4,  # KRaft with three voters only
    "wait": 4,
    # The transactional producer's (KRaft only): a transaction that a fault leaves with its
    # data on one replica and its marker on another (KAFKA-20716).
    "txn-write": 10,
    "txn-commit": 6,
    "txn-abort": 2,
    "move-dir": 4,  # only with jbod: a replica moved between its broker's log dirs
    "fail-dir": 3,  # only with jbod: the log dir holding a replica fails
    "reassign": 5,  # only with reassign (KRaft): replicas added, removed or reordered
}
assert set(STEP_WEIGHTS) == set(STEP_KINDS)
TXN_KINDS = ("txn-write", "txn-commit", "txn-abort")

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
COUNTS = [1, 1, 1, 2, 3, 5, 10, 10, 11, 15, 20, 20, 25]  # records per produce step
SLOW_RATES = [10, 30, 30, 100]  # KB/s of a slow link
WAITS = [1, 5, 6, 11, 30, 60]  # seconds


@dataclass(frozen=True)
class DrawOptions:
    unclean: bool = False  # enable unclean elections (config and elect-unclean steps)
    mode: str = "zk"
    brokers: int = 3
    min_steps: int = 4
    max_steps: int = 12
    aware: bool = True  # keep only steps the model says can run when their turn comes
    # Rules the model follows while drawing: a protocol's, or a release's (its version).
    protocol: Protocol | str = Protocol.KIP_279
    weights: Mapping[str, float] = field(default_factory=lambda: dict(STEP_WEIGHTS))
    moves: Mapping[str, float] = field(default_factory=lambda: dict(MOVE_WEIGHTS))
    # A fixed cluster shape, so that one running cluster serves every candidate (broker
    # configs are the cluster's; replicas and topic configs are per topic). None: drawn.
    controller: int | None = None  # ZooKeeper mode: this broker is the controller
    lag_ms: int | None = None  # replica.lag.time.max.ms
    # How a power-loss step loses data, drawn per step (runrecord.power). With the cut
    # model alone nothing is drawn for it, so that a seed gives the schedules it always did.
    power_models: tuple[str, ...] = (CUT,)
    features: Mapping[str, int] = field(default_factory=dict)  # KRaft: formatted with these
    controllers: int = 1  # KRaft: voters of the quorum (quorum steps are drawn with 3)
    jbod: bool = False  # two log dirs per broker, and move-dir steps
    reassign: bool = False  # reassign steps (KRaft), on a broker more than the replicas
    # KRaft: kill, pause and cut steps may name the transaction coordinator. Off, nothing is
    # drawn for it, so that a seed gives the schedules it always did.
    coordinator: bool = False
    # KRaft: commits and aborts may have their first EndTxn held on the wire until a heal
    # (KAFKA-17754). Off, nothing is drawn for it, as for `coordinator`.
    late_ends: bool = False
    # Slow links, and produce steps that write a filler first (KAFKA-18723's window). Off,
    # nothing is drawn for them, as for `coordinator`.
    slow_links: bool = False
    # KRaft: transactional writes may span background partitions (`TxnWrite.partitions`).
    # Off, nothing is drawn for it, as for `coordinator`.
    spanning: bool = False


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
        features=dict(options.features),
        background_partitions=background,
        log_dirs=2 if options.jbod else 1,
    )


# -- parameters of each kind ------------------------------------------------------------


def _draw_produce(rng: random.Random, c: Cluster) -> Step:
    to = Role.LEADER if rng.random() < 0.9 else rng.choice(c.replicas)  # a zombie, maybe
    return Produce(rng.choice(COUNTS), rng.choice(["all", "1"]), to)


def _draw_slow(rng: random.Random, c: Cluster) -> Step:
    """The leader's link to a follower, mostly; KB/s that make a 700 KB filler take from
    7 s to over a minute (a follower gives up on a fetch after 30 s and asks again)."""
    a = Role.LEADER if rng.random() < 0.8 else rng.choice(c.replicas)
    b = replica_or(rng, c, [(Role.FOLLOWER_IN_ISR, 0.8)])
    return Slow(a, b, rng.choice(SLOW_RATES))


def _draw_hold_back(rng: random.Random, c: Cluster) -> Step:
    return HoldBack(replica_or(rng, c, [(Role.FOLLOWER_IN_ISR, 0.8)]))


def _draw_cut(rng: random.Random, c: Cluster) -> Step:
    a = replica_or(rng, c, [(Role.LEADER, 0.4), (Role.FOLLOWER_IN_ISR, 0.3)])
    b = choose(
        rng,
        [(QUORUM, 0.3), (Role.CONTROLLER, 0.2), (Role.LEADER, 0.2), ("id", 0.3)],
    )
    if b == "id":
        b = rng.choice(c.broker_ids)
    return Cut(a, b)


def _draw_hold_alter_partition(rng: random.Random, c: Cluster) -> Step:
    return HoldAlterPartition(replica_or(rng, c, [(Role.LEADER, 0.8)]))


def _draw_heal(rng: random.Random, c: Cluster) -> Step:
    return Heal()  # every cut: a specific heal is for shrinking to find


def _draw_expire_session(rng: random.Random, c: Cluster) -> Step:
    return ExpireSession(replica_or(rng, c, [(Role.LEADER, 0.5), (Role.FOLLOWER_IN_ISR, 0.3)]))


def _draw_elect_preferred(rng: random.Random, c: Cluster) -> Step:
    return ElectPreferred()


def _draw_elect_unclean(rng: random.Random, c: Cluster) -> Step:
    return ElectUnclean(replica_or(rng, c, [(Role.OUT_OF_SYNC, 0.8)]))


def _draw_kill(rng: random.Random, c: Cluster) -> Step:
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


def _draw_restart(rng: random.Random, c: Cluster) -> Step:
    return Restart(Role.ANY_BROKER if rng.random() < 0.7 else rng.choice(c.broker_ids))


def _draw_pause(rng: random.Random, c: Cluster) -> Step:
    return Pause(replica_or(rng, c, [(Role.LEADER, 0.6), (Role.FOLLOWER_IN_ISR, 0.4)]))


def _draw_resume(rng: random.Random, c: Cluster) -> Step:
    return Resume(Role.ANY_BROKER)


def _draw_power_loss(rng: random.Random, c: Cluster) -> Step:
    target = replica_or(rng, c, [(Role.LEADER, 0.5), (Role.FOLLOWER_IN_ISR, 0.3)])
    return PowerLoss(target, choose(rng, [(None, 0.5), (1, 0.3), (2, 0.2)]))


def _draw_quorum(rng: random.Random, c: Cluster) -> Step:
    action = choose(rng, [("kill", 0.3), ("restart", 0.2), ("pause", 0.2), ("resume", 0.15),
                          ("isolate", 0.15)])  # fmt: skip
    voter = ACTIVE if rng.random() < 0.7 else rng.randint(1, c.controllers)
    return Quorum(action, voter)


def _draw_wait(rng: random.Random, c: Cluster) -> Step:
    return Wait(rng.choice(WAITS))


def _draw_txn_write(rng: random.Random, c: Cluster) -> Step:
    return TxnWrite(rng.choice(COUNTS))


def _draw_txn_commit(rng: random.Random, c: Cluster) -> Step:
    return TxnCommit()


def _draw_txn_abort(rng: random.Random, c: Cluster) -> Step:
    return TxnAbort()


def _draw_move_dir(rng: random.Random, c: Cluster) -> Step:
    target = replica_or(rng, c, [(Role.LEADER, 0.4), (Role.FOLLOWER_IN_ISR, 0.4)])
    return MoveDir(target, rng.random() < 0.5 or None)


def _draw_fail_dir(rng: random.Random, c: Cluster) -> Step:
    return FailDir(replica_or(rng, c, [(Role.LEADER, 0.4), (Role.FOLLOWER_IN_ISR, 0.4)]))


def _draw_reassign(rng: random.Random, c: Cluster) -> Step:
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


DRAW: dict[str, Callable[[random.Random, Cluster], Step]] = {
    "produce": _draw_produce,
    "slow": _draw_slow,
    "hold-back": _draw_hold_back,
    "hold-alter-partition": _draw_hold_alter_partition,
    "cut": _draw_cut,
    "heal": _draw_heal,
    "expire-session": _draw_expire_session,
    "elect-preferred": _draw_elect_preferred,
    "elect-unclean": _draw_elect_unclean,
    "kill": _draw_kill,
    "restart": _draw_restart,
    "pause": _draw_pause,
    "resume": _draw_resume,
    "power-loss": _draw_power_loss,
    "quorum": _draw_quorum,
    "wait": _draw_wait,
    "txn-write": _draw_txn_write,
    "txn-commit": _draw_txn_commit,
    "txn-abort": _draw_txn_abort,
    "move-dir": _draw_move_dir,
    "fail-dir": _draw_fail_dir,
    "reassign": _draw_reassign,
}
ATTEMPTS = 3  # parameter draws per kind before the kind is set aside for this position

# Moves of two steps that operators and failures produce together, drawn as one with these
# weights beside STEP_WEIGHTS. Each makes a multi-step precondition of the scenarios
# likely: a preferred replica that lost leadership and came back (bounce, session-flap),
# a write that one follower in the ISR does not get (held-write), and a follower catching up
# through a slow link in one response, held back behind a filler (slow-catch-up: with slow
# links only; what happens while it is in flight is drawn as any other step).
# Of the slow catch-up moves, those whose follower is then cut off from the quorum while its
# response is in flight: it learns of no leader change meanwhile, so the response is not
# dropped when one comes (KAFKA-18723's window).
ISOLATED = 0.5
MOVE_WEIGHTS: dict[str, float] = {
    "bounce": 8,  # kill a broker (SIGKILL or SIGTERM), then restart that same broker
    "session-flap": 5,  # expire a broker's session, then heal its cut from the quorum
    "held-write": 8,  # hold a follower back, then produce
    "slow-catch-up": 4,  # slow a follower's link, pause it, produce after a filler, resume it
}


def _draw_move(rng: random.Random, c: Cluster, move: str) -> list[Step]:
    """The steps of a move; a later step names the broker of the first one by id once the
    model resolved it (`_pin`), so that the move stays one move whatever roles do."""
    if move == "bounce":
        return [_draw_kill(rng, c), Restart(Role.ANY_BROKER)]
    if move == "session-flap":
        return [_draw_expire_session(rng, c), Heal()]
    if move == "slow-catch-up":
        count, filler = rng.choice(COUNTS), rng.choice(FILLERS)
        slow = Slow(Role.LEADER, Role.FOLLOWER_IN_ISR, rng.choice(SLOW_RATES))
        fill = Produce(count, "1", filler=filler)
        steps = [slow, Pause(Role.FOLLOWER_IN_ISR), fill, Resume(Role.ANY_BROKER)]
        if rng.random() < ISOLATED:
            steps.append(Cut(Role.ANY_BROKER, QUORUM))  # pinned to the follower resumed
        return steps
    return [_draw_hold_back(rng, c), _draw_produce(rng, c)]


def _pin(step: Step, targets: dict[str, Any]) -> Step:
    """Name the broker an earlier step of the same move resolved to."""
    if isinstance(step, Pause) and "b" in targets:
        return Pause(targets["b"])  # the follower behind the slow link just drawn
    broker = targets.get("broker", targets.get("follower"))
    if broker is None:
        return step
    if isinstance(step, Restart):
        return Restart(broker)
    if isinstance(step, Heal):
        return Heal(broker, QUORUM)
    if isinstance(step, Cut):
        return Cut(broker, step.b)
    return step


def at_coordinator(options: DrawOptions) -> bool:
    """Whether steps may name the transaction coordinator: transactions are drawn in KRaft."""
    return options.coordinator and options.mode == "kraft"


def held_ends(options: DrawOptions) -> bool:
    """Whether commits and aborts may have their EndTxn held: transactions are drawn in KRaft."""
    return options.late_ends and options.mode == "kraft"


def kind_weights(options: DrawOptions) -> dict[str, float]:
    return {
        k: w
        for k, w in {**options.weights, **options.moves}.items()
        if w > 0
        and (options.unclean or k != "elect-unclean")
        and (k != "quorum" or (options.mode == "kraft" and options.controllers >= 3))
        # Drawn in KRaft only, so that a ZooKeeper-mode seed gives the schedules it
        # always did (a replay file may hold one in either mode).
        and (k != "hold-alter-partition" or options.mode == "kraft")
        and (k not in TXN_KINDS or options.mode == "kraft")
        and (k not in ("move-dir", "fail-dir") or options.jbod)
        and (k != "reassign" or (options.reassign and options.mode == "kraft"))
        and (k not in ("slow", "slow-catch-up") or options.slow_links)
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
    coordinator, late_ends = at_coordinator(options), held_ends(options)
    spanning = options.spanning and options.mode == "kraft"
    pool = dict(weights)
    while pool:
        kind = rng.choices(list(pool), list(pool.values()))[0]
        for _ in range(ATTEMPTS if sim is not None else 1):
            if kind in MOVE_WEIGHTS:
                drawn = _draw_move(rng, cluster, kind)
            else:
                step = with_power_model(rng, DRAW[kind](rng, cluster), options.power_models)
                step = at_coordinator_at_times(rng, step) if coordinator else step
                step = filled(rng, paired(rng, step, cluster)) if options.slow_links else step
                step = spanning_at_times(rng, step, cluster) if spanning else step
                drawn = [held_end(rng, step) if late_ends else step]
            if sim is None:
                return drawn, None
            trial, kept = sim.copy(), []
            for step in drawn:
                if kept:
                    step = _pin(step, trial.records[-1].targets)
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
