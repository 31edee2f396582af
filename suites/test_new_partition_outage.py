"""new-partition-outage on every selected release from 3.0, on crash-simulating filesystems:
under POSIX's rules (`unsynced`) every acknowledged write of the new partition is lost on
every replica; its expectations per power model are checked without a cluster."""

import pytest

from basics.releases import Release
from runrecord.outcome import LOST, Outcome
from suites.registry import get
from testsupport.fuse import need_fuse
from testsupport.scenarios import run_scenario


@pytest.mark.cluster
def test_new_partition_outage(kafka_target, logfork_runs, request):
    need_fuse()
    verdict = run_scenario("new-partition-outage", kafka_target, logfork_runs, request)
    details = verdict.details
    assert verdict.outcome == Outcome.REPRODUCED, verdict.summary
    assert details["directory_kept"] == {"b1": False, "b2": False, "b3": False}, details
    assert verdict.symptom.observed is not None and verdict.symptom.observed.kind == LOST


def test_expected_outcomes():
    scenario = get("new-partition-outage")
    assert scenario.expected(Release("3.8.0"), "kraft") == Outcome.REPRODUCED
    assert scenario.expected(Release("4.4.0"), "kraft", "unsynced") == Outcome.REPRODUCED
    assert scenario.expected(Release("4.4.0"), "kraft", "ordered") == Outcome.CONSISTENT
    assert scenario.not_applicable(Release("2.8.2"), "zk")
