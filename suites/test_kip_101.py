"""KIP-101's scenarios on every selected release: the bug before 0.11.0, none from it on."""

import pytest

from testsupport.scenarios import run_scenario


@pytest.mark.cluster
@pytest.mark.parametrize("scenario_id", ["kip-101-s1", "kip-101-s2"])
def test_kip_101(kafka_target, logfork_runs, request, scenario_id):
    run_scenario(scenario_id, kafka_target, logfork_runs, request)
