"""KIP-903 (KAFKA-14139) on every selected release: a delayed AlterPartition adds a broker
that came back on an empty disk and acknowledged writes are lost, in KRaft before 3.5 and
in ZooKeeper mode on every release; from 3.5 KRaft's controller rejects the request for
the broker's stale epoch."""

import pytest

from basics.releases import Release
from runrecord.outcome import Outcome
from suites.registry import get
from testsupport.scenarios import run_scenario


@pytest.mark.cluster
def test_kip_903(kafka_target, logfork_runs, request):
    verdict = run_scenario("kip-903-empty-disk-rejoin", kafka_target, logfork_runs, request)
    if verdict.outcome == Outcome.REPRODUCED:
        assert verdict.details["alter_partition"] == "accepted"
        assert verdict.details["lost_offsets"]["all"] == "0-9"
    elif verdict.outcome == Outcome.CONSISTENT:
        assert "broker epoch mismatch" in verdict.details["alter_partition"]


def test_expected_outcomes():
    scenario = get("kip-903-empty-disk-rejoin")
    assert scenario.expected(Release("3.4.1"), "kraft") == Outcome.REPRODUCED
    assert scenario.expected(Release("3.9.2"), "kraft") == Outcome.CONSISTENT
    assert scenario.expected(Release("3.9.2"), "zk") == Outcome.REPRODUCED
    assert scenario.not_applicable(Release("2.6.3"), "zk")
    assert scenario.fixed_text() == "fixed in 3.5.0 (kraft; zk never)"
