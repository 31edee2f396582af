"""Rank candidate schedules by the divergence the protocol model predicts, and breed the most
promising in a model-only search, so that `logfork explore` runs the promising ones first.

Every candidate (suites.explore.generate draws them) is simulated under the release's
rules (checkers.simulate) and scored (`score`): a predicted finding first (divergence, a
stuck follower, an acknowledged acks=all write lost where nothing excuses it), then near
misses (replicas that held different data at one offset at some point, acknowledged
acks=1 writes truncated, unclean elections), and fewer skipped steps. Candidates run in
that order, except that a finding which another winner of a controller election would
undo (`races`) runs after the steady ones; ties keep the drawing order. The search
(`search`) breeds the best of every kind by one mutation each (MUTATIONS), round after
round, on the model alone.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from basics.protocol import Protocol
from checkers.model import Fate
from checkers.simulate import Prediction, SimOptions, Simulator, simulate
from runrecord.schedule import Schedule, dumps
from runrecord.steps.base import Step
from suites.explore.drawing.choices import choose
from suites.explore.drawing.generate import (
    DrawOptions,
    candidate_seed,
    draw,
    draw_many,
    kind_weights,
    next_steps,
)
from suites.explore.drawing.registry import drawing_of

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
    # KIP-966's last-known-leader election: the controller's path out of an empty ISR and
    # ELR, where it elects without the ISR's guarantee (KAFKA-19522 elected a fenced one).
    points += 40 * min(p.last_known_elections, 1)
    # A late EndTxn ended a transaction its producer believes open (KAFKA-17754); the
    # producer going on with it is what the model cannot follow, and where a hanging or
    # torn transaction would come from.
    points += 40 * min(p.late_ends, 1) + 150 * bool(p.late_ends and p.unpredictable)
    # A fetch response held back behind a filler on a slow link, and one whose slice the
    # leader's log had rewritten by the time it was read (KAFKA-18723's race); between the
    # two, its follower cut off from the quorum, its sender following a newer leader, then
    # the sender's log changed under it.
    points += 20 * min(p.late_slices, 1) + 80 * min(p.late_rewritten, 1)
    points += 15 * p.late_stage
    # ... and a follower that appended what the rewritten slice held: a newer epoch's
    # batches from its older leader, which diverges where it held what that leader lacks.
    points += 100 * min(p.late_appends, 1)
    points -= p.skipped
    return points


def signature(p: Prediction) -> str:
    """The kind of candidate, for variety: what failed (or, for a near miss, the furthest
    it got towards a divergence), and whether an unclean election or a power loss was
    involved (their findings are judged by other rules)."""
    counts = (
        ("last-known-leader", p.last_known_elections),
        ("unclean", p.unclean_elections),
        ("power-loss", p.power_losses),
    )
    causes = [c for c, n in counts if n]
    what = p.failure()
    if what is None:
        stages = (
            ("divergent-failover", p.divergent_failovers > 0),
            ("isr-divergence", p.max_isr_divergence > 0),
            ("risky-election", p.risky_elections > 0),
            ("divergence", p.max_divergent_replicas > 1),
            ("isr-gap", p.isr_gap),
            ("late-endtxn", p.late_ends > 0),
            ("late-append", p.late_appends > 0),
            ("late-fetch", p.late_rewritten > 0),
            ("late-refilled", p.late_stage >= 4),
            ("late-truncated", p.late_stage >= 3),
            ("late-follows", p.late_stage >= 2),
            ("late-isolated", p.late_stage >= 1),
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
    op = choose(rng, list(MUTATIONS.items()))
    # The steps a mutation of one step applies to (recount and acks: a write's).
    mutable = [i for i, s in enumerate(steps) if op in drawing_of(s).mutations]
    mates = [p for p in partners or [] if p.cluster == schedule.cluster and p is not schedule]
    if op in ("insert", "append", "repeat") and len(steps) >= max_steps:
        op = "delete"
    if (op in ("recount", "acks") and not mutable) or (op == "repeat" and len(steps) < 2):
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
        i = rng.choice(mutable)
        mutate = drawing_of(steps[i]).mutate
        assert mutate is not None
        steps[i] = mutate(steps[i], op, rng)
    else:
        at = len(steps) if op == "append" else rng.randint(0, len(steps))
        sim: Simulator | None = Simulator(schedule.cluster, options.protocol)
        assert sim is not None
        for step in steps[:at]:
            sim.apply(step)
        # One to three draws in a row: some plateaus take two steps to cross (a leader
        # change and a write in the new epoch).
        inserted: list[Step] = []
        for _ in range(choose(rng, [(1, 0.6), (2, 0.3), (3, 0.1)])):
            weights = kind_weights(options)
            chosen, sim = next_steps(rng, schedule.cluster, sim, weights, options)
            inserted += chosen
        steps[at:at] = inserted
    return replace(schedule, steps=tuple(steps))


def search(
    seed: int,
    count: int,
    protocol: Protocol,
    options: DrawOptions | None = None,
    search_options: SearchOptions | None = None,
    drawn: list[Candidate] | None = None,
) -> list[Candidate]:
    """Model-guided search: draw `count` candidates (or start from `drawn`, those already
    drawn and simulated); then, round after round, breed the best (`elite`, ranked) into
    `count` children by one mutation each, and keep the best `count` of parents and
    children. No cluster is involved: every candidate is only simulated. Returns the final
    pool, ranked: the order `explore` runs them in."""
    options = options or DrawOptions(protocol=protocol)
    so = search_options or SearchOptions()
    pool = list(drawn) if drawn is not None else evaluate(draw_many(seed, count, options), protocol)
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
    if not guided:
        return evaluate(draw_many(seed, count, options), protocol)
    drawn = evaluate(draw_many(seed, count, options), protocol)
    ranked = search(seed, count, protocol, options, search_options, drawn)
    # Findings that hang on a race run after the steady ones, before the rest.
    ordered = sorted(ranked, key=lambda c: (c.prediction.failure() is None, races(c, protocol)))
    # The search breeds from a few parents, and their descendants can fill the whole pool
    # with one cluster shape: the drawn candidates are where the others still are.
    return cover_kinds(ordered, drawn)


def cover_kinds(ranked: list[Candidate], drawn: Sequence[Candidate] = ()) -> list[Candidate]:
    """The predicted findings as ranked; then, before the rest, each candidate that brings
    a step kind or a cluster shape (`_kinds`) none ahead of it has, in ranked order: the
    model ranks a step whose effect it predicts to be harmless (a held AlterPartition, a
    quorum fault) low, and a budget of a few schedules would never run it, so an unknown
    bug behind it would never be met."""
    findings = [c for c in ranked if c.prediction.failure() is not None]
    rest = [c for c in ranked if c.prediction.failure() is None]
    seen = {kind for c in findings for kind in _kinds(c)}
    known = {_key(c.schedule) for c in ranked}
    extra = [c for c in drawn if c.prediction.failure() is None and _key(c.schedule) not in known]
    first: list[Candidate] = []
    for c in rest + extra:
        kinds = _kinds(c)
        if kinds - seen:
            first.append(c)
            seen |= kinds
    chosen = {id(c) for c in first}
    return findings + first + [c for c in rest if id(c) not in chosen]


def _kinds(candidate: Candidate) -> set[str]:
    """What `cover_kinds` brings forward: its step kinds, its cluster's shape (the
    background partitions, which the model's partition 0 never rewards, the replication
    factor, min.insync.replicas), and a late EndTxn that ends a transaction its producer
    then goes on with (KAFKA-17754: where the model stops predicting)."""
    schedule, p = candidate.schedule, candidate.prediction
    c = schedule.cluster
    shape = {
        f"background_partitions={c.background_partitions}",
        f"replication_factor={c.replication_factor}",
        f"min.insync.replicas={c.topic_config.min_insync_replicas}",
    }
    late = {"late-endtxn"} if p.late_ends and p.unpredictable else set()
    return {step.KIND for step in schedule.steps} | shape | late


def races(candidate: Candidate, protocol: Protocol) -> bool:
    """Whether the candidate's predicted finding hangs on who wins a ZooKeeper-mode
    controller election: the model hands the role to the lowest registered broker, Kafka
    to whichever broker creates /controller first, and another winner may send the
    schedule elsewhere (seen on 1.1.1: one seed's first schedule diverged or not as broker
    1 or 2 won)."""
    p, schedule = candidate.prediction, candidate.schedule
    failure = p.failure()
    if failure is None or schedule.cluster.mode != "zk":
        return False
    for step in (r.index for r in p.steps if r.controller is not None):
        for b in schedule.cluster.broker_ids:
            other = SimOptions(controller_after=((step, b),))
            if simulate(schedule, protocol, options=other).failure() != failure:
                return True
    return False


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
