"""The smoke scenario on every selected release and mode."""

import pytest

from testsupport.scenarios import run_scenario


@pytest.mark.cluster
def test_smoke(kafka_target, logfork_runs, request):
    run_scenario("smoke", kafka_target, logfork_runs, request)
