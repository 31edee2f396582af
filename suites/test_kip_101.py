"""KIP-101's scenarios on every selected release: the bug before 0.11.0, none from it on."""

import pytest

from suites.registry import get
from suites.scenario import run
from suites.testing import assert_verdict


@pytest.mark.cluster
@pytest.mark.parametrize("scenario_id", ["kip-101-s1", "kip-101-s2"])
def test_kip_101(kafka_target, logfork_runs, request, scenario_id):
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
