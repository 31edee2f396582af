"""Draw candidate schedules from a seed, and rank them by the divergence the protocol model
predicts, so that `logfork explore` runs the promising ones first.

Drawing. Candidate `i` of seed `S` comes from its own random stream (seeded with "S:i"), so a
candidate does not depend on how many were drawn before it. Its cluster is drawn first
(CLUSTER_CHOICES), then 4 to 12 steps: a step kind by STEP_WEIGHTS, then its parameters
(`_draw_*`). In model-aware drawing (the default) a step is kept only if the simulator,
which follows the schedule as it is drawn, says it would run now rather than be skipped;
a kind that cannot run is set aside for that position and another is drawn. Blind drawing
keeps whatever comes out. Without `unclean`, no schedule enables unclean leader election
and none has an `elect-unclean` step.

Ranking. Every candidate is simulated under the release's rules (checkers.simulate) and
scored (`score`): a predicted finding first (divergence, a stuck follower, an acknowledged
acks=all write lost where nothing excuses it), then near misses (replicas that held
different data at one offset at some point, acknowledged acks=1 writes truncated, unclean
elections), and fewer skipped steps. Candidates run in that order; ties keep the drawing
order.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from checkers.model import Fate
from checkers.protocol import Protocol
from checkers.simulate import Prediction, Simulator, simulate
from suites.explore.schedule import (
    QUORUM,
    STEP_KINDS,
    BrokerConfig,
    Cluster,
    Cut,
    ElectPreferred,
    ElectUnclean,
    ExpireSession,
    Heal,
    HoldBack,
    Kill,
    Pause,
    PowerLoss,
    Produce,
    Restart,
    Resume,
    Role,
    Schedule,
    Step,
    TopicConfig,
    Wait,
    dumps,
)

# How often each step kind is drawn, relative to the others. Produce dominates: a
# divergence needs data written in the right epochs. Elections, kills and restarts come
# next, as they move leadership; hold-back and expire-session are the KAFKA-6361 moves.
STEP_WEIGHTS: dict[str, float] = {
    "produce": 30,
    "hold-back": 8,
    "cut": 3,
    "heal": 6,
    "expire-session": 6,
    "elect-preferred": 8,
    "elect-unclean": 4,  # only with unclean
    "kill": 9,
    "restart": 10,
    "pause": 2,
    "resume": 3,
    "power-loss": 1,
    "wait": 4,
}
assert set(STEP_WEIGHTS) == set(STEP_KINDS)

# The cluster of a candidate: (value, weight) choices.
CLUSTER_CHOICES: dict[str, list[tuple[Any, float]]] = {
    "replication_factor": [(2, 0.7), (3, 0.3)],
    "min.insync.replicas": [(1, 0.7), (2, 0.3)],  # capped at the replication factor
    # Long: a follower that stops fetching stays in the ISR for the whole schedule (as in
    # KIP-279 scenario 1). Short: it leaves after 10 s of `wait`, kills or expiries.
    "replica.lag.time.max.ms": [(600000, 0.5), (10000, 0.5)],
}
SESSION_MS = 6000
COUNTS = [1, 1, 1, 2, 3, 5, 10, 10, 11, 15, 20, 20, 25]  # records per produce step
WAITS = [1, 5, 6, 11, 30, 60]  # seconds


@dataclass(frozen=True)
class DrawOptions:
    unclean: bool = False  # enable unclean elections (config and elect-unclean steps)
    mode: str = "zk"
    brokers: int = 3
    min_steps: int = 4
    max_steps: int = 12
    aware: bool = True  # keep only steps the model says can run when their turn comes
    protocol: Protocol = Protocol.KIP_279  # rules the model follows while drawing
    weights: Mapping[str, float] = field(default_factory=lambda: dict(STEP_WEIGHTS))
    moves: Mapping[str, float] = field(default_factory=lambda: dict(MOVE_WEIGHTS))


def _choice(rng: random.Random, options: list[tuple[Any, float]]) -> Any:
    values, weights = zip(*options, strict=True)
    return rng.choices(values, weights)[0]


def candidate_seed(seed: int, index: int) -> int:
    """The run-time seed of candidate `index`: stable across Python versions."""
    digest = hashlib.sha256(f"logfork-explore:{seed}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def draw_cluster(rng: random.Random, options: DrawOptions) -> Cluster:
    rf = min(_choice(rng, CLUSTER_CHOICES["replication_factor"]), options.brokers)
    replicas = tuple(rng.sample(range(1, options.brokers + 1), rf))
    spare = [b for b in range(1, options.brokers + 1) if b not in replicas]
    min_isr = min(_choice(rng, CLUSTER_CHOICES["min.insync.replicas"]), rf)
    lag = _choice(rng, CLUSTER_CHOICES["replica.lag.time.max.ms"])
    return Cluster(
        mode=options.mode,
        brokers=options.brokers,
        replication_factor=rf,
        replicas=replicas,
        # As the scenarios do: the controller on a broker that holds no replica, if any.
        controller=(spare[0] if spare else None) if options.mode == "zk" else None,
        topic_config=TopicConfig(min_isr, options.unclean),
        broker_config=BrokerConfig(replica_lag_time_max_ms=lag, session_timeout_ms=SESSION_MS),
    )


# -- parameters of each kind ------------------------------------------------------------


def _replica_or(rng: random.Random, cluster: Cluster, roles: list[tuple[Any, float]]) -> Any:
    """A role by weight, or (with the weight left) one of the partition's replicas by id."""
    rest = 1 - sum(w for _, w in roles)
    pick = _choice(rng, [*roles, ("id", rest)])
    return rng.choice(cluster.replicas) if pick == "id" else pick


