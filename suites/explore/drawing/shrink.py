"""Shrink a failing schedule to a minimal one that still fails the same way.

Delta debugging against a runner: a callable that runs a schedule (on real brokers, or in
the simulator) and returns the kind of failure it saw ("diverged", "stuck", ...) or None
when the run passed. Runs on real clusters are not perfectly repeatable, so a candidate
counts as failing only if it fails again when re-run (`confirm` runs in a row, all with
the original failure's kind), as Hypothesis treats flaky examples; a candidate that fails
and then passes is recorded as flaky and not taken. The original itself must fail
`confirm` times, or there is nothing to shrink.

Candidates, in passes (below) repeated until none makes progress
or the budget of runs is spent:

1. drop steps: chunks of half the schedule, then quarters, down to single steps (and, as
   a last resort, any two steps apart);
2. merge: adjacent heals into one heal of everything, a heal of one link into a heal of
   everything, adjacent produces (same acks and target) into one;
3. reduce: produce counts (to 1, to half, by one), power-loss `lose`, wait seconds;
4. simplify targets: a broker id or role becomes a simpler role (ROLE_ORDER), SIGTERM
   becomes SIGKILL;
5. simplify the cluster: a replication factor of 3 becomes 2, min.insync.replicas 1,
   per-broker overrides go, fewer brokers.

Every candidate is checked as a schedule file would be (an invalid one is never run), and
a candidate already tried is not run again.

Two runs in a row are cheap evidence, enough to search with, and a race can pass them: the
minimal handed over must also pass a `gate` (fresh runs in a row, every one failing the
same way). Where it does not, the schedules taken before it are gated in turn, the
latest first, back to the original: the finding is the smallest that passed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, cast

from basics.threads import run_threads
from runrecord.schedule import Cluster, Schedule, ScheduleError, dumps, validate
from runrecord.steps.base import QUORUM, Role, step_targets
from suites.explore.drawing import families  # noqa: F401 - every kind registered
from suites.explore.drawing.registry import drawing_of

Runner = Callable[[Schedule], str | None]

FAILING, PASSING, FLAKY, INVALID = "failing", "passing", "flaky", "invalid"
SCREENED = "screened"  # the prescreen ruled it out: not run


@dataclass
class Attempt:
    number: int
    change: str  # what this candidate changed, in words
    steps: int  # its length
    runs: list[str | None]  # what each run returned
    verdict: str  # FAILING (confirmed), PASSING, FLAKY (failed, then not), INVALID
    schedule: Schedule | None = None
    problem: str = ""  # why an invalid candidate was not run

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "change": self.change,
            "steps": self.steps,
            "runs": self.runs,
            "verdict": self.verdict,
            "problem": self.problem,
        }


@dataclass
class ShrinkResult:
    original: Schedule
    minimal: Schedule
    failure: str | None  # the kind of failure kept throughout (None: never reproduced)
    reproducible: bool
    attempts: list[Attempt] = field(default_factory=list)
    runs: int = 0
    exhausted: bool = False  # the budget ran out before no pass made progress
    gate: int = 0  # runs in a row the minimal had to fail before it was handed over
    gated: bool = False  # the minimal passed the gate (False also when none was asked)

    def log(self) -> list[str]:
        lines = []
        for a in self.attempts:
            runs = ", ".join(r or "pass" for r in a.runs) or "not run"
            extra = f": {a.problem}" if a.problem else ""
            lines.append(f"#{a.number} {a.change} ({a.steps} steps): {a.verdict} [{runs}]{extra}")
        return lines


# -- the passes ---------------------------------------------------------------------------
# Each takes the current schedule and returns a smaller one that still fails, or None. A
# pass proposes candidates in order and asks the shrinker which is the first that fails,
# confirmed (`Trier.first`, `Trier.check`); the shrinker decides how they are run (one at a
# time, or several at once). What a step kind can be reduced, merged, widened or simplified
# to, its family says (suites.explore.drawing.registry).


class Trier(Protocol):
    def check(self, candidate: Schedule, change: str) -> bool: ...

    def first(self, candidates: Iterable[tuple[Schedule, str]]) -> tuple[int, Schedule] | None: ...


# Simpler first: the roles a replay resolves most predictably, then broker ids.
ROLE_ORDER: tuple[Any, ...] = (
    Role.LEADER,
    Role.FOLLOWER_IN_ISR,
    Role.OUT_OF_SYNC,
    Role.ANY_BROKER,
    Role.CONTROLLER,
)


def _first_failing(
    current: Schedule, s: Trier, candidates: Iterator[tuple[Schedule, str]]
) -> Schedule | None:
    found = s.first(candidates)
    return found[1] if found is not None else None


def _drop(current: Schedule, s: Trier) -> Schedule | None:
    """Remove chunks of steps: halves, then quarters, down to single steps (delta
    debugging's complements). After a chunk goes, the next chunk starts where it was."""
    improved = None
    size = max(1, len(current.steps) // 2)
    while current.steps and size >= 1:
        start = 0
        while start < len(current.steps):
            found = s.first(_chunks(current, start, size))
            if found is None:
                break
            # The chunk at start + k * size went; those before it stay, and the next chunk
            # starts where it was.
            k, current = found
            improved = current
            start += k * size
        size //= 2
    return improved


def _chunks(current: Schedule, start: int, size: int) -> Iterator[tuple[Schedule, str]]:
    """`current` without the chunk of `size` steps at start, start + size, ..."""
    steps = list(current.steps)
    for at in range(start, len(steps), size):
        end = min(at + size, len(steps)) - 1
        what = f"drop step {at}" if at == end else f"drop steps {at}-{end}"
        yield current.with_steps(steps[:at] + steps[at + size :]), what


def _drop_pairs(current: Schedule, s: Trier) -> Schedule | None:
    """Remove two steps that are not next to each other: a fault and what it set up for
    (a hold-back and the write it held back) often go only together."""

    def candidates(current: Schedule) -> Iterator[tuple[Schedule, str]]:
        steps = list(current.steps)
        for i in range(len(steps)):
            for j in range(i + 2, len(steps)):
                rest = steps[:i] + steps[i + 1 : j] + steps[j + 1 :]
                yield current.with_steps(rest), f"drop steps {i} and {j}"

    return _repeat(current, s, candidates)


def _merge(current: Schedule, s: Trier) -> Schedule | None:
    def candidates(current: Schedule) -> Iterator[tuple[Schedule, str]]:
        steps = list(current.steps)
        for i in range(len(steps) - 1):
            a, b = steps[i], steps[i + 1]
            merge = drawing_of(a).merge
            found = merge(a, b) if merge is not None and type(a) is type(b) else None
            if found is not None:
                merged, what = found
                yield (
                    current.with_steps([*steps[:i], merged, *steps[i + 2 :]]),
                    f"{what} at steps {i} and {i + 1}",
                )
        for i, step in enumerate(steps):
            widen = drawing_of(step).widen
            wider = widen(step) if widen is not None else None
            if wider is not None:
                new, what = wider
                yield current.with_steps([*steps[:i], new, *steps[i + 1 :]]), f"step {i} {what}"

    return _repeat(current, s, candidates)


def _repeat(
    current: Schedule,
    s: Trier,
    make: Callable[[Schedule], Iterator[tuple[Schedule, str]]],
) -> Schedule | None:
    """Apply a pass's first failing candidate, again and again, while one fails."""
    improved = None
    while True:
        found = _first_failing(current, s, make(current))
        if found is None:
            return improved
        current = improved = found


def _reduce(current: Schedule, s: Trier) -> Schedule | None:
    def candidates(current: Schedule) -> Iterator[tuple[Schedule, str]]:
        steps = list(current.steps)
        for i, step in enumerate(steps):
            for new, what in drawing_of(step).reduce(step):
                yield current.with_steps([*steps[:i], new, *steps[i + 1 :]]), f"step {i}: {what}"

    return _repeat(current, s, candidates)


def _simpler_targets(value: Any) -> list[Any]:
    if value == QUORUM or value is None:
        return []
    if isinstance(value, Role):
        return list(ROLE_ORDER[: ROLE_ORDER.index(value)])
    return [*ROLE_ORDER, *range(1, value)]


def _simplify_targets(current: Schedule, s: Trier) -> Schedule | None:
    def candidates(current: Schedule) -> Iterator[tuple[Schedule, str]]:
        steps = list(current.steps)
        for i, step in enumerate(steps):
            for name, value in step_targets(step):
                for simpler in _simpler_targets(value):
                    new = replace(step, **{name: simpler})
                    yield (
                        current.with_steps([*steps[:i], new, *steps[i + 1 :]]),
                        (f"step {i}: {name} {value} -> {simpler}"),
                    )
            for new, what in drawing_of(step).simplify(step):
                yield current.with_steps([*steps[:i], new, *steps[i + 1 :]]), f"step {i}: {what}"

    return _repeat(current, s, candidates)


def _simplify_cluster(current: Schedule, s: Trier) -> Schedule | None:
    def candidates(current: Schedule) -> Iterator[tuple[Schedule, str]]:
        c = current.cluster
        options: list[tuple[Cluster, str]] = []
        if c.replication_factor == 3:
            topic = replace(
                c.topic_config, min_insync_replicas=min(c.topic_config.min_insync_replicas, 2)
            )
            options.append(
                (
                    replace(c, replication_factor=2, replicas=c.replicas[:2], topic_config=topic),
                    "replication factor 3 -> 2",
                )
            )
        if c.topic_config.min_insync_replicas > 1:
            topic = replace(c.topic_config, min_insync_replicas=1)
            options.append((replace(c, topic_config=topic), "min.insync.replicas -> 1"))
        if c.topic_config.flush_messages is not None:
            topic = replace(c.topic_config, flush_messages=None)
            options.append((replace(c, topic_config=topic), "no flush.messages"))
        if c.node_config:
            options.append((replace(c, node_config={}), "no per-broker overrides"))
        needed = max([*c.replicas, c.controller or 0, *_named_brokers(current)])
        if c.brokers > max(needed, c.replication_factor, 2):
            options.append(
                (replace(c, brokers=c.brokers - 1), f"brokers {c.brokers} -> {c.brokers - 1}")
            )
        for cluster, what in options:
            yield replace(current, cluster=cluster), what

    return _repeat(current, s, candidates)


def _named_brokers(schedule: Schedule) -> list[int]:
    return [
        v
        for step in schedule.steps
        for _, v in step_targets(step)
        if isinstance(v, int) and not isinstance(v, bool)
    ]


# Cheap passes first: the shrinker goes back to the first after any progress.
PASSES: tuple[Callable[[Schedule, Trier], Schedule | None], ...] = (
    _drop,
    _merge,
    _reduce,
    _simplify_targets,
    _simplify_cluster,
    _drop_pairs,
)


class _Budget(Exception):
    pass


@dataclass
class _Pending:
    """A candidate that must be run to be decided."""

    attempt: Attempt
    candidate: Schedule  # validated
    key: str


class _Shrinker:
    def __init__(
        self,
        runners: Sequence[Runner],
        budget: int,
        confirm: int,
        same_failure: bool,
        prescreen: Callable[[Schedule], str | None] | None = None,
        tried: dict[str, str] | None = None,
    ) -> None:
        self.runners = list(runners)
        self.prescreen = prescreen
        self.budget = budget
        self.confirm = max(1, confirm)
        self.same_failure = same_failure
        self.runs = 0
        self.attempts: list[Attempt] = []
        self.tried: dict[str, str] = {} if tried is None else tried
        self.retried: set[str] = set()
        self.failure: str | None = None
        # The candidate taken last. Every pass takes a failing candidate as its new current
        # schedule at once, so this is the smallest so far, also when the budget runs out in
        # the middle of a pass that had already improved on its start.
        self.smallest: Schedule | None = None
        self.taken: list[Schedule] = []  # every candidate taken, in order (for the gate)
        self._lock = threading.Lock()  # the run count, with several runners at once

    def _run(
        self, schedule: Schedule, runner: Runner | None = None, *, budgeted: bool = True
    ) -> str | None:
        with self._lock:
            if budgeted and self.runs >= self.budget:
                raise _Budget
            self.runs += 1
        return (runner or self.runners[0])(schedule)

    def _prepare(self, candidate: Schedule, change: str) -> bool | _Pending:
        """Decide a candidate without running it where that is possible (invalid, tried
        before, ruled out by the prescreen): whether a pass takes it. Else what to run."""
        attempt = Attempt(len(self.attempts) + 1, change, len(candidate.steps), [], PASSING)
        try:
            candidate = validate(candidate)
        except ScheduleError as exc:
            attempt.verdict, attempt.problem = INVALID, str(exc)
            self.attempts.append(attempt)
            return False
        key = _key(candidate)
        if key in self.tried:
            # Decided already, except that a flaky candidate gets one more chance (a real
            # cluster's bad luck should not rule a step out for the whole shrink).
            if self.tried[key] != FLAKY or key in self.retried:
                return self._taken(candidate, self.tried[key])
            self.retried.add(key)
        attempt.schedule = candidate
        if self.prescreen is not None and (why := self.prescreen(candidate)) is not None:
            attempt.verdict, attempt.problem = SCREENED, why
            self.attempts.append(attempt)
            self.tried[key] = SCREENED
            return False
        return _Pending(attempt, candidate, key)

    def _confirm(self, pending: _Pending, runner: Runner) -> None:
        """Run a candidate `confirm` times in a row on one runner; sets its verdict."""
        attempt = pending.attempt
        for i in range(self.confirm):
            result = self._run(pending.candidate, runner)
            attempt.runs.append(result)
            if self._matches(result):
                continue
            if i > 0:
                attempt.verdict = FLAKY  # failed, then did not: not taken
            elif result is not None:
                attempt.problem = f"fails as {result!r}, not {self.failure!r}"
            break
        else:
            attempt.verdict = FAILING

    def check(self, candidate: Schedule, change: str) -> bool:
        """Does the candidate fail, confirmed, the same way? Records the attempt."""
        pending = self._prepare(candidate, change)
        if isinstance(pending, bool):
            return pending
        if self.runs + self.confirm > self.budget:
            raise _Budget  # not enough runs left to confirm a failure
        self.attempts.append(pending.attempt)
        self._confirm(pending, self.runners[0])
        self.tried[pending.key] = pending.attempt.verdict
        return self._taken(pending.candidate, pending.attempt.verdict)

    def first(self, candidates: Iterable[tuple[Schedule, str]]) -> tuple[int, Schedule] | None:
        """The position and the schedule of the first candidate that fails, confirmed, as a
        pass would find it trying them in order. With several runners the next ones that
        need runs are run at once, one per runner: the first failing among them is taken,
        the runs spent on those after it are the price of the speed (their verdicts are
        kept, should a later pass meet them again)."""
        items = enumerate(candidates)
        if len(self.runners) == 1:
            for position, (candidate, change) in items:
                if self.check(candidate, change):
                    return position, cast(Schedule, self.smallest)
            return None
        while True:
            batch: list[tuple[int, _Pending]] = []
            known: tuple[int, Schedule] | None = None  # failing, decided without a run
            room = min(len(self.runners), (self.budget - self.runs) // self.confirm)
            for position, (candidate, change) in items:
                pending = self._prepare(candidate, change)
                if pending is True:
                    known = (position, cast(Schedule, self.smallest))
                    break
                if pending is False:
                    continue
                if room == 0:
                    raise _Budget  # not enough runs left to confirm a failure
                batch.append((position, pending))
                if len(batch) == room:
                    break
            if not batch:
                return known
            for _, pending in batch:
                pending.attempt.number = len(self.attempts) + 1  # numbered as recorded
                self.attempts.append(pending.attempt)
            self._run_batch([pending for _, pending in batch])
            for _, pending in batch:
                self.tried[pending.key] = pending.attempt.verdict
            for position, pending in batch:
                if pending.attempt.verdict == FAILING:
                    return position, self._take(pending.candidate)
            if known is not None:
                return known[0], self._take(known[1])

    def _take(self, candidate: Schedule) -> Schedule:
        self._taken(candidate, FAILING)
        return candidate

    def _run_batch(self, batch: list[_Pending]) -> None:
        """Each candidate on a runner of its own, at once (threads: the runners wait on
        clusters); the first error any of them raised is raised here."""
        errors: list[BaseException] = []

        def confirm(pending: _Pending, runner: Runner) -> None:
            try:
                self._confirm(pending, runner)
            except BaseException as exc:  # noqa: BLE001 - raised in the calling thread
                errors.append(exc)

        threads = [
            # Daemons: after Ctrl-C a run may wait on a cluster torn down under it.
            threading.Thread(target=confirm, args=(p, r), name=f"shrink-{i}", daemon=True)
            for i, (p, r) in enumerate(zip(batch, self.runners, strict=False), start=1)
        ]
        run_threads(threads)
        budget = [e for e in errors if isinstance(e, _Budget)]
        if len(budget) < len(errors):
            raise next(e for e in errors if not isinstance(e, _Budget))
        if budget:
            raise budget[0]

    def _taken(self, candidate: Schedule, verdict: str) -> bool:
        """Whether a pass takes the candidate (it fails, confirmed); the one taken last is the
        smallest so far."""
        if verdict == FAILING:
            self.smallest = candidate
            self.taken.append(candidate)
        return verdict == FAILING

    def passes_gate(self, candidate: Schedule, runs: int) -> bool:
        """Does the candidate fail `runs` fresh runs in a row, the same way? Recorded as an
        attempt; the gate's runs are counted but never refused for the budget (a finding
        handed over unconfirmed would cost more than they do)."""
        attempt = Attempt(
            len(self.attempts) + 1, f"the gate: {runs} runs in a row", len(candidate.steps),
            [], FAILING, candidate,
        )  # fmt: skip
        self.attempts.append(attempt)
        for _ in range(runs):
            result = self._run(candidate, budgeted=False)
            attempt.runs.append(result)
            if not self._matches(result):
                attempt.verdict = FLAKY if any(attempt.runs) else PASSING
                return False
        return True

    def _matches(self, result: str | None) -> bool:
        if result is None:
            return False
        return not self.same_failure or result == self.failure


def _key(schedule: Schedule) -> str:
    return dumps(replace(schedule, origin={}))


def shrink(
    schedule: Schedule,
    runner: Runner,
    *,
    budget: int = 200,
    confirm: int = 2,
    same_failure: bool = True,
    prescreen: Callable[[Schedule], str | None] | None = None,
    seen: str | None = None,
    more_runners: Sequence[Runner] = (),
    tried: dict[str, str] | None = None,
    gate: int = 0,
) -> ShrinkResult:
    """Shrink `schedule` against `runner` within `budget` runs. The minimal schedule keeps
    the original's seed; its origin says where it came from. `prescreen` (the protocol
    model, say) may rule a candidate out before it is run, saying why: such a candidate
    costs no run and never counts as failing. `seen`: the failure a run of the original
    already showed (explore's own), which counts as its first confirming run.
    `more_runners`: runners beside `runner` (clusters of their own), so that candidates run
    several at once (`_Shrinker.first`); the minimal is the one a single runner would reach
    where the runs come out the same. `tried`: the verdicts of earlier shrinks of the same
    finding, by schedule, shared and added to, so that a schedule that passed in one is not
    taken in the next on two lucky runs (a candidate that is only sometimes failing is a race
    the minimal must not hide). `gate`: fresh runs in a row the minimal must fail before it
    is handed over (0: none); the module's docstring says what happens where it does not."""
    s = _Shrinker([runner, *more_runners], budget, confirm, same_failure, prescreen, tried)
    result = ShrinkResult(schedule, schedule, None, False)
    first = Attempt(1, "the original", len(schedule.steps), [], PASSING, schedule)
    s.attempts.append(first)
    if seen is not None:
        first.runs.append(seen)
        s.failure = seen
    try:
        for _ in range(s.confirm - len(first.runs)):
            outcome = s._run(schedule)
            first.runs.append(outcome)
            if outcome is None or (s.failure is not None and outcome != s.failure):
                break
            s.failure = outcome
        else:
            first.verdict = FAILING
    except _Budget:
        pass
    if first.verdict != FAILING:
        first.verdict = FLAKY if any(first.runs) else PASSING
        # A later shrink may meet it as a candidate: it had its chance (not retried).
        s.tried[_key(schedule)] = PASSING
        return _finish(result, s, reproducible=False)
    s.tried[_key(schedule)] = FAILING
    s.smallest = current = schedule
    try:
        progress = True
        while progress:
            progress = False
            for shrink_pass in PASSES:
                improved = shrink_pass(current, s)
                if improved is not None:
                    current, progress = improved, True
                    break  # back to the cheap passes first
        result.exhausted = False
    except _Budget:
        result.exhausted = True
    result.minimal = s.smallest
    if gate > 0:
        result.gate = gate
        result.minimal, result.gated = _through_gate(s, schedule, gate)
    return _finish(result, s, reproducible=True)


def _through_gate(s: _Shrinker, original: Schedule, gate: int) -> tuple[Schedule, bool]:
    """The latest schedule taken (the original last) that fails `gate` runs in a row; the
    original, ungated, where none does."""
    seen: set[str] = set()
    for candidate in [*reversed(s.taken), original]:
        key = _key(candidate)
        if key in seen:
            continue
        seen.add(key)
        if s.passes_gate(candidate, gate):
            return candidate, True
    return original, False


def _finish(result: ShrinkResult, s: _Shrinker, *, reproducible: bool) -> ShrinkResult:
    result.failure = s.failure
    result.reproducible = reproducible
    result.attempts = s.attempts
    result.runs = s.runs
    if reproducible:
        origin = {k: v for k, v in result.original.origin.items() if not k.startswith("shrunk")}
        origin.update(
            {
                "shrunk_from_steps": len(result.original.steps),
                "shrunk_runs": s.runs,
                "shrunk_failure": s.failure,
            }
        )
        if result.gated:
            origin["confirmed"] = f"failed {result.gate} of {result.gate} runs"
        result.minimal = replace(result.minimal, origin=origin)
    return result


# -- runners ------------------------------------------------------------------------------


def simulated_runner(protocol: Any, options: Any = None) -> Runner:
    """A runner that asks the simulator (checkers.simulate) instead of a cluster."""
    from checkers.simulate import simulate

    def run(schedule: Schedule) -> str | None:
        return simulate(schedule, protocol, options=options).finding()

    return run
