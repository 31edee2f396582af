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
) -> Verdict:
    """Run a scenario once on the test's release and mode, marked with its KIP, and assert
    that the release behaved as expected. No retry: the first run's verdict is the one."""
    scenario = get(scenario_id)
    if scenario.kip:
        request.node.add_marker(pytest.mark.kip(scenario.kip, scenario.fixed_in))
    verdict = run(
        scenario,
        kafka_target.kafka,
        kafka_target.mode,
        out=logfork_runs,
        base_image=request.config.getoption("base_image"),
    )
    assert_verdict(verdict)
    return verdict
