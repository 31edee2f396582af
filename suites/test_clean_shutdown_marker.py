"""clean-shutdown-marker on real brokers: writes acknowledged while the deletion of the
clean-shutdown marker in the broker's second log dir is not durable, then a power loss.
The marker comes back, but so does the log dir as it was before the restart: the new
partition's directory is lost with the unlink, the broker finds nothing to load there,
creates the partition again and fetches it, and no acknowledged write is lost."""

import pytest

from basics.releases import Release
from suites.registry import get
from testsupport.scenarios import run_scenario


@pytest.mark.cluster
def test_clean_shutdown_marker(kafka_target, logfork_runs, request):
    verdict = run_scenario("clean-shutdown-marker", kafka_target, logfork_runs, request)
    details = verdict.details
    # The window was caught (else the run is not reached): acknowledged while pending.
    assert "unlink .kafka_cleanshutdown" in details["pending_after_acks"]
    assert details["marker_back"]
    # The new partition's directory went with the unlink (neither had a directory fsync),
    # so the empty log dir had nothing to skip; the resident partition's log dir, whose
    # unlink its first high-watermark checkpoint made durable, was recovered.
    assert details["partition_kept_by_the_power_loss"] is False
    assert details["recovery_of_empty_dir"] == "nothing to load"
    assert any("Recovering" in line for line in details["second_start"]["resident_dir"])


def test_applies_from_3_7():
    scenario = get("clean-shutdown-marker")
    assert scenario.not_applicable(Release("3.6.2"), "zk")
    assert scenario.not_applicable(Release("3.9.2"), "zk", "cut")
    assert scenario.not_applicable(Release("3.9.2"), "kraft", "torn") is None
    assert scenario.not_applicable(Release("4.3.1"), "kraft") is None
