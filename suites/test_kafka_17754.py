"""KAFKA-17754 on every selected release: a held abort, retried, arrives late and aborts the
producer's next transaction; the client's commit of it succeeds, and read_committed
consumers see it torn. librdkafka speaks transactions v1 only, so it is expected everywhere;
the release's own Java client uses transactions v2 from 4.0, which fences the late abort."""

import pytest

from basics.releases import Release
from runrecord.outcome import Outcome
from suites.registry import get
from suites.scenarios.kafka_17754 import B_OFFSET
from testsupport.scenarios import run_scenario


@pytest.mark.cluster
def test_kafka_17754(kafka_target, logfork_runs, request):
    verdict = run_scenario("kafka-17754-late-endtxn", kafka_target, logfork_runs, request)
    assert verdict.outcome == Outcome.REPRODUCED
    details = verdict.details
    assert details["n_plus_1_ended_early"] and details["n_plus_1_outcome"] == "committed"
    assert details["held_bytes"] > 0
    kinds = {(a["kind"], a["offset"]) for a in details["read_check"]["anomalies"]}
    assert kinds == {("lost-write", B_OFFSET), ("torn-transaction", B_OFFSET)}
    assert details["read_committed"] == {"p0": "nothing", "p1": "c@0"}
    # The disk holds what the coordinator wrote, consistently: only the reads see the tear.
    assert all(c["status"] == "consistent" for c in details["checker"])
    if kafka_target.mode == "kraft" and kafka_target.release.at_least(4, 0):
        assert details["transaction_version"] == 2  # v2 on, and no help to a v1 client


@pytest.mark.cluster
def test_kafka_17754_java_client(kafka_target, logfork_runs, request):
    verdict = run_scenario("kafka-17754-late-endtxn-java", kafka_target, logfork_runs, request)
    details = verdict.details
    assert details["held_bytes"] > 0 and details["n_plus_1_outcome"] == "committed"
    fixed = verdict.outcome == Outcome.CONSISTENT
    assert fixed == kafka_target.release.at_least(4, 0)
    assert details["n_plus_1_ended_early"] != fixed
    assert details["read_committed"] == ({"p0": "b@2", "p1": "c@0"} if fixed else
                                         {"p0": "nothing", "p1": "c@0"})  # fmt: skip


def test_expected_outcomes():
    scenario = get("kafka-17754-late-endtxn")
    for release, mode in (("4.4.0", "kraft"), ("3.9.2", "zk"), ("1.1.1", "zk")):
        assert scenario.expected(Release(release), mode) == Outcome.REPRODUCED
    assert scenario.not_applicable(Release("0.10.2.2"), "zk")
    java = get("kafka-17754-late-endtxn-java")
    assert java.expected(Release("3.9.2"), "kraft") == Outcome.REPRODUCED
    assert java.expected(Release("4.0.0"), "kraft") == Outcome.CONSISTENT
