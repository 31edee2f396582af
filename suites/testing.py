"""Turning a scenario's verdict into a pytest result."""

from __future__ import annotations

import pytest

from suites.scenario import Outcome, Verdict


def assert_verdict(verdict: Verdict) -> None:
    """Pass only when the release behaved as its KIP says; "not reached" is a failure with
    its own message, never a pass; a scenario the release cannot run is a skip."""
    if verdict.outcome == Outcome.NOT_APPLICABLE:
        pytest.skip(verdict.summary)
    if verdict.outcome == Outcome.NOT_REACHED or not verdict.as_expected:
        where = f"\nrun directory: {verdict.run_dir}" if verdict.run_dir else ""
        pytest.fail(verdict.headline() + where, pytrace=False)
