"""KAFKA-7128 on every selected ZooKeeper-mode release: before 2.0.1 a follower rejoins the
ISR at a new leader's lagging high watermark without the committed tail, is elected, and
acknowledged writes are lost; from 2.0.1 it must first reach the leader's epoch start."""

import pytest

from basics.releases import Release
from runrecord.outcome import Outcome
from suites.registry import get
from testsupport.scenarios import run_scenario


@pytest.mark.cluster
def test_kafka_7128(kafka_target, logfork_runs, request):
    # One run, no retry: a broker that exits on restart before KAFKA-7414 ("log truncation
    # is not allowed") is what the release does, recorded, and the loss judged without it.
    verdict = run_scenario("kafka-7128-lagging-high-watermark", kafka_target, logfork_runs, request)
    joined = verdict.details["c_joined_isr"]
    assert joined == (verdict.outcome == Outcome.REPRODUCED)
    if joined:
        assert verdict.details["lost_offsets"]["all"] == "5-9"
    if verdict.details["halted"]:
        assert not kafka_target.release.at_least(2, 0, 1)


def test_expected_outcomes():
    scenario = get("kafka-7128-lagging-high-watermark")
    assert scenario.expected(Release("2.0.0"), "zk") == Outcome.REPRODUCED
    assert scenario.expected(Release("2.0.1"), "zk") == Outcome.CONSISTENT
    assert scenario.not_applicable(Release("3.9.2"), "kraft")
