"""KIP-279's scenarios (KAFKA-6361) on every selected release: each bug before 2.0.0 and
none from it on; known departures from the KIP's text are asserted as documented."""

import pytest

from testsupport.scenarios import run_scenario


@pytest.mark.cluster
@pytest.mark.parametrize(
    "scenario_id", ["kip-279-s1-short", "kip-279-s1-equal", "kip-279-s1-long", "kip-279-s3"]
)
def test_kip_279(kafka_target, logfork_runs, request, scenario_id):
    run_scenario(scenario_id, kafka_target, logfork_runs, request)
