"""The grid behind `logfork atlas`: scenarios by releases, in every mode each release has.

Pure: the command (suites.atlas_cli) supplies real runs, the verdict cache and reports; the
unit tests a simulated runner. A cell is one scenario on one release in one mode; one that
cannot run there (the release, the mode or the scenario lacks something) is planned with the
reason and never run. Every other cell follows the cells' rule (suites.cells), the one bisect
follows: a cached verdict is used, a run that ends not reached is run once more, verdicts
are cached. So an atlas that was interrupted, or that was run before, runs only what it
lacks.

Per scenario and mode, the first fixed release found is the release after the newest one
that still shows the bug, and it is judged against the declared fixed_in by the same rule
as a bisect's answer (suites.bisect.judge_fix).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from statistics import mean
from typing import TYPE_CHECKING

from runrecord import exits
from runrecord.atlas import Atlas, AtlasEntry, AtlasFinding, AtlasRow
from runrecord.outcome import Outcome
from suites import cells
from suites.bisect import judge_fix
from suites.cells import BUG_SEEN, NOT_APPLICABLE, VERDICTS, Attempt, Cache, Candidate, Runner

if TYPE_CHECKING:
    from suites.scenario import Scenario

EXIT_AS_EXPECTED = exits.OK
EXIT_NOT_AS_EXPECTED = exits.FINDING  # a cell not as the KIP says, or a fix found elsewhere
EXIT_NO_VERDICT = exits.NO_VERDICT  # some cells were not reached (or failed): run it again


@dataclass(frozen=True)
class Cell:
    scenario: str
    candidate: Candidate
    mode: str
    reason: str | None = None  # why it is not run; None when it runs

    def __str__(self) -> str:
        return f"{self.scenario} {self.candidate.label} {self.mode}"


@dataclass
class CellResult:
    cell: Cell
    attempts: list[Attempt] = field(default_factory=list)
    error: str | None = None  # logfork could not run it at all
    report: str | None = None  # its report's file name in the atlas's folder
    wall: float = 0.0  # seconds spent on it this time: runs and report

    @property
    def result(self) -> cells.RunResult | None:
        return self.attempts[-1].result if self.attempts else None

    @property
    def outcome(self) -> str | None:
        if self.cell.reason:
            return NOT_APPLICABLE
        return None if self.result is None or self.error else self.result.outcome

    @property
    def cached(self) -> bool:
        return any(a.cached for a in self.attempts)

    @property
    def runs(self) -> int:
        return sum(not a.cached for a in self.attempts)


def plan_cells(
    scenarios: Sequence[Scenario],
    releases: Sequence[Candidate],
    why_not: Callable[[Scenario, Candidate, str], str | None],
    mode: str | None = None,
) -> list[Cell]:
    """Every cell, release by release (oldest first), in every mode each release has (or
    in `mode` alone), with the reason for those that are not run."""
    planned = []
    for c in releases:
        for s in scenarios:
            for m in (mode,) if mode else c.release.modes:
                planned.append(Cell(s.id, c, m, why_not(s, c, m)))
    return planned


# -- time left --------------------------------------------------------------------------------


class Eta:
    """Time left: each cell still to run costs the mean wall time of that scenario's cells
    run so far, else the mean its cached verdicts recorded, else that of any cell run."""

    def __init__(self) -> None:
        self.ran: dict[str, list[float]] = defaultdict(list)
        self.recorded: dict[str, list[float]] = defaultdict(list)

    def estimate(self, scenario: str) -> float | None:
        for seen in (self.ran.get(scenario), self.recorded.get(scenario)):
            if seen:
                return mean(seen)
        every = [s for seen in self.ran.values() for s in seen]
        return mean(every) if every else None

    def left(self, todo: Iterable[Cell]) -> float | None:
        estimates = [self.estimate(c.scenario) for c in todo]
        if any(e is None for e in estimates):
            return None
        return sum(e for e in estimates if e is not None)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "time left not known until a cell has run"
    if seconds < 60:
        return "under a minute left"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"about {minutes} min left"
    return f"about {minutes // 60} h {minutes % 60:02d} min left"


# -- running ----------------------------------------------------------------------------------


def run_cells(
    todo: Sequence[Cell],
    runner_for: Callable[[Cell], Runner],
    cache_for: Callable[[Cell], Cache],
    *,
    eta: Eta | None = None,
    after: Callable[[CellResult], None] = lambda r: None,
    on_cell: Callable[[int, CellResult, float | None], None] = lambda i, r, left: None,
    errors: tuple[type[Exception], ...] = (),
    clock: Callable[[], float] = time.monotonic,
) -> list[CellResult]:
    """Run each cell under the cells' rule, in order. `after` sees each result (to write its
    report); `on_cell` gets its number, the result and the estimated seconds left. An
    exception of `errors` fails that cell alone, with its message."""
    eta = eta or Eta()
    to_run = set()
    for cell in todo:
        hit = cache_for(cell).get(cell.candidate)
        if hit is None:
            to_run.add(cell)
        else:
            eta.recorded[cell.scenario].append(hit.seconds)
    done: list[CellResult] = []
    for i, cell in enumerate(todo):
        started = clock()
        result = CellResult(cell)
        try:
            result.attempts = cells.observe(cell.candidate, runner_for(cell), cache_for(cell))
        except errors as exc:
            result.error = str(exc)
        after(result)
        result.wall = clock() - started
        if result.runs or result.error:
            eta.ran[cell.scenario].append(result.wall)
        done.append(result)
        left = eta.left(c for c in todo[i + 1 :] if c in to_run)
        on_cell(i, result, left)
    return done


def progress_line(i: int, total: int, result: CellResult, left: float | None) -> str:
    cell = result.cell
    what = result.outcome or "error"
    mark = {True: " ✓", False: " ✗"}.get(result.result.as_expected if result.result else None, "")
    if result.cached:
        took = f"cached ({result.result.seconds:.0f} s)" if result.result else "cached"
    else:
        retried = ", retried" if result.runs > 1 else ""
        took = f"{result.wall:.0f} s{retried}"
    width = len(str(total))
    return (
        f"[{i + 1:{width}}/{total}] {cell.scenario:<26} {cell.candidate.label:<9} {cell.mode:<5} "
        f"{what + mark:<14} {took:<16} · {duration(left)}"
    )


# -- the grid ---------------------------------------------------------------------------------


def find_fix(fixed_in: str | None, mode: str, results: Sequence[CellResult]) -> AtlasFinding | None:
    """Where the fix lies for one scenario and mode; `results` in release order."""
    judged = [r for r in results if r.outcome in VERDICTS]
    if not judged:
        return None
    cands = [r.cell.candidate for r in judged]
    broken = [i for i, r in enumerate(judged) if r.outcome in BUG_SEEN]
    span = f"{cands[0].label} – {cands[-1].label}" if len(cands) > 1 else cands[0].label
    if fixed_in is None:
        if not broken:
            found = f"holds on every release run ({span})"
            return AtlasFinding(mode, f"{mode}: {found}", found)
        shown = ", ".join(cands[i].label for i in broken)
        found = f"the bug shows on {shown}"
        return AtlasFinding(
            mode, f"{mode}: FINDING: it must hold everywhere, but {found}", found, agrees=False
        )
    last = broken[-1] if broken else None
    before = None if last is None else cands[last]
    answer = cands[0] if last is None else (cands[last + 1] if last + 1 < len(cands) else None)
    agrees, text = judge_fix(cands, answer, before, fixed_in)
    flips = [c for i, c in enumerate(cands[: last or 0]) if i not in broken]
    if flips and agrees:
        agrees = False
        text = (
            f"FINDING: the scenario declares fixed_in {fixed_in}, but "
            f"{', '.join(c.label for c in flips)} behave as fixed before {before}, which "
            f"still behaves as broken"
        )
    if before is None:
        found = f"no release run shows the bug ({span})"
    elif answer is None:
        found = f"still broken on the newest run, {before}"
    else:
        found = f"first fixed {answer.label}, last broken {before}"
    return AtlasFinding(
        mode,
        f"{mode}: {found}; {text}",
        found,
        first_fixed=None if answer is None or before is None else answer.release.version,
        last_broken=None if before is None else before.release.version,
        agrees=agrees,
    )


def _entry(r: CellResult) -> AtlasEntry:
    if r.cell.reason:
        return AtlasEntry(r.cell.mode, Outcome.NOT_APPLICABLE, r.cell.reason)
    if r.error:
        return AtlasEntry(r.cell.mode, None, f"logfork could not run it: {r.error}", failed=True)
    result = r.result
    if result is None:
        return AtlasEntry(r.cell.mode, None, "not run yet")
    return AtlasEntry(
        r.cell.mode,
        Outcome(result.outcome),
        result.summary,
        expected=Outcome(result.expected) if result.expected else None,
        as_expected=result.as_expected,
        seconds=round(result.seconds, 1),
        cached=r.cached,
        runs=r.runs,
        report=r.report,
    )


def build_atlas(
    scenarios: Sequence[Scenario],
    releases: Sequence[Candidate],
    results: Sequence[CellResult],
    *,
    started: float,
    complete: bool,
) -> Atlas:
    """The grid of `results` (every planned cell; those not run yet without attempts)."""
    rows = []
    for s in scenarios:
        mine = [r for r in results if r.cell.scenario == s.id]
        findings = []
        for mode in dict.fromkeys(r.cell.mode for r in mine):
            found = find_fix(s.fixed_in, mode, [r for r in mine if r.cell.mode == mode])
            if found is not None:
                findings.append(found)
        first = {(f.mode, f.first_fixed) for f in findings if f.first_fixed}
        grid = []
        for c in releases:
            entries = [_entry(r) for r in mine if r.cell.candidate == c]
            for e in entries:
                e.first_fixed = (e.mode, c.release.version) in first
            grid.append(entries)
        rows.append(AtlasRow(s.id, s.title, s.fixed_in, grid, findings))
    return Atlas(
        releases=[c.label for c in releases],
        rows=rows,
        started=started,
        seconds=round(time.time() - started, 1),
        runs=sum(r.runs for r in results),
        cached=sum(r.cached for r in results),
        complete=complete,
    )


def exit_code(atlas: Atlas) -> int:
    entries = [e for row in atlas.rows for cell in row.cells for e in cell]
    if any(e.as_expected is False for e in entries) or any(
        f.agrees is False for row in atlas.rows for f in row.findings
    ):
        return EXIT_NOT_AS_EXPECTED
    if any(e.outcome != Outcome.NOT_APPLICABLE and e.as_expected is None for e in entries):
        return EXIT_NO_VERDICT
    return EXIT_AS_EXPECTED
