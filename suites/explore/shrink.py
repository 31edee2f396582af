"""Shrink a failing schedule to a minimal one that still fails the same way.

Delta debugging against a runner: a callable that runs a schedule (on real brokers, or in
the simulator) and returns the kind of failure it saw ("diverged", "stuck", ...) or None
when the run passed. Runs on real clusters are not perfectly repeatable, so a candidate
counts as failing only if it fails again when re-run (`confirm` runs in a row, all with
the original failure's kind), as Hypothesis treats flaky examples; a candidate that fails
and then passes is recorded as flaky and not taken. The original itself must fail
`confirm` times, or there is nothing to shrink.

Candidates, in passes (`suites.explore.shrink_passes`) repeated until none makes progress
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
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from runrecord.schedule import Schedule, ScheduleError, dumps, validate
from suites.explore.shrink_passes import PASSES
from suites.explore.threads import run_threads

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

    def log(self) -> list[str]:
        lines = []
        for a in self.attempts:
            runs = ", ".join(r or "pass" for r in a.runs) or "not run"
            extra = f": {a.problem}" if a.problem else ""
            lines.append(f"#{a.number} {a.change} ({a.steps} steps): {a.verdict} [{runs}]{extra}")
        return lines


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
        self._lock = threading.Lock()  # the run count, with several runners at once

    def _run(self, schedule: Schedule, runner: Runner | None = None) -> str | None:
        with self._lock:
            if self.runs >= self.budget:
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
        return verdict == FAILING

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
    the minimal must not hide)."""
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
    return _finish(result, s, reproducible=True)


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
        result.minimal = replace(result.minimal, origin=origin)
    return result


# -- runners ------------------------------------------------------------------------------


def simulated_runner(protocol: Any, options: Any = None) -> Runner:
    """A runner that asks the simulator (checkers.simulate) instead of a cluster."""
    from checkers.simulate import simulate

    def run(schedule: Schedule) -> str | None:
        return simulate(schedule, protocol, options=options).finding()

    return run
