"""`logfork bisect SCENARIO --good V --bad V [--regression] [--kafka-mode M]`.

Runs the scenario on real clusters, release by release, in a binary search between the two
ends (suites.bisect), and prints each step and the answer. Candidates are the releases on
Maven Central between the ends (fixtures.catalog), or the user's own --candidates (local
distributions, oldest first). Verdicts are cached in <out>/.cache/verdicts/.

Exit: 0 the answer agrees with the scenario's fixed_in (or it declares none); 1 it does
not; 2 bad input; 3 skips (or an end that was not reached) leave the answer ambiguous.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fixtures.releases import parse_version
from suites.bisect import BadRange, Candidate, Direction, Step, bisect, max_runs, plan
from suites.cells import (
    add_run_arguments,
    candidate,
    left_out_lines,
    scenario_runner,
    why_not,
)

HELP = "find the first release that fixed (or broke) a scenario's behaviour"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario", help="scenario id (see `logfork list`)")
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


def _choose_mode(scenario, ends: list[Candidate], wanted: str | None) -> str:
    if wanted:
        return wanted
    for mode in scenario.modes:
        if all(mode in c.release.modes for c in ends):
            return mode
    have = "; ".join(f"{c.label}: {', '.join(c.release.modes)}" for c in ends)
    raise BadRange(
        f"{scenario.id} runs in {' and '.join(scenario.modes)} mode, and no mode of it is "
        f"common to both ends ({have}). A bisect compares like with like: pick ends that "
        f"share a mode."
    )


def main(args: argparse.Namespace) -> int:
    from fixtures import catalog as catalogue
    from suites import registry
    from suites.verdict_cache import VerdictCache

    scenario = registry.get(args.scenario)
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
        return why_not(catalog, scenario, c, mode)

    if given is not None:
        between = given
    elif not (good.local or bad.local):
        between = [Candidate.maven(v) for v in catalog.between(good.key, bad.key)]
    else:  # a local build's version need not be on Maven Central
        low, high = sorted((good.release.parts, bad.release.parts))
        between = [Candidate.maven(v) for v in catalog.versions if low <= parse_version(v) <= high]
    cands, left_out = plan(good, bad, direction, between, exclude=exclude, given=given is not None)

    cache = VerdictCache(Path(args.out), scenario.id, mode)
    old, new = cands[0], cands[-1]
    if direction == Direction.FIX:
        print(
            f"bisecting a fix: {scenario.id} ({mode}), the first release after --bad "
            f"{old.label} that behaves like --good {new.label}"
        )
    else:
        print(
            f"bisecting a regression: {scenario.id} ({mode}), the first release after "
            f"--good {old.label} that behaves like --bad {new.label}"
        )
    source = "--candidates" if given is not None else catalog.source
    print(f"candidates ({len(cands)}, {source}): {' '.join(c.label for c in cands)}")
    for line in left_out_lines([(c.label, reason) for c, reason in left_out]):
        print(line)
    print(
        f"at most {max_runs(len(cands))} runs, and one retry for each not reached; "
        f"verdict cache {cache.dir} (logfork {cache.version})",
        flush=True,
    )

    def show(step: Step) -> None:
        print(step.line(), flush=True)

    runner = scenario_runner(scenario, mode, out=Path(args.out), base_image=args.base_image)
    result = bisect(
        cands,
        runner,
        cache,
        direction=direction,
        fixed_in=scenario.fixed_in,
        on_step=show,
    )
    for line in result.summary():
        print(line)
    return result.exit_code
