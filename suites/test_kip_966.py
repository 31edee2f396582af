"""KIP-966 on every selected release: the last replica standing loses acknowledged writes
without ELR (every ZooKeeper release; KRaft before 4.1 unless switched on) and keeps them
with it; the last-known-leader fallback loses them even with ELR on. Every run writes its
KIP-966 conformance table; no statement Kafka implements may be violated."""

from pathlib import Path

import pytest

from basics.protocol import RecoveryState
from basics.releases import Release
from observe.state import PartitionState
from runrecord.conformance import CONFORMS, DEPARTS, VIOLATED
from runrecord.outcome import Outcome
from runrecord.rundir import RunDir
from suites.registry import get
from suites.scenarios.kip_966_rows import Story, last_replica_rows
from testsupport.scenarios import run_scenario

SCENARIOS = [
    "kip-966-last-replica-standing",
    "kip-966-last-replica-standing-elr",
    "kip-966-last-known-leader",
]


@pytest.mark.cluster
@pytest.mark.parametrize("scenario_id", SCENARIOS)
def test_kip_966(kafka_target, logfork_runs, request, scenario_id):
    verdict = run_scenario(scenario_id, kafka_target, logfork_runs, request)
    conformance = RunDir(Path(verdict.run_dir)).conformance()
    assert conformance is not None and conformance.kip == "KIP-966"
    assert not [r for r in conformance.statements if r.verdict == VIOLATED]
    if verdict.outcome == Outcome.REPRODUCED:
        # S1, acknowledged by ISR {B, C}, is what the report lists as lost.
        assert verdict.details["lost_offsets"]["all"] == "5-9"


def test_expected_outcomes_per_release_and_mode():
    main, elr, fallback = (get(s) for s in SCENARIOS)
    assert main.expected(Release("3.9.2"), "zk") == Outcome.REPRODUCED
    assert main.expected(Release("3.9.2"), "kraft") == Outcome.REPRODUCED
    assert main.expected(Release("4.0.2"), "kraft") == Outcome.REPRODUCED
    assert main.expected(Release("4.3.1"), "kraft") == Outcome.CONSISTENT
    assert elr.not_applicable(Release("3.9.2"), "kraft")
    assert elr.expected(Release("4.0.2"), "kraft") == Outcome.CONSISTENT
    assert fallback.expected(Release("4.3.1"), "kraft") == Outcome.REPRODUCED
    assert main.fixed_text() == "fixed in 4.1.0 (kraft; zk never)"
    assert fallback.fixed_text() == "never fixed"


def state(leader, isr, elr=(), lke=(), version=0):
    return PartitionState(
        "kip966",
        0,
        leader,
        0,
        tuple(isr),
        RecoveryState.RECOVERED,
        version,
        "kraft",
        tuple(elr),
        tuple(lke),
    )


def test_rows_conform_when_elr_keeps_s1():
    story = Story("kraft", True, 1)
    story.states = {
        "t0": state(3, [2, 3]),
        "t1": state(3, [3], elr=[2]),
        "t2": state(2, [2], elr=[3], version=98),
        "unclean": state(2, [2], version=109),
        "t3": state(2, [2, 3]),
    }
    rows = last_replica_rows(story)
    assert [r.verdict for r in rows[:-1]] == [CONFORMS] * 7
    assert rows[-1].verdict == DEPARTS and not rows[-1].implemented  # LastKnownELR


def test_rows_are_not_in_effect_without_elr():
    story = Story("zk", False, None)
    story.states = {
        "t0": state(3, [2, 3]),
        "t1": state(3, [3]),
        "t2": state(-1, [3]),
        "t3": state(3, [3]),
    }
    rows = last_replica_rows(story)
    assert all(r.verdict == DEPARTS and not r.implemented for r in rows)
    assert all("ZooKeeper mode has no ELR" in r.observed for r in rows)


def test_a_broken_elr_statement_is_a_violation():
    story = Story("kraft", True, 1)
    story.states = {
        "t0": state(3, [2, 3]),
        "t1": state(3, [3]),  # B left below min ISR, yet no ELR
        "t2": state(2, [2], elr=[3]),
        "unclean": state(2, [2]),
        "t3": state(2, [2]),
    }
    assert last_replica_rows(story)[1].verdict == VIOLATED
