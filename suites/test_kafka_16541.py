"""KAFKA-16541 on every selected release, on the crash-simulating filesystem: from 3.7.0 to
before 3.8.0 the leader-epoch-checkpoint a DeleteRecords rewrote comes back empty after a
power loss; before and after, it holds its old or its new contents, whole."""

import pytest

from basics.releases import Release
from runrecord.outcome import Outcome
from suites.registry import get
from testsupport.fuse import need_fuse
from testsupport.scenarios import run_scenario


@pytest.mark.cluster
def test_kafka_16541(kafka_target, logfork_runs, request):
    need_fuse()
    verdict = run_scenario("kafka-16541-epoch-checkpoint", kafka_target, logfork_runs, request)
    details = verdict.details
    if verdict.outcome == Outcome.REPRODUCED:
        assert details["checkpoint_after_power_loss"] == "empty (0 bytes)", details
    else:
        assert details["checkpoint_after_power_loss"] in (
            details["checkpoint_before"],
            details["checkpoint_truncated"],
        ), details


def test_expected_outcomes():
    scenario = get("kafka-16541-epoch-checkpoint")
    assert scenario.expected(Release("3.7.1"), "kraft") == Outcome.REPRODUCED
    assert scenario.expected(Release("3.8.0"), "kraft") == Outcome.CONSISTENT
    assert scenario.expected(Release("3.7.1"), "kraft", "ordered") == Outcome.CONSISTENT
    assert scenario.expected(Release("3.6.2"), "zk") == Outcome.CONSISTENT
    assert scenario.not_applicable(Release("2.8.2"), "zk")  # no directory fsync (KAFKA-3968)