def _draw_produce(rng: random.Random, c: Cluster) -> Step:
    to = Role.LEADER if rng.random() < 0.9 else rng.choice(c.replicas)  # a zombie, maybe
    return Produce(rng.choice(COUNTS), rng.choice(["all", "1"]), to)


def _draw_hold_back(rng: random.Random, c: Cluster) -> Step:
    return HoldBack(_replica_or(rng, c, [(Role.FOLLOWER_IN_ISR, 0.8)]))


def _draw_cut(rng: random.Random, c: Cluster) -> Step:
    a = _replica_or(rng, c, [(Role.LEADER, 0.4), (Role.FOLLOWER_IN_ISR, 0.3)])
    b = _choice(
        rng,
        [(QUORUM, 0.3), (Role.CONTROLLER, 0.2), (Role.LEADER, 0.2), ("id", 0.3)],
    )
    if b == "id":
        b = rng.choice(c.broker_ids)
    return Cut(a, b)


def _draw_heal(rng: random.Random, c: Cluster) -> Step:
    return Heal()  # every cut: a specific heal is for shrinking to find


def _draw_expire_session(rng: random.Random, c: Cluster) -> Step:
    return ExpireSession(_replica_or(rng, c, [(Role.LEADER, 0.5), (Role.FOLLOWER_IN_ISR, 0.3)]))


def _draw_elect_preferred(rng: random.Random, c: Cluster) -> Step:
    return ElectPreferred()


def _draw_elect_unclean(rng: random.Random, c: Cluster) -> Step:
    return ElectUnclean(_replica_or(rng, c, [(Role.OUT_OF_SYNC, 0.8)]))


def _draw_kill(rng: random.Random, c: Cluster) -> Step:
    target = _replica_or(
        rng, c, [(Role.LEADER, 0.45), (Role.FOLLOWER_IN_ISR, 0.25), (Role.CONTROLLER, 0.1)]
    )
    if target == Role.CONTROLLER and c.mode == "kraft":
        target = Role.LEADER
    return Kill(target, "SIGKILL" if rng.random() < 0.6 else "SIGTERM")


def _draw_restart(rng: random.Random, c: Cluster) -> Step:
    return Restart(Role.ANY_BROKER if rng.random() < 0.7 else rng.choice(c.broker_ids))


def _draw_pause(rng: random.Random, c: Cluster) -> Step:
    return Pause(_replica_or(rng, c, [(Role.LEADER, 0.6), (Role.FOLLOWER_IN_ISR, 0.4)]))


def _draw_resume(rng: random.Random, c: Cluster) -> Step:
    return Resume(Role.ANY_BROKER)


def _draw_power_loss(rng: random.Random, c: Cluster) -> Step:
    target = _replica_or(rng, c, [(Role.LEADER, 0.5), (Role.FOLLOWER_IN_ISR, 0.3)])
    return PowerLoss(target, _choice(rng, [(None, 0.5), (1, 0.3), (2, 0.2)]))


