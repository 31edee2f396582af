"""A cell: one scenario on one release in one mode. The one rule for running a cell, shared
by `logfork bisect` and `logfork atlas`:

- a verdict cached for the cell (suites.verdict_cache) is used and nothing runs;
- otherwise the scenario runs on a fresh cluster; a run that ends not reached is run once
  more, and not reached twice the cell has no verdict (bisect skips it, as `git bisect
  skip`; the atlas shows it as not reached and runs it again next time);
- a verdict (reproduced, departs, consistent, diverged) is cached; nothing else is.
"""

from __future__ import annotations

import argparse
import hashlib
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from basics.releases import Release, parse_version
from fixtures.releases import resolve

if TYPE_CHECKING:
    from fixtures.catalog import Catalog
    from runrecord.run import Verdict
    from runrecord.schedule import Schedule
    from suites.scenario import Scenario

BUG_SEEN = frozenset({"reproduced", "departs", "diverged"})
CLEAN = frozenset({"consistent"})
VERDICTS = BUG_SEEN | CLEAN
NOT_REACHED = "not-reached"
NOT_APPLICABLE = "not-applicable"


@dataclass(frozen=True)
class Candidate:
    label: str  # what the user sees: "2.0.1", or a distribution's path and version
    release: Release  # its version, for ordering and for fixed_in
    key: str  # the cache key: the version, or a digest of a local distribution
    spec: str  # what the runner is given: a version number or a path

    @classmethod
    def maven(cls, version: str) -> Candidate:
        return cls(version, Release(version), version, version)

    @property
    def local(self) -> bool:
        return self.spec != self.key

    def __str__(self) -> str:
        return self.label


@dataclass(frozen=True)
class RunResult:
    outcome: str
    seconds: float
    run_dir: str | None = None
    summary: str = ""
    expected: str | None = None  # what the scenario expects of the release

    @property
    def as_expected(self) -> bool | None:
        if self.expected is None or self.outcome not in VERDICTS:
            return None
        return self.outcome == self.expected


Runner = Callable[[Candidate], RunResult]


class Cache(Protocol):
    def get(self, candidate: Candidate) -> RunResult | None: ...

    def put(self, candidate: Candidate, result: RunResult) -> None: ...


class NoCache:
    def get(self, candidate: Candidate) -> RunResult | None:
        return None

    def put(self, candidate: Candidate, result: RunResult) -> None:
        pass


@dataclass(frozen=True)
class Attempt:
    result: RunResult
    cached: bool
    retry: bool  # the second run after a first that ended not reached

    @property
    def note(self) -> str:
        if self.result.outcome != NOT_REACHED:
            return ""
        return "not reached twice" if self.retry else "not reached: run again"


def observe(
    candidate: Candidate,
    runner: Runner,
    cache: Cache,
    on_attempt: Callable[[Attempt], None] = lambda a: None,
) -> list[Attempt]:
    """The cell's attempts under the rule above; the last one holds its outcome."""
    hit = cache.get(candidate)
    if hit is not None:
        attempts = [Attempt(hit, cached=True, retry=False)]
        on_attempt(attempts[0])
        return attempts
    attempts = []
    for retry in (False, True):
        result = runner(candidate)
        attempts.append(Attempt(result, cached=False, retry=retry))
        on_attempt(attempts[-1])
        if result.outcome in VERDICTS:
            cache.put(candidate, result)
        if result.outcome != NOT_REACHED:
            break
    return attempts


# -- what the user names, and real runs -------------------------------------------------------


def add_run_arguments(parser: argparse.ArgumentParser, *, out_help: str) -> None:
    """The arguments of every command that runs cells: where runs and the verdict cache go,
    the base image, the release catalogue."""
    parser.add_argument(
        "--out",
        default="runs",
        metavar="DIR",
        help=f"where run directories go (default: runs/); verdicts are cached in "
        f"DIR/.cache/verdicts/{out_help}",
    )
    parser.add_argument(
        "--base-image",
        metavar="IMAGE",
        help="run nodes on this local image instead of the Debian-built one",
    )
    parser.add_argument(
        "--refresh-catalog",
        action="store_true",
        help="ask Maven Central for its releases now rather than use the day-old cache",
    )


