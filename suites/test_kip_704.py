"""KIP-704 on releases that implement it: every implemented invariant holds, departures
from the KIP's text are listed in the run's conformance table (conformance.json)."""

from pathlib import Path

import pytest

from runrecord.outcome import Outcome
from runrecord.rundir import RunDir
from testsupport.scenarios import run_scenario


@pytest.mark.cluster
def test_kip_704_unclean_recovery(kafka_target, logfork_runs, request):
    verdict = run_scenario("kip-704-unclean-recovery", kafka_target, logfork_runs, request)
    if verdict.outcome == Outcome.CONSISTENT:
        conformance = RunDir(Path(verdict.run_dir)).conformance()
        assert conformance is not None
        rows = conformance.statements
        assert all(r.verdict in ("conforms", "departs") for r in rows)
        # The probes answered: each of the five requests has its row, whatever it says.
        assert sum("recovering leader answers" in r.statement for r in rows) == 5
