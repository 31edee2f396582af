"""The search behind `logfork bisect`: which release first behaves like the other end.

Pure: it takes the candidates in order (oldest first, the two ends included), a runner
(candidate -> outcome and seconds) and a cache, and returns a `BisectResult`. The command
(suites.bisect_cli) supplies real runs; the unit tests a simulated runner.

The user says which kind of change they look for; the order of --good and --bad must agree:

- a fix (the default): --bad is the older release, where the behaviour is broken, and
  --good the newer one, where it is fixed. The answer is the first release that behaves
  like --good.
- a regression (`--regression`): --good is the older release, --bad the newer one. The
  answer is the first release that behaves like --bad.

In both cases the answer is the oldest release that behaves like the newer end. A range
whose order contradicts its kind is refused (exit 2) rather than silently reinterpreted:
swapped ends are the likeliest mistake, and a fix read as a regression gives an answer
that means the opposite.

Both ends are run too (unless cached). Their outcomes define the sides: an outcome equal to
one end's is on that end's side. An outcome equal to neither is placed by kind when the
ends differ in kind (the bug seen: reproduced, departs, diverged; or not: consistent), so
that a release past the declared fix that still shows the bug (it reports `diverged`, where
the broken end reported `reproduced`) counts as broken; otherwise it is skipped. Each step
follows the cells' rule (suites.cells): a cached verdict is used; a run that ends not
reached is run once more; not reached twice, the step is skipped, as in `git bisect skip`,
and the search goes around it. When skips leave more than one possible
answer, the result is ambiguous and names the range.

Runs: the two ends, then ceil(log2(N - 1)) steps for N candidates, plus retries.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from basics.errors import LogforkError
from basics.releases import Release
from runrecord import exits
from suites import cells
from suites.cells import (
    BUG_SEEN,
    NOT_REACHED,
    VERDICTS,
    Attempt,
    Cache,
    Candidate,
    NoCache,
    Runner,
)

EXIT_AGREES = exits.OK
EXIT_DISAGREES = exits.FINDING
EXIT_BAD_INPUT = exits.USAGE
EXIT_AMBIGUOUS = exits.NO_VERDICT


class Direction(StrEnum):
    FIX = "fix"
    REGRESSION = "regression"


class BadRange(LogforkError):
    """The range cannot be bisected as given; the message says why and what to give."""

    exit_code = EXIT_BAD_INPUT


@dataclass
class Step:
    candidate: Candidate
    outcome: str
    seconds: float
    cached: bool
    role: str  # "--bad", "--good", "step", "retry"
    side: str | None = None  # "--good", "--bad", or None when it could not be placed
    note: str = ""

    def line(self) -> str:
        side = f"like {self.side}" if self.side else self.note or "skipped"
        cached = "  cached" if self.cached else ""
        return (
            f"{self.role:7} {self.candidate.label:<16} {self.outcome:<14} "
            f"{self.seconds:7.1f} s  {side}{cached}"
        )


@dataclass
class BisectResult:
    direction: Direction
    candidates: list[Candidate]
    steps: list[Step] = field(default_factory=list)
    answer: Candidate | None = None
    before: Candidate | None = None  # the newest release on the other side of the answer
    ambiguous: list[Candidate] = field(default_factory=list)  # the possible answers
    skipped: list[Candidate] = field(default_factory=list)  # not reached twice, or unplaced
    problem: str | None = None  # why no search was possible
    problem_exit: int = EXIT_BAD_INPUT
    agrees: bool | None = None  # with the scenario's fixed_in; None: nothing to compare
    comparison: str = ""

    @property
    def target(self) -> str:
        """The end whose behaviour the answer is the first to show."""
        return "--good" if self.direction == Direction.FIX else "--bad"

    @property
    def runs(self) -> int:
        return sum(not s.cached for s in self.steps)

    @property
    def cached(self) -> int:
        return sum(s.cached for s in self.steps)

    @property
    def exit_code(self) -> int:
        if self.problem:
            return self.problem_exit
        if self.answer is None:
            return EXIT_AMBIGUOUS
        return EXIT_DISAGREES if self.agrees is False else EXIT_AGREES

    def summary(self) -> list[str]:
        lines = [
            f"{self.runs} run(s), {self.cached} verdict(s) from the cache, "
            f"{len(self.candidates)} candidate(s)"
        ]
        if self.problem:
            lines.append(self.problem)
            if self.ambiguous:
                lines.append(
                    f"AMBIGUOUS: the answer may be any of {self.ambiguous[0].label} .. "
                    f"{self.ambiguous[-1].label}"
                )
            return lines
        if self.skipped:
            lines.append(f"skipped: {', '.join(c.label for c in self.skipped)}")
        kind = "fixed" if self.direction == Direction.FIX else "broken"
        if self.answer is None:
            lines.append(
                f"AMBIGUOUS: skips leave {len(self.ambiguous)} possible answers; the first "
                f"release that behaves like {self.target} ({kind}) is one of "
                f"{', '.join(c.label for c in self.ambiguous)}"
            )
            return lines
        lines.append(
            f"ANSWER: {self.answer.label} is the first release that behaves like "
            f"{self.target} ({kind}); {self.before} is the last that does not"
        )
        if self.comparison:
            lines.append(self.comparison)
        return lines


def plan(
    good: Candidate,
    bad: Candidate,
    direction: Direction,
    between: Sequence[Candidate],
    *,
    exclude: Callable[[Candidate], str | None] = lambda c: None,
    given: bool = False,
) -> tuple[list[Candidate], list[tuple[Candidate, str]]]:
    """The candidates in search order (oldest first, the ends included) and those left out,
    with the reason. `between` are the releases between the ends (Maven Central's, or the
    user's --candidates when `given`, searched in the order given)."""
    if good.key == bad.key:
        raise BadRange(
            f"--good and --bad are both {good.label}: a range needs two different releases."
        )
    old, new = (bad, good) if direction == Direction.FIX else (good, bad)
    if old.release.parts > new.release.parts:
        if direction == Direction.FIX:
            raise BadRange(
                f"For a fix, --bad is the older release (the behaviour still broken) and "
                f"--good the newer one (fixed), but --bad {bad.label} is newer than --good "
                f"{good.label}. Swap them, or add --regression if Kafka broke between them."
            )
        raise BadRange(
            f"For a regression, --good is the older release (the behaviour still right) and "
            f"--bad the newer one (broken), but --good {good.label} is newer than --bad "
            f"{bad.label}. Swap them, or drop --regression if Kafka fixed it between them."
        )
    for end, name in ((bad, "--bad"), (good, "--good")):
        reason = exclude(end)
        if reason:
            raise BadRange(f"{name} {end.label} cannot be used: {reason}.")
    left_out: list[tuple[Candidate, str]] = []
    middle: list[Candidate] = []
    seen = {good.key, bad.key}
    for c in between:
        if c.key in seen:
            if given and c.key not in (good.key, bad.key):
                raise BadRange(f"--candidates lists {c.label} twice.")
            continue
        seen.add(c.key)
        if not given and c.release.parts in (old.release.parts, new.release.parts):
            # A Maven release with the version of a local build cannot be placed before or
            # after that build.
            left_out.append((c, "same version as a local distribution at an end"))
            continue
        reason = exclude(c)
        if reason:
            left_out.append((c, reason))
        else:
            middle.append(c)
    ordered = [old, *middle, new]
    for a, b in itertools.pairwise(ordered):
        if a.release.parts > b.release.parts:
            raise BadRange(
                f"--candidates are searched in the order given, oldest first, between "
                f"{old.label} and {new.label}; {a.label} ({a.release}) cannot come before "
                f"{b.label} ({b.release})."
            )
    return ordered, left_out


def release_lines(candidates: Sequence[Candidate]) -> list[str]:
    """The release lines (major.minor) the candidates span, oldest first."""
    lines: list[str] = []
    for c in candidates:
        line = ".".join(map(str, c.release.parts[:2]))
        if line not in lines:
            lines.append(line)
    return lines


def spans_lines_note(candidates: Sequence[Candidate]) -> str | None:
    """A warning where the search crosses release lines: a fix backported to an older line
    can come out before a newer line's first release that lacks it (KAFKA-18723: in 3.9.1,
    not in 4.0.0), so "fixed" need not hold from one release on."""
    lines = release_lines(candidates)
    if len(lines) < 2:
        return None
    return (
        f"note: the candidates span release lines {', '.join(lines)}; a fix backported to "
        "an older line may come out before a newer line's first release lacks it, and then "
        "no single release answers: bisect within one line (--good and --bad of one X.Y) "
        "if the answer looks odd"
    )


def max_runs(n: int) -> int:
    """Runs without retries for n candidates: both ends, then a binary search."""
    return 2 + math.ceil(math.log2(n - 1)) if n > 2 else n


def bisect(
    candidates: Sequence[Candidate],
    runner: Runner,
    cache: Cache | None = None,
    *,
    direction: Direction = Direction.FIX,
    fixed_in: str | None = None,
    unfixed: str | None = None,
    on_step: Callable[[Step], None] = lambda s: None,
) -> BisectResult:
    """Search `candidates` (oldest first, as `plan` orders them) for the first release
    that behaves like the newer end. `unfixed`: why the subject declares its bug never
    fixed in the mode searched (None: it does not), which any release that behaves as
    fixed contradicts."""
    cache = cache or NoCache()
    cands = list(candidates)
    result = BisectResult(direction, cands)
    if len(cands) < 2:
        result.problem = "A range needs two releases."
        return result
    old_name, new_name = ("--bad", "--good") if direction == Direction.FIX else ("--good", "--bad")

    def record(step: Step) -> Step:
        result.steps.append(step)
        on_step(step)
        return step

    def observe(c: Candidate, role: str, place: Callable[[str], str | None]) -> str | None:
        def step(attempt: Attempt) -> None:
            outcome = attempt.result.outcome
            side = place(outcome)
            note = attempt.note or ("matches neither end" if side is None else "")
            name = "retry" if attempt.retry else role
            record(Step(c, outcome, attempt.result.seconds, attempt.cached, name, side, note))

        last = cells.observe(c, runner, cache, step)[-1].result.outcome
        return None if last == NOT_REACHED else place(last)

    ends: dict[str, str] = {}

    def as_end(name: str) -> Callable[[str], str | None]:
        def place(outcome: str) -> str | None:
            if outcome in VERDICTS:
                ends[name] = outcome
                return name
            return None

        return place

    for c, name in ((cands[0], old_name), (cands[-1], new_name)):
        if observe(c, name, as_end(name)) is None:
            outcome = result.steps[-1].outcome
            result.problem = (
                f"The {name} end {c.label} gave no verdict ({outcome}), so there is nothing "
                f"to compare the releases between with. Run it alone (logfork run) to see why."
            )
            result.problem_exit = EXIT_AMBIGUOUS if outcome == NOT_REACHED else EXIT_BAD_INPUT
            result.ambiguous = cands[1:]
            return result
    if ends[old_name] == ends[new_name]:
        result.problem = (
            f"--good and --bad both ended {ends[old_name]}: nothing changes between "
            f"{cands[0].label} and {cands[-1].label}, so there is nothing to bisect. Widen "
            f"the range, or check that --bad shows the behaviour you are after."
        )
        return result

    old_bug, new_bug = ends[old_name] in BUG_SEEN, ends[new_name] in BUG_SEEN

    def place(outcome: str) -> str | None:
        if outcome == ends[old_name]:
            return old_name
        if outcome == ends[new_name]:
            return new_name
        if outcome in VERDICTS and old_bug != new_bug:
            return old_name if (outcome in BUG_SEEN) == old_bug else new_name
        return None

    lo, hi, skipped = 0, len(cands) - 1, set()
    while True:
        left = [i for i in range(lo + 1, hi) if i not in skipped]
        if not left:
            break
        middle = (lo + hi) / 2
        i = min(left, key=lambda j: (abs(j - middle), j))
        side = observe(cands[i], "step", place)
        if side == old_name:
            lo = i
        elif side == new_name:
            hi = i
        else:
            skipped.add(i)
            result.skipped.append(cands[i])
    if hi - lo == 1:
        result.answer, result.before = cands[hi], cands[lo]
        result.agrees, result.comparison = compare(result, fixed_in, unfixed)
    else:
        result.ambiguous = cands[lo + 1 : hi + 1]
    return result


def compare(
    result: BisectResult, fixed_in: str | None, unfixed: str | None = None
) -> tuple[bool | None, str]:
    """Whether the answer agrees with the scenario's declared fixed_in.

    A fix is judged by `judge_fix`. A regression (its --good end fixed, its --bad end
    broken) contradicts fixed_in when a release at or after fixed_in behaves like --bad,
    that is when its --bad end is one. A scenario that declares its bug never fixed in
    the mode (`unfixed`, its reason) is contradicted by any answer: some release behaves
    as fixed.
    """
    if result.answer is None:
        return None, ""
    if unfixed is not None:
        fixed = result.answer if result.direction == Direction.FIX else result.before
        return False, (
            f"FINDING: the scenario declares its bug never fixed in this mode ({unfixed}), "
            f"but {fixed.label if fixed else 'a release'} behaves as fixed"
        )
    if fixed_in is None:
        return None, "the scenario declares no fix (it must hold everywhere): nothing to compare"
    if result.direction == Direction.FIX:
        return judge_fix(result.candidates, result.answer, result.before, fixed_in)
    fixed = Release(fixed_in).parts
    cands = result.candidates
    broken_after_fix = [c for c in cands[cands.index(result.answer) :] if c.release.parts >= fixed]
    if not broken_after_fix:
        return True, (
            f"AGREES with fixed_in {fixed_in}: the regression lies before the declared fix"
        )
    return False, (
        f"FINDING: the scenario declares fixed_in {fixed_in}, but "
        f"{broken_after_fix[0].label} and later behave like --bad (broken again from "
        f"{result.answer.label})"
    )


def judge_fix(
    candidates: Sequence[Candidate],
    answer: Candidate | None,
    before: Candidate | None,
    fixed_in: str,
) -> tuple[bool, str]:
    """A fix found by running `candidates` (oldest first) against the declared fixed_in:
    `answer` is the first that behaves as fixed with none after it broken (None: the newest
    is still broken), `before` the last that behaves as broken (None: none does).

    fixed_in says that every release from it on behaves as fixed, every one before it as
    broken, so the fix must first show at the first candidate at or after fixed_in.
    """
    fixed = Release(fixed_in).parts
    declared = next((c for c in candidates if c.release.parts >= fixed), None)
    if answer is declared:
        if answer is None:
            return True, f"AGREES with fixed_in {fixed_in}: every candidate is older and broken"
        return True, (
            f"AGREES with fixed_in {fixed_in}: {answer.label} is the first candidate at or after it"
        )
    where = (
        f"no candidate reaches {fixed_in}"
        if declared is None
        else f"the first candidate at or after it is {declared.label}"
    )
    if answer is None:
        found = f"{before} (the newest) still behaves as broken"
    elif before is None:
        found = f"the oldest, {answer.label}, already behaves as fixed"
    else:
        found = (
            f"the first release that behaves as fixed is {answer.label} and {before} still "
            f"behaves as broken"
        )
    return False, f"FINDING: the scenario declares fixed_in {fixed_in}, but {found} ({where})"
