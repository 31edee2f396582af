"""KIP-279's scenarios (KAFKA-6361) on every selected release: each bug before 2.0.0 and
none from it on; known departures from the KIP's text are asserted as documented."""

import pytest

from suites.registry import get
from suites.scenario import run
from suites.testing import assert_verdict


@pytest.mark.cluster
@pytest.mark.parametrize(
    "scenario_id", ["kip-279-s1-short", "kip-279-s1-equal", "kip-279-s1-long", "kip-279-s3"]
)
def test_kip_279(kafka_target, logfork_runs, request, scenario_id):
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
