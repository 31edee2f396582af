"""KIP-704 on releases that implement it: every implemented invariant holds, departures
from the KIP's text are listed in the run's conformance table (conformance.json)."""

import json
from pathlib import Path

import pytest

from suites.registry import get
from suites.scenario import Outcome, run
from suites.testing import assert_verdict


@pytest.mark.cluster
def test_kip_704_unclean_recovery(kafka_target, logfork_runs, request):
    scenario = get("kip-704-unclean-recovery")
    request.node.add_marker(pytest.mark.kip(scenario.kip, scenario.fixed_in))
    verdict = run(
        scenario,
        kafka_target.kafka,
        kafka_target.mode,
        out=logfork_runs,
        base_image=request.config.getoption("base_image"),
    )
    assert_verdict(verdict)
    if verdict.outcome == Outcome.CONSISTENT:
        rows = json.loads((Path(verdict.run_dir) / "conformance.json").read_text())
        assert all(r["verdict"] in ("conforms", "departs") for r in rows)
        # The probes answered: each of the five requests has its row, whatever it says.
        assert sum("recovering leader answers" in r["statement"] for r in rows) == 5