def _looks_like_path(spec: str) -> bool:
    return "/" in spec or spec.endswith((".tgz", ".tar.gz")) or Path(spec).expanduser().is_dir()


def local_digest(path: Path) -> str:
    """Identifies a local build for the verdict cache: the .tgz's bytes, or the names, sizes
    and modification times of a KAFKA_HOME's jars (a rebuild changes them)."""
    digest = hashlib.sha256()
    if path.is_file():
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    else:
        for jar in sorted((path / "libs").glob("*.jar")):
            st = jar.stat()
            digest.update(f"{jar.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def candidate(spec: str) -> Candidate:
    """A release number, or the path of a local distribution (KAFKA_HOME or .tgz)."""
    if _looks_like_path(spec):
        path = Path(spec).expanduser().resolve()
        dist = resolve(str(path))
        return Candidate(
            f"{spec} ({dist.release})", dist.release, f"local-{local_digest(path)}", str(path)
        )
    parse_version(spec)  # a clear error for text that is not a version
    return Candidate.maven(spec)


def why_not(catalog: Catalog, scenario: Scenario, c: Candidate, mode: str) -> str | None:
    """Why the cell is not run: a release logfork cannot run (a local build always can), or
    one the scenario or the mode does not apply to. None when it runs."""
    reason = None if c.local else catalog.why_not_runnable(c.release.version)
    return reason or scenario.not_applicable(c.release, mode)


def left_out_lines(left_out: Sequence[tuple[str, str]]) -> list[str]:
    """`left out: A B C: reason` for (what, reason) pairs, one line per reason."""
    by_reason: dict[str, list[str]] = defaultdict(list)
    for what, reason in left_out:
        by_reason[reason].append(what)
    return [f"left out: {' '.join(whats)}: {reason}" for reason, whats in by_reason.items()]


def scenario_runner(
    scenario: Scenario, mode: str, *, out: Path, base_image: str | None = None
) -> Runner:
    """Real runs of `scenario` in `mode`, each on a fresh cluster, run directories in `out`."""

    def runner(c: Candidate) -> RunResult:
        from suites import scenario as scenarios  # looked up per run: tests simulate it

        started = time.monotonic()
        verdict = scenarios.run(scenario, c.spec, mode, out=out, base_image=base_image)
        return result_of(verdict, started)

    return runner


def result_of(verdict: Verdict, started: float) -> RunResult:
    """A cell's result from a run's verdict (a scenario's or a replayed schedule's)."""
    return RunResult(
        verdict.outcome.value,
        time.monotonic() - started,
        verdict.run_dir,
        verdict.summary,
        verdict.expected.value,
    )


def schedule_runner(
    schedule: Schedule, name: str, *, out: Path, base_image: str | None = None
) -> Runner:
    """Real replays of a schedule file, each on a fresh cluster, as `logfork replay` runs
    it: its outcome is what its `expect` makes of the brokers' (reproduced or consistent),
    or, without one, held (consistent) or a finding (diverged)."""

    def runner(c: Candidate) -> RunResult:
        from datetime import datetime

        from suites.explore.engine.bench import Bench
        from suites.explore.engine.schedule_run import run_schedule

        started = time.monotonic()
        stamp = f"{datetime.now():%Y%m%d-%H%M%S}"
        with Bench(c.spec, out, base_image=base_image, reuse=False) as bench:
            run_dir = out / f"replay-{name}-{c.release}-{schedule.cluster.mode}-{stamp}"
            run = run_schedule(bench, schedule, run_dir, label=f"replay-{name}")
        return result_of(run.verdict, started)

    return runner


def schedule_why_not(catalog: Catalog, schedule: Schedule, c: Candidate, mode: str) -> str | None:
    """Why a schedule is not replayed on a release: one logfork cannot run, a mode it lacks,
    or features its storage cannot be formatted with (before 4.0)."""
    reason = None if c.local else catalog.why_not_runnable(c.release.version)
    if reason:
        return reason
    if mode not in c.release.modes:
        return f"Kafka {c.release} has no {mode} mode"
    if schedule.cluster.features and not c.release.at_least(4, 0):
        return f"formatted with {', '.join(schedule.cluster.features)}: needs 4.0"
    return None
