"""`logfork bisect (SCENARIO | --schedule FILE) --good V --bad V [--regression]
[--kafka-mode M]`.

Runs the scenario (or replays the schedule file) on real clusters, release by release, in a
binary search between the two ends (suites.bisect), and prints each step and the answer.
A schedule's declared fix is where its `expect` says its bug ends. Candidates are the releases on
Maven Central between the ends (fixtures.catalog), or the user's own --candidates (local
distributions, oldest first). Verdicts are cached in <out>/.cache/verdicts/.

Exit: 0 the answer agrees with the scenario's fixed_in (or it declares none); 1 it does
not; 2 bad input; 3 skips (or an end that was not reached) leave the answer ambiguous.
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from basics.releases import parse_version
from suites.bisect import (
    BadRange,
    Candidate,
    Direction,
    Step,
    bisect,
    max_runs,
    plan,
    spans_lines_note,
)
from suites.cells import (
    Runner,
    add_run_arguments,
    candidate,
    left_out_lines,
    scenario_runner,
    schedule_runner,
    schedule_why_not,
    why_not,
)

if TYPE_CHECKING:
    from fixtures.catalog import Catalog

HELP = "find the first release that fixed (or broke) a scenario's behaviour"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "scenario", nargs="?", help="scenario id (see `logfork list`); or --schedule"
    )
    parser.add_argument(
        "--schedule",
        metavar="FILE",
        help="replay this schedule file (docs/schedules.md) instead of running a scenario",
    )
    parser.add_argument(
        "--good",
        required=True,
        metavar="V",
        help="a release (or local distribution) where the behaviour is right (fixed)",
    )
    parser.add_argument(
        "--bad",
        required=True,
        metavar="V",
        help="a release (or local distribution) where the behaviour is broken",
    )
    parser.add_argument(
        "--regression",
        action="store_true",
        help="look for the release that broke the behaviour: --good is then the older end. "
        "Without it, bisect looks for the fix: --bad is the older end",
    )
    parser.add_argument(
        "--kafka-mode",
        choices=("zk", "kraft"),
        help="default: the scenario's first mode that both ends have",
    )
    parser.add_argument(
        "--candidates",
        nargs="+",
        metavar="V",
        help="search these instead of Maven Central's releases: versions or local "
        "distributions (KAFKA_HOME or .tgz), oldest first",
    )
    add_run_arguments(parser, out_help="")


def _choose_mode(scenario: Subject, ends: list[Candidate], wanted: str | None) -> str:
    if wanted:
        return wanted
    for mode in scenario.modes:
        if all(mode in c.release.modes for c in ends):
            return mode
    have = "; ".join(f"{c.label}: {', '.join(c.release.modes)}" for c in ends)
    raise BadRange(
        f"{scenario.name} runs in {' and '.join(scenario.modes)} mode, and no mode of it is "
        f"common to both ends ({have}). A bisect compares like with like: pick ends that "
        f"share a mode."
    )


@dataclass(frozen=True)
class Subject:
    """What a bisect runs: a scenario, or a schedule file, with the one rule for each."""

    name: str  # what the verdict cache and the output call it
    modes: tuple[str, ...]
    fixed_in: str | None
    runner: Callable[[str, Path, str | None], Runner]  # (mode, out, base image)
    why_not: Callable[[Catalog, Candidate, str], str | None]
    unfixed: Callable[[str], str | None]  # mode -> why its bug is never fixed there, or None


def subject_of(args: argparse.Namespace) -> Subject:
    from suites import registry

    if (args.scenario is None) == (args.schedule is None):
        raise BadRange("name a scenario or a schedule file (--schedule FILE), one of the two")
    if args.scenario is not None:
        scenario = registry.get(args.scenario)
        return Subject(
            scenario.id,
            scenario.modes,
            scenario.fixed_in,
            lambda mode, out, image: scenario_runner(scenario, mode, out=out, base_image=image),
            lambda catalog, c, mode: why_not(catalog, scenario, c, mode),
            scenario.unfixed.get,
        )
    from runrecord.schedule import load_schedule
    from runrecord.schedule_expect import fixed_in, never_fixed
    from suites.explore.replay_cli import in_mode

    path = Path(args.schedule)
    schedule = in_mode(load_schedule(path), args.kafka_mode, str(path))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:8]
    return Subject(
        f"schedule-{path.stem}-{digest}",
        (schedule.cluster.mode,),
        fixed_in(schedule.expect),
        lambda mode, out, image: schedule_runner(schedule, path.stem, out=out, base_image=image),
        lambda catalog, c, mode: schedule_why_not(catalog, schedule, c, mode),
        lambda mode: never_fixed(schedule.expect, mode),
    )


def main(args: argparse.Namespace) -> int:
    from fixtures import catalog as catalogue
    from suites.verdict_cache import VerdictCache

    scenario = subject_of(args)
    direction = Direction.REGRESSION if args.regression else Direction.FIX
    good, bad = candidate(args.good), candidate(args.bad)
    given = [candidate(s) for s in args.candidates] if args.candidates else None
    catalog = catalogue.load(refresh=args.refresh_catalog)
    for end, name in ((bad, "--bad"), (good, "--good")):
        reason = None if end.local else catalog.why_not_runnable(end.release.version)
        if reason:  # said before anything about modes, which an unknown release has none of
            raise BadRange(f"{name} {end.label} cannot be used: {reason}.")
    mode = _choose_mode(scenario, [bad, good], args.kafka_mode)

    def exclude(c: Candidate) -> str | None:
        return scenario.why_not(catalog, c, mode)

    if given is not None:
        between = given
    elif not (good.local or bad.local):
        between = [Candidate.maven(v) for v in catalog.between(good.key, bad.key)]
    else:  # a local build's version need not be on Maven Central
        low, high = sorted((good.release.parts, bad.release.parts))
        between = [Candidate.maven(v) for v in catalog.versions if low <= parse_version(v) <= high]
    cands, left_out = plan(good, bad, direction, between, exclude=exclude, given=given is not None)

    cache = VerdictCache(Path(args.out), scenario.name, mode)
    old, new = cands[0], cands[-1]
    if direction == Direction.FIX:
        print(
            f"bisecting a fix: {scenario.name} ({mode}), the first release after --bad "
            f"{old.label} that behaves like --good {new.label}"
        )
    else:
        print(
            f"bisecting a regression: {scenario.name} ({mode}), the first release after "
            f"--good {old.label} that behaves like --bad {new.label}"
        )
    source = "--candidates" if given is not None else catalog.source
    print(f"candidates ({len(cands)}, {source}): {' '.join(c.label for c in cands)}")
    if (note := spans_lines_note(cands)) is not None:
        print(note)
    for line in left_out_lines([(c.label, reason) for c, reason in left_out]):
        print(line)
    print(
        f"at most {max_runs(len(cands))} runs, and one retry for each not reached; "
        f"verdict cache {cache.dir} (logfork {cache.version})",
        flush=True,
    )

    def show(step: Step) -> None:
        print(step.line(), flush=True)

    runner = scenario.runner(mode, Path(args.out), args.base_image)
    result = bisect(
        cands,
        runner,
        cache,
        direction=direction,
        fixed_in=scenario.fixed_in,
        unfixed=scenario.unfixed(mode),
        on_step=show,
    )
    for line in result.summary():
        print(line)
    return result.exit_code