def _draw_wait(rng: random.Random, c: Cluster) -> Step:
    return Wait(rng.choice(WAITS))


DRAW: dict[str, Callable[[random.Random, Cluster], Step]] = {
    "produce": _draw_produce,
    "hold-back": _draw_hold_back,
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
    "wait": _draw_wait,
}
ATTEMPTS = 3  # parameter draws per kind before the kind is set aside for this position

# Moves of two steps that operators and failures produce together, drawn as one with these
# weights beside STEP_WEIGHTS. Each makes a multi-step precondition of the scenarios
# likely: a preferred replica that lost leadership and came back (bounce, session-flap),
# and a write that one follower in the ISR does not get (held-write).
MOVE_WEIGHTS: dict[str, float] = {
    "bounce": 8,  # kill a broker (SIGKILL or SIGTERM), then restart that same broker
    "session-flap": 5,  # expire a broker's session, then heal its cut from the quorum
    "held-write": 8,  # hold a follower back, then produce
}


def _draw_move(rng: random.Random, c: Cluster, move: str) -> list[Step]:
    """The steps of a move; a later step names the broker of the first one by id once the
    model resolved it (`_pin`), so that the move stays one move whatever roles do."""
    if move == "bounce":
        return [_draw_kill(rng, c), Restart(Role.ANY_BROKER)]
    if move == "session-flap":
        return [_draw_expire_session(rng, c), Heal()]
    return [_draw_hold_back(rng, c), _draw_produce(rng, c)]


def _pin(step: Step, targets: dict[str, Any]) -> Step:
    """Name the broker an earlier step of the same move resolved to."""
    broker = targets.get("broker", targets.get("follower"))
    if broker is None:
        return step
    if isinstance(step, Restart):
        return Restart(broker)
    if isinstance(step, Heal):
        return Heal(broker, QUORUM)
    return step


def _weights(options: DrawOptions) -> dict[str, float]:
    return {
        k: w
        for k, w in {**options.weights, **options.moves}.items()
        if w > 0 and (options.unclean or k != "elect-unclean")
    }


def _next(
    rng: random.Random, cluster: Cluster, sim: Simulator | None, weights: dict[str, float]
) -> tuple[list[Step], Simulator | None]:
    """Draw the next step (or move). With a simulator, only what it says would run now; a
    kind that does not after ATTEMPTS draws is set aside for this position. Returns the
    steps (none: nothing can run) and the simulator after them."""
    pool = dict(weights)
    while pool:
        kind = rng.choices(list(pool), list(pool.values()))[0]
        for _ in range(ATTEMPTS if sim is not None else 1):
            if kind in MOVE_WEIGHTS:
                drawn = _draw_move(rng, cluster, kind)
            else:
                drawn = [DRAW[kind](rng, cluster)]
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
    weights = _weights(options)
    length = rng.randint(options.min_steps, options.max_steps)
    sim = Simulator(cluster, options.protocol) if options.aware else None
    steps: list[Step] = []
    while len(steps) < length:
        chosen, sim = _next(rng, cluster, sim, weights)
        if not chosen or len(steps) + len(chosen) > options.max_steps:
            break  # nothing can run now, or a move would not fit: the schedule ends here
        steps.extend(chosen)
    origin = {"explore_seed": seed, "index": index, "drawn": "aware" if options.aware else "blind"}
    return Schedule(cluster, candidate_seed(seed, index), tuple(steps), origin)


def draw_many(seed: int, count: int, options: DrawOptions | None = None) -> list[Schedule]:
    return [draw(seed, i, options) for i in range(count)]


# -- ranking ------------------------------------------------------------------------------


