"""KRaft quorum scenarios (KIP-595)."""

import pytest

from suites.registry import get
from suites.scenario import run
from suites.testing import assert_verdict


@pytest.mark.cluster
@pytest.mark.parametrize(
    "scenario_id", ["kip-595-controller-failover", "kip-595-cluster-id-mismatch"]
)
def test_kip_595(kafka_target, logfork_runs, request, scenario_id):
    scenario = get(scenario_id)
    request.node.add_marker(pytest.mark.kip(scenario.kip, scenario.fixed_in))
    assert_verdict(
        run(
            scenario,
            kafka_target.kafka,
            kafka_target.mode,
            out=logfork_runs,
            base_image=request.config.getoption("base_image"),
        )
    )
