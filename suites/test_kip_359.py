"""KIP-359 was never implemented: a zombie leader keeps acknowledging acks=1 writes that are
later truncated. That cost is recorded; an acks=all write lost fails the test."""

import pytest

from suites.registry import get
from suites.scenario import Outcome, run
from suites.testing import assert_verdict


@pytest.mark.cluster
def test_kip_359_zombie_leader(kafka_target, logfork_runs, request):
    verdict = run(
        get("kip-359-zombie-leader"),
        kafka_target.kafka,
        kafka_target.mode,
        out=logfork_runs,
        base_image=request.config.getoption("base_image"),
    )
    assert_verdict(verdict)
    if verdict.outcome == Outcome.CONSISTENT:
        assert verdict.details["acksall_lost"] == []
        # The zombie did acknowledge writes after it was deposed: the state was reached.
        assert verdict.details["acks1_truncated"] > 0