def score(p: Prediction) -> float:
    """How promising a prediction is. A predicted finding scores 1000 (plus 100 when the
    replicas differ below the high watermark: committed data); near misses add up below
    that, so that the search can climb towards findings; every skipped step costs one
    point."""
    points = 0.0
    if p.failure() is not None:
        points += 1000
        if p.below_high_watermark:
            points += 100
    points += 60 * min(p.max_isr_divergence, 2)  # ISR members held different data
    points += 30 * min(p.risky_elections, 2)  # a clean leader lacked an ISR member's data
    points += 5 * min(p.clean_elections, 4)  # leadership moved within the ISR
    points += 80 * min(p.divergent_failovers, 1)  # ... to a leader a cut-off replica differs from
    points += 20 * max(0, p.max_divergent_replicas - 1)  # any replicas held different data
    points += 10 * p.isr_gap  # a follower kept in the ISR lacked the leader's data
    points += 5 * min(len(p.lost_acknowledged), 3)  # acks=all lost, excused
    points += 2 * min(len(p.lost_acks1), 3)  # acknowledged acks=1 writes truncated
    points += 5 * min(p.unclean_elections, 3)
    points -= p.skipped
    return points


def signature(p: Prediction) -> str:
    """The kind of candidate, for variety: what failed (or, for a near miss, the furthest
    it got towards a divergence), and whether an unclean election or a power loss was
    involved (their findings are judged by other rules)."""
    causes = [c for c, n in (("unclean", p.unclean_elections), ("power-loss", p.power_losses)) if n]
    what = p.failure()
    if what is None:
        stages = (
            ("divergent-failover", p.divergent_failovers > 0),
            ("isr-divergence", p.max_isr_divergence > 0),
            ("risky-election", p.risky_elections > 0),
            ("divergence", p.max_divergent_replicas > 1),
            ("isr-gap", p.isr_gap),
        )
        what = "near:" + next((name for name, seen in stages if seen), "quiet")
    return f"{what}/{'+'.join(causes) or 'clean'}"


@dataclass
class Candidate:
    index: int  # the order of creation: drawn first, then bred by the search
    schedule: Schedule
    prediction: Prediction
    score: float

    @property
    def signature(self) -> str:
        return signature(self.prediction)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "score": self.score,
            "predicted": self.prediction.summary(),
            "failure": self.prediction.failure(),
            "origin": self.schedule.origin,
        }


def evaluate(
    schedules: Iterable[Schedule], protocol: Protocol, *, first_index: int = 0
) -> list[Candidate]:
    out = []
    for i, schedule in enumerate(schedules, start=first_index):
        prediction = simulate(schedule, protocol)
        out.append(Candidate(i, schedule, prediction, score(prediction)))
    return out


