"""Scenario runs simulated for the commands that run many (`logfork bisect`, `logfork
atlas`): no cluster, each run's outcome decided by the test, and the release catalogue
taken from logfork's built-in list (no network)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from basics.releases import Release
from fixtures import catalog
from fixtures.releases import resolve
from runrecord.outcome import Outcome
from runrecord.run import Verdict
from suites import scenario as scenario_module
from suites.scenario import Scenario

Decide = Callable[[Scenario, Release, str], Outcome]


@dataclass
class SimulatedRuns:
    decide: Decide  # the outcome of a run; replace it to change what later runs give
    calls: list[tuple[str, str]] = field(default_factory=list)  # (release or path, mode)

    def run(self, scenario: Scenario, kafka: str, mode: str, *, out, base_image=None) -> Verdict:
        release = resolve(kafka).release if "/" in kafka else Release(kafka)
        self.calls.append((kafka, mode))
        outcome = self.decide(scenario, release, mode)
        expected = scenario.expected(release)
        return Verdict(scenario.id, str(release), mode, outcome, expected, "simulated")


def simulate_runs(monkeypatch: pytest.MonkeyPatch, decide: Decide) -> SimulatedRuns:
    runs = SimulatedRuns(decide)
    monkeypatch.setattr(scenario_module, "run", runs.run)
    monkeypatch.setattr(catalog, "load", lambda refresh=False: catalog.snapshot())
    return runs
