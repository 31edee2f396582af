"""A verdict names the bug it claims: "reproduced" only for the exact symptom a scenario
declares for the release, any other bug "diverged" with both symptoms side by side; and
a scenario that does not apply says so with its own exit code. Crafted findings, no
cluster."""

from __future__ import annotations

import pytest

from basics.releases import Release
from runrecord import exits
from runrecord.outcome import CONSISTENT, DIVERGED, LOST, STUCK, Outcome, Symptom, SymptomPair
from runrecord.run import Verdict
from suites.registry import SCENARIOS
from suites.scenario import Finding, judge, model_line

OLD, NEW = Release("1.1.1"), Release("3.9.2")


def verdict_of(scenario_id: str, release: Release, finding: Finding) -> Verdict:
    scenario = SCENARIOS[scenario_id]
    outcome, summary = judge(scenario, release, "zk", finding)
    wanted = scenario.expected_symptom(release, "zk")
    return Verdict(
        scenario_id,
        str(release),
        "zk",
        outcome,
        scenario.expected(release, "zk"),
        summary,
        symptom=SymptomPair(wanted, finding.observed),
    )


@pytest.mark.parametrize(
    ("scenario", "observed", "outcome"),
    [
        ("kip-279-s1-equal", Symptom(DIVERGED, 11, below_high_watermark=True), "reproduced"),
        ("kip-279-s1-equal", Symptom(DIVERGED, 12), "diverged"),  # the wrong offset
        ("kip-279-s1-equal", Symptom(STUCK, replicas=[2]), "diverged"),  # another bug
        ("kip-279-s1-short", Symptom(STUCK, replicas=[2]), "reproduced"),
        ("kip-279-s1-short", Symptom(STUCK, replicas=[1]), "diverged"),  # the leader stuck?
        ("kip-279-s1-short", Symptom(DIVERGED, 11), "diverged"),
        ("kip-279-s1-long", Symptom(DIVERGED, 11), "departs"),
        ("kip-279-s1-long", Symptom(STUCK, replicas=[2]), "diverged"),
        ("kip-101-s1", Symptom(LOST, 1), "diverged"),  # 1.1.1 is past the fix
        ("kip-279-s1-equal", Symptom(CONSISTENT), "consistent"),  # the bug did not show
    ],
)
def test_only_the_declared_symptom_reproduces(scenario: str, observed: Symptom, outcome: str):
    verdict = verdict_of(scenario, OLD, Finding(observed, "crafted"))
    assert verdict.outcome.value == outcome
    as_expected = outcome in ("reproduced", "departs")
    assert verdict.exit_code == (exits.OK if as_expected else exits.FINDING)
    if outcome == "diverged" and verdict.expected != Outcome.CONSISTENT:
        # Both symptoms, side by side, in the summary and in verdict.json.
        assert f"the brokers showed {observed.describe()}" in verdict.summary
        assert "not the scenario's" in verdict.summary
        assert verdict.symptom is not None and verdict.symptom.observed == observed


def test_the_fixed_release_expects_consistency():
    scenario = SCENARIOS["kip-279-s1-equal"]
    assert scenario.expected_symptom(NEW, "zk") == Symptom(CONSISTENT)
    assert scenario.expected_symptom(OLD, "zk") == Symptom(DIVERGED, 11)
    verdict = verdict_of("kip-279-s1-equal", NEW, Finding(Symptom(DIVERGED, 11), "crafted"))
    assert verdict.outcome == Outcome.DIVERGED and verdict.exit_code == exits.FINDING
    # Consistency expected: the summary is the brokers' own, with no symptom comparison.
    assert verdict.summary == "crafted"


def test_every_scenario_that_expects_a_bug_declares_its_symptom():
    for scenario in SCENARIOS.values():
        if scenario.fixed_in is not None or scenario.unfixed:
            assert scenario.symptom is not None, scenario.id
        for departure in scenario.departures:
            assert departure.symptom.kind == "departs", scenario.id


def test_a_scenario_that_does_not_apply_has_its_own_exit_code():
    verdict = Verdict("kip-279-s1-equal", "0.10.2.2", "zk", Outcome.NOT_APPLICABLE,
                      Outcome.NOT_APPLICABLE, "not applicable")  # fmt: skip
    assert verdict.exit_code == exits.NOT_APPLICABLE != exits.OK


def test_the_headline_says_where_the_model_and_the_brokers_differ():
    finding = Finding(Symptom(DIVERGED, 11), "crafted", predicted="stuck")
    assert model_line(finding) == "the model predicted stuck; the brokers diverged"
    verdict = verdict_of("kip-279-s1-equal", OLD, finding)
    verdict.model = model_line(finding)
    assert "the model predicted stuck; the brokers diverged" in verdict.headline()
    assert model_line(Finding(Symptom(DIVERGED, 11), "crafted", predicted="diverged")) is None
