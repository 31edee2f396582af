"""KAFKA-20716 on every selected release: an unclean election drops a committed
transaction's COMMIT marker; the last stable offset stays at the transaction's first offset
after its timeout, read_committed consumers stop there, and the disk audit names the
hanging transaction. Unfixed: expected everywhere."""

import pytest

from basics.releases import Release
from runrecord.outcome import Outcome
from suites.registry import get
from suites.scenarios.kafka_20716 import TXN_TIMEOUT_MS, T
from testsupport.scenarios import run_scenario


@pytest.mark.cluster
def test_kafka_20716(kafka_target, logfork_runs, request):
    verdict = run_scenario("kafka-20716-unclean-drops-marker", kafka_target, logfork_runs, request)
    assert verdict.outcome == Outcome.REPRODUCED
    hanging = verdict.details["checker"]["hanging_transactions"]
    assert [h["first_offset"] for h in hanging] == [T[0]]
    assert hanging[0]["producer_id"] >= 0 and hanging[0]["age_ms"] > TXN_TIMEOUT_MS
    assert verdict.details["read_committed"] == "0-4"
    assert [r["verdict"] for r in verdict.details["conformance"]] == ["violated"] * 3


def test_expected_outcomes():
    scenario = get("kafka-20716-unclean-drops-marker")
    for release, mode in (("4.4.0", "kraft"), ("3.9.2", "zk"), ("0.11.0.3", "zk")):
        assert scenario.expected(Release(release), mode) == Outcome.REPRODUCED
    assert scenario.not_applicable(Release("0.10.2.2"), "zk")
    assert scenario.fixed_text() == "never fixed"