def rank(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Most promising first; equal scores keep the order of creation. Predicted findings
    of different kinds take turns (best of each kind first), so that one kind of finding,
    bred many times over, does not crowd out the others."""
    ordered = sorted(candidates, key=lambda c: (-c.score, c.index))
    findings = [c for c in ordered if c.prediction.failure() is not None]
    rest = [c for c in ordered if c.prediction.failure() is None]
    groups: dict[str, list[Candidate]] = {}
    for c in findings:
        groups.setdefault(c.signature, []).append(c)
    turns: list[Candidate] = []
    while any(groups.values()):
        for group in groups.values():
            if group:
                turns.append(group.pop(0))
    return turns + rest


def prescreen(candidates: Iterable[Candidate], min_score: float = 1000) -> list[Candidate]:
    """Only the candidates the model predicts a finding for (by default), ranked."""
    return [c for c in rank(candidates) if c.score >= min_score]


# -- the search: breed the most promising candidates, on the model alone -------------------

# How a child differs from its parent, and how often.
MUTATIONS: dict[str, float] = {
    "insert": 4,  # a step or move drawn as `draw` does, where the model says it can run
    "append": 2,
    "delete": 1,  # a step goes
    "recount": 1,  # a produce writes another number of records
    "acks": 1,  # a produce flips acks
    "repeat": 1,  # a run of 2 to 4 steps is repeated right after itself
    "splice": 2,  # the start of this schedule, the end of another of the same cluster
}


@dataclass(frozen=True)
class SearchOptions:
    # 15 rounds of 100 parents: with 200 candidates, the search (about 5 s) ranks a
    # KAFKA-6361-class schedule first or second for 17 of seeds 1-20 under KIP-101 rules
    # (none in the pool for seeds 7, 17 and 19).
    rounds: int = 15
    elite: int = 100  # the parents of each round, the best of every kind in turn
    niche: float = 0.1  # the most of the pool one kind of finding may hold (near misses: 2x)
    max_steps: int = 16


def _key(schedule: Schedule) -> str:
    return dumps(replace(schedule, seed=0, origin={}))


def mutate(
    schedule: Schedule,
    rng: random.Random,
    options: DrawOptions,
    max_steps: int = 16,
    partners: list[Schedule] | None = None,
) -> Schedule:
    """A child of `schedule` by one mutation (MUTATIONS); `partners` are the schedules it
    may be spliced with (those of the same cluster are)."""
    steps = list(schedule.steps)
    op = _choice(rng, list(MUTATIONS.items()))
    produces = [i for i, s in enumerate(steps) if isinstance(s, Produce)]
    mates = [p for p in partners or [] if p.cluster == schedule.cluster and p is not schedule]
    if op in ("insert", "append", "repeat") and len(steps) >= max_steps:
        op = "delete"
    if (op in ("recount", "acks") and not produces) or (op == "repeat" and len(steps) < 2):
        op = "insert"
    if op == "splice" and not mates:
        op = "insert"
    if op == "delete" and steps:
        del steps[rng.randrange(len(steps))]
    elif op == "repeat":
        size = rng.randint(2, min(4, len(steps)))
        start = rng.randint(0, len(steps) - size)
        steps[start + size : start + size] = steps[start : start + size]
        del steps[max_steps:]
    elif op == "splice":
        mate = rng.choice(mates)
        cut, other = rng.randint(0, len(steps)), rng.randint(0, len(mate.steps))
        steps = (steps[:cut] + list(mate.steps[other:]))[:max_steps]
    elif op in ("recount", "acks"):
        i = rng.choice(produces)
        old = steps[i]
        assert isinstance(old, Produce)
        if op == "recount":
            steps[i] = replace(old, count=rng.choice(COUNTS))
        else:
            steps[i] = replace(old, acks="1" if old.acks == "all" else "all")
    else:
        at = len(steps) if op == "append" else rng.randint(0, len(steps))
        sim: Simulator | None = Simulator(schedule.cluster, options.protocol)
        assert sim is not None
        for step in steps[:at]:
            sim.apply(step)
        # One to three draws in a row: some plateaus take two steps to cross (a leader
        # change and a write in the new epoch).
        inserted: list[Step] = []
        for _ in range(_choice(rng, [(1, 0.6), (2, 0.3), (3, 0.1)])):
            chosen, sim = _next(rng, schedule.cluster, sim, _weights(options))
            inserted += chosen
        steps[at:at] = inserted
    return replace(schedule, steps=tuple(steps))


def search(
    seed: int,
    count: int,
    protocol: Protocol,
    options: DrawOptions | None = None,
    search_options: SearchOptions | None = None,
) -> list[Candidate]:
    """Model-guided search: draw `count` candidates; then, round after round, breed the
    best (`elite`, ranked) into `count` children by one mutation each, and keep the best
    `count` of parents and children. No cluster is involved: every candidate is only
    simulated. Returns the final pool, ranked: the order `explore` runs them in."""
    options = options or DrawOptions(protocol=protocol)
    so = search_options or SearchOptions()
    pool = evaluate(draw_many(seed, count, options), protocol)
    seen = {_key(c.schedule) for c in pool}
    next_index = count
    for generation in range(1, so.rounds + 1):
        rng = random.Random(f"{seed}:search:{generation}")
        parents = _elite(pool, so.elite)
        children = []
        partners = [p.schedule for p in parents]
        for _ in range(count):
            parent = rng.choice(parents)
            child = mutate(parent.schedule, rng, options, so.max_steps, partners)
            key = _key(child)
            if key in seen:
                continue
            seen.add(key)
            origin = {
                "explore_seed": seed,
                "index": next_index + len(children),
                "parent": parent.index,
                "generation": generation,
            }
            children.append(
                replace(child, origin=origin, seed=candidate_seed(seed, origin["index"]))
            )
        pool += evaluate(children, protocol, first_index=next_index)
        next_index += len(children)
        pool = _survivors(pool, count, max(1, int(count * so.niche)))
    return rank(pool)


def _elite(pool: list[Candidate], size: int) -> list[Candidate]:
    """The parents of the next round: the best of every kind (findings and near misses
    alike) in turn, so that each kind keeps breeding."""
    groups: dict[str, list[Candidate]] = {}
    for c in sorted(pool, key=lambda c: (-c.score, c.index)):
        groups.setdefault(c.signature, []).append(c)
    parents: list[Candidate] = []
    while len(parents) < size and any(groups.values()):
        for group in groups.values():
            if group and len(parents) < size:
                parents.append(group.pop(0))
    return parents


def _survivors(pool: list[Candidate], count: int, cap: int) -> list[Candidate]:
    """The best `count`, with at most `cap` of any one kind of finding: otherwise the first
    kind found breeds until it fills the pool and the search stops looking elsewhere."""
    kept: list[Candidate] = []
    per_kind: dict[str, int] = {}
    for c in rank(pool):
        # Near misses get a wider niche: they are what the search climbs from.
        limit = cap if c.prediction.failure() is not None else 2 * cap
        if per_kind.get(c.signature, 0) >= limit:
            continue
        per_kind[c.signature] = per_kind.get(c.signature, 0) + 1
        kept.append(c)
        if len(kept) == count:
            break
    return kept


def plan(
    seed: int,
    count: int,
    protocol: Protocol,
    options: DrawOptions | None = None,
    *,
    guided: bool = True,
    search_options: SearchOptions | None = None,
) -> list[Candidate]:
    """The order `explore` would run `count` candidates in: the model-guided search's
    ranking, or (unguided) the drawn candidates as drawn."""
    options = options or DrawOptions(protocol=protocol)
    if guided:
        return search(seed, count, protocol, options, search_options)
    return evaluate(draw_many(seed, count, options), protocol)


# -- what counts as a KAFKA-6361-class schedule -----------------------------------------


def kafka_6361_class(schedule: Schedule) -> bool:
    """Replicas diverge, or a follower gets stuck on out-of-order offsets, under KIP-101
    rules (0.11 to 1.1) with clean elections only and no power loss, and converge under
    KIP-279 rules: the class of KAFKA-6361 (KIP-279 scenario 1), which KIP-279 fixed in
    2.0."""
    old = simulate(schedule, Protocol.KIP_101)
    out_of_order = any(why.startswith("out-of-order") for why in old.stuck.values())
    if not (old.outcome is Fate.DIVERGED or out_of_order):
        return False
    if old.unclean_elections or old.power_losses:
        return False
    return simulate(schedule, Protocol.KIP_279).outcome is Fate.CONSISTENT


def first_drawn_hit(
    seed: int,
    protocol: Protocol,
    hit: Callable[[Schedule], bool],
    options: DrawOptions | None = None,
    limit: int = 5000,
    start: int = 0,
) -> int | None:
    """Without guidance: the 1-based position of the first drawn candidate from `start` on
    that `hit` accepts (None within `limit`): how many schedules an explore without the
    model would run to get there."""
    options = options or DrawOptions(protocol=protocol)
    for index in range(start, limit):
        if hit(draw(seed, index, options)):
            return index + 1
    return None


@dataclass(frozen=True)
class Figures:
    seed: int
    count: int
    drawn_hits: int  # candidates of the class among the first `count` drawn
    first_drawn: int | None  # 1-based position of the first hit in drawing order
    guided_hits: int  # candidates of the class in the guided search's pool of `count`
    first_guided: int | None  # 1-based position of the first hit in its ranking


def first_hits(
    seed: int,
    count: int,
    protocol: Protocol,
    hit: Callable[[Schedule], bool],
    options: DrawOptions | None = None,
    search_options: SearchOptions | None = None,
    limit: int = 5000,
) -> Figures:
    """How many candidates would run before the first one `hit` accepts: as drawn (no
    guidance, looking up to `limit` draws) and in the order of the model-guided search."""
    options = options or DrawOptions(protocol=protocol)
    drawn = [hit(s) for s in draw_many(seed, count, options)]
    first_drawn = drawn.index(True) + 1 if True in drawn else None
    if first_drawn is None and limit > count:
        first_drawn = first_drawn_hit(seed, protocol, hit, options, limit, start=count)
    guided = [hit(c.schedule) for c in search(seed, count, protocol, options, search_options)]
    first_guided = guided.index(True) + 1 if True in guided else None
    return Figures(seed, count, sum(drawn), first_drawn, sum(guided), first_guided)


def predicted_finding(protocol: Protocol) -> Callable[[Schedule], bool]:
    """`hit` for first_hits: the model predicts any finding under `protocol`."""
    return lambda schedule: simulate(schedule, protocol).failure() is not None
