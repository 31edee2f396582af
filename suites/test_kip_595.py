"""KRaft quorum scenarios (KIP-595)."""

import pytest

from testsupport.scenarios import run_scenario


@pytest.mark.cluster
@pytest.mark.parametrize(
    "scenario_id", ["kip-595-controller-failover", "kip-595-cluster-id-mismatch"]
)
def test_kip_595(kafka_target, logfork_runs, request, scenario_id):
    run_scenario(scenario_id, kafka_target, logfork_runs, request)
