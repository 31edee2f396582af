"""The smoke scenario on every selected release and mode."""

import pytest

from suites.scenario import run
from suites.scenarios import smoke
from suites.testing import assert_verdict


@pytest.mark.cluster
def test_smoke(kafka_target, logfork_runs, request):
    verdict = run(
        smoke.SCENARIO,
        kafka_target.kafka,
        kafka_target.mode,
        out=logfork_runs,
        base_image=request.config.getoption("base_image"),
    )
    assert_verdict(verdict)
