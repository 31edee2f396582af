"""`logfork flakes`: run deterministic scenarios N times on one release and count verdicts.

A scenario that gives two different verdicts on the same release is a flake: either the
scenario does not force its interleaving, or the checker is unstable. Zero flips is the bar.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from fixtures.releases import resolve
from runrecord.outcome import Outcome
from runrecord.run import Verdict
from suites import registry
from suites.scenario import ScenarioError, run


@dataclass
class Tally:
    scenario: str
    outcomes: Counter = field(default_factory=Counter)
    as_expected: int = 0
    seconds: list[float] = field(default_factory=list)
    phases: Counter = field(default_factory=Counter)

    @property
    def flips(self) -> int:
        return len(self.outcomes) - 1 if self.outcomes else 0

    def line(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in self.outcomes.most_common())
        runs = len(self.seconds) or 1
        split = " ".join(f"{name} {total / runs:.1f}" for name, total in self.phases.items())
        return (
            f"{self.scenario:30} {counts:40} as expected {self.as_expected}/"
            f"{sum(self.outcomes.values())}  flips {self.flips}  "
            f"mean {sum(self.seconds) / runs:.0f}s ({split})"
        )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "scenarios",
        nargs="*",
        metavar="SCENARIO",
        help="scenario ids (default: every scenario the release can run)",
    )
    parser.add_argument("--kafka-version", required=True, metavar="V")
    parser.add_argument("--kafka-mode", choices=("zk", "kraft"))
    parser.add_argument("--runs", type=int, default=10, help="runs per scenario (default 10)")
    parser.add_argument("--out", default="runs", metavar="DIR")


def main(args: argparse.Namespace) -> int:
    release = resolve(args.kafka_version).release
    ids = args.scenarios or [s.id for s in registry.SCENARIOS.values()]
    tallies: list[Tally] = []
    for scenario_id in ids:
        scenario = registry.get(scenario_id)
        mode = args.kafka_mode or next((m for m in scenario.modes if m in release.modes), None)
        if mode is None or scenario.not_applicable(release, mode):
            continue
        tally = Tally(scenario_id)
        tallies.append(tally)
        for i in range(args.runs):
            started = time.monotonic()
            try:
                verdict: Verdict = run(scenario, args.kafka_version, mode, out=Path(args.out))
            except ScenarioError as exc:
                # Counted, not fatal: the remaining runs still say whether it was a one-off.
                tally.outcomes["error"] += 1
                print(f"[{i + 1}/{args.runs}] ERROR: {exc}", flush=True)
                continue
            finally:
                tally.seconds.append(time.monotonic() - started)
            tally.outcomes[verdict.outcome.value] += 1
            tally.phases.update(verdict.phases)
            tally.as_expected += (
                bool(verdict.as_expected) and verdict.outcome != Outcome.NOT_REACHED
            )
            print(f"[{i + 1}/{args.runs}] {verdict.headline()[:160]}", flush=True)
    print(f"\nverdict counts on Kafka {release}, {args.runs} runs each:")
    for tally in tallies:
        print(tally.line())
    flips = sum(t.flips for t in tallies)
    print(f"flakes: {flips} flip(s) over {len(tallies)} scenario(s)")
    return 0 if flips == 0 and all(t.as_expected == args.runs for t in tallies) else 1
