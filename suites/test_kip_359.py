"""KIP-359 was never implemented: a zombie leader keeps acknowledging acks=1 writes that are
later truncated. That cost is recorded; an acks=all write lost fails the test."""

import pytest

from runrecord.outcome import Outcome
from testsupport.scenarios import run_scenario


@pytest.mark.cluster
def test_kip_359_zombie_leader(kafka_target, logfork_runs, request):
    verdict = run_scenario("kip-359-zombie-leader", kafka_target, logfork_runs, request)
    if verdict.outcome == Outcome.CONSISTENT:
        assert verdict.details["acksall"]["lost_count"] == 0
        # The zombie did acknowledge writes after it was deposed: the state was reached.
        assert verdict.details["acks1_truncated"] > 0
