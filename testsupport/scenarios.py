"""Turning a scenario's verdict into a pytest result."""

from __future__ import annotations

from pathlib import Path

import pytest

from runrecord.outcome import Outcome
from runrecord.run import Verdict
from suites.registry import get
from suites.scenario import run


def assert_verdict(verdict: Verdict) -> None:
    """Pass only when the release behaved as its KIP says; "not reached" is a failure with
    its own message, never a pass; a scenario the release cannot run is a skip."""
    if verdict.outcome == Outcome.NOT_APPLICABLE:
        pytest.skip(verdict.summary)
    if not verdict.outcome.has_verdict or not verdict.as_expected:
        where = f"\nrun directory: {verdict.run_dir}" if verdict.run_dir else ""
        pytest.fail(verdict.headline() + where, pytrace=False)


def run_scenario(
    scenario_id: str,
    kafka_target,
    logfork_runs: Path,
    request: pytest.FixtureRequest,
    *,
    attempts: int = 1,
) -> Verdict:
    """Run a scenario on the test's release and mode, marked with its KIP, and assert that
    the release behaved as expected. `attempts` above 1 runs it again, on a fresh cluster,
    only while it ends not reached (a race it cannot steer); every verdict is still earned
    by a run that reached its state."""
    scenario = get(scenario_id)
    if scenario.kip:
        request.node.add_marker(pytest.mark.kip(scenario.kip, scenario.fixed_in))
    for attempt in range(1, attempts + 1):
        verdict = run(
            scenario,
            kafka_target.kafka,
            kafka_target.mode,
            out=logfork_runs,
            base_image=request.config.getoption("base_image"),
        )
        if verdict.outcome != Outcome.NOT_REACHED or attempt == attempts:
            break
        print(f"[logfork] attempt {attempt} not reached, running again: {verdict.summary}")
    assert_verdict(verdict)
    return verdict
