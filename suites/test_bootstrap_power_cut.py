"""bootstrap-power-cut on every selected KRaft release, on crash-simulating filesystems:
under POSIX's rules (`unsynced`) a broker whose power is cut between its format and its
first start cannot start before 4.4.0, and starts from 4.4.0; its expectations are checked
without a cluster too."""

import pytest

from basics.releases import Release
from runrecord.outcome import UNSTARTABLE, Outcome
from suites.registry import get
from testsupport.fuse import need_fuse
from testsupport.scenarios import run_scenario


@pytest.mark.cluster
def test_bootstrap_power_cut(kafka_target, logfork_runs, request):
    need_fuse()
    verdict = run_scenario("bootstrap-power-cut", kafka_target, logfork_runs, request)
    observed = verdict.symptom.observed
    assert observed is not None, verdict.summary
    if kafka_target.release.at_least(4, 4):
        assert verdict.outcome == Outcome.CONSISTENT, verdict.summary
    else:
        assert verdict.outcome == Outcome.REPRODUCED, verdict.summary
        assert observed.kind == UNSTARTABLE and observed.replicas == [3], verdict.summary
        # Why, in the broker's own words (BootstrapMetadata.fromRecords).
        assert "bootstrap.checkpoint" in verdict.details["exited"], verdict.details


def test_expected_outcomes():
    scenario = get("bootstrap-power-cut")
    assert scenario.expected(Release("3.9.2"), "kraft", "unsynced") == Outcome.REPRODUCED
    assert scenario.expected(Release("4.4.0"), "kraft", "unsynced") == Outcome.CONSISTENT
    assert scenario.expected(Release("3.9.2"), "kraft", "ordered") == Outcome.CONSISTENT
    assert scenario.not_applicable(Release("3.9.2"), "zk")
    assert scenario.not_applicable(Release("3.9.2"), "kraft", "cut")
