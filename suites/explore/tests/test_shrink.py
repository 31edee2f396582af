"""The shrinker against simulated runners: the model itself, flaky ones, and crafted
predicates."""

from __future__ import annotations

import threading

from basics.protocol import Protocol
from checkers.simulate import simulate
from runrecord.schedule import BrokerConfig, Cluster, Schedule, TopicConfig, validate
from runrecord.steps.base import Role
from runrecord.steps.disks import MoveDir
from runrecord.steps.elections import ElectPreferred
from runrecord.steps.links import Cut, ExpireSession, Heal, HoldBack
from runrecord.steps.processes import Kill, Restart
from runrecord.steps.txn import TxnCommit, TxnWrite
from runrecord.steps.waits import Wait
from runrecord.steps.writes import Produce
from suites.explore.drawing.guide import kafka_6361_class
from suites.explore.drawing.shrink import (
    FAILING,
    FLAKY,
    SCREENED,
    ShrinkResult,
    shrink,
    simulated_runner,
)

KIP101 = Protocol.KIP_101
TRUTH = simulated_runner(KIP101)

# KAFKA-6361 (n == 20), padded with steps that change nothing that matters.
PADDED = Schedule(
    Cluster(
        brokers=3,
        replication_factor=2,
        replicas=(2, 1),
        controller=3,
        broker_config=BrokerConfig(replica_lag_time_max_ms=600000),
    ),
    seed=5,
    steps=(
        Produce(3),
        Kill(2, "SIGTERM"),
        Wait(30),
        Restart(2),
        Wait(5),
        Produce(11),
        HoldBack(2),
        Produce(10, "1"),
        Cut(3, 1),
        Heal(3, 1),
        ElectPreferred(),
        Produce(6, "1"),
        Produce(4, "1"),
        ExpireSession(2),
        Produce(10, "1"),
        Heal(),
        Produce(2),
    ),
    origin={"explore_seed": 1, "index": 9},
)


def _check_log(result: ShrinkResult) -> None:
    """Everything the shrinker took really fails; the runs add up."""
    assert sum(len(a.runs) for a in result.attempts) == result.runs
    for a in result.attempts:
        if a.verdict == FAILING:
            assert a.schedule is not None and TRUTH(a.schedule) == result.failure


def test_shrinks_a_kafka_6361_schedule_on_the_model() -> None:
    assert TRUTH(PADDED) == "diverged"
    result = shrink(PADDED, TRUTH, budget=400)
    assert result.reproducible and not result.exhausted and result.failure == "diverged"
    minimal = result.minimal
    assert len(minimal.steps) <= 8
    assert TRUTH(minimal) == "diverged" and kafka_6361_class(minimal)
    assert validate(minimal) == minimal and minimal.seed == PADDED.seed
    assert minimal.origin == {
        "explore_seed": 1,
        "index": 9,
        "shrunk_from_steps": len(PADDED.steps),
        "shrunk_runs": result.runs,
        "shrunk_failure": "diverged",
    }
    # 1-minimal: no single step can go.
    for i in range(len(minimal.steps)):
        assert TRUTH(minimal.with_steps(minimal.steps[:i] + minimal.steps[i + 1 :])) != "diverged"
    _check_log(result)
    assert result.log()[0] == "#1 the original (17 steps): failing [diverged, diverged]"


class Flaky:
    """The model as an unreliable cluster: every third run of a failing schedule passes,
    every fifth run of a passing one fails (deterministically, by call count)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, schedule: Schedule) -> str | None:
        self.calls += 1
        truth = TRUTH(schedule)
        if truth is not None and self.calls % 3 == 0:
            return None
        if truth is None and self.calls % 5 == 0:
            return "diverged"
        return truth


def test_a_flaky_runner_never_makes_a_passing_candidate_count() -> None:
    runner = Flaky()
    result = shrink(PADDED, runner, budget=400)
    assert result.reproducible and result.failure == "diverged"
    assert TRUTH(result.minimal) == "diverged" and len(result.minimal.steps) <= 10
    verdicts = [a.verdict for a in result.attempts]
    assert FLAKY in verdicts
    _check_log(result)
    assert runner.calls == result.runs


def test_an_original_that_does_not_fail_twice_is_not_shrunk() -> None:
    calls = []

    def once(schedule: Schedule) -> str | None:
        calls.append(1)
        return "diverged" if len(calls) == 1 else None

    result = shrink(PADDED, once)
    assert not result.reproducible and result.minimal == PADDED and result.runs == 2
    assert result.attempts[0].verdict == FLAKY
    result = shrink(PADDED, lambda s: None)
    assert not result.reproducible and result.runs == 1 and result.failure is None


def test_the_budget_bounds_the_runs() -> None:
    result = shrink(PADDED, TRUTH, budget=40)
    assert result.exhausted and result.runs <= 40
    assert TRUTH(result.minimal) == "diverged" and len(result.minimal.steps) < len(PADDED.steps)


def test_a_budget_spent_mid_pass_keeps_what_the_pass_had_found() -> None:
    # The drop pass takes each failing candidate as it goes; a budget that runs out before
    # the pass returns must not lose those steps (an 8-step reproduction was once reported
    # as its 17-step original).
    for budget in range(3, 41):
        result = shrink(PADDED, TRUTH, budget=budget)
        taken = [a.schedule for a in result.attempts if a.verdict == FAILING]
        assert result.minimal.steps == taken[-1].steps, budget


def test_another_kind_of_failure_does_not_count() -> None:
    # n < 20 would make the follower stuck instead: not the divergence being shrunk.
    result = shrink(PADDED, TRUTH, budget=400)
    slipped = [a for a in result.attempts if a.problem == "fails as 'stuck', not 'diverged'"]
    assert slipped and all(a.verdict != FAILING for a in slipped)
    anything = shrink(PADDED, TRUTH, budget=400, same_failure=False)
    assert TRUTH(anything.minimal) in ("diverged", "stuck")


def test_merges_and_reductions() -> None:
    def records(schedule: Schedule) -> str | None:
        total = sum(s.count for s in schedule.steps if isinstance(s, Produce))
        healed = any(isinstance(s, Heal) for s in schedule.steps)
        return "diverged" if total >= 7 and healed else None

    schedule = Schedule(
        Cluster(brokers=3, replication_factor=2),
        steps=(Produce(4, "1"), Cut(1, 2), Produce(4, "1"), Heal(1, 2), Heal(), Wait(30)),
    )
    result = shrink(schedule, records)
    assert result.minimal.steps == (Produce(7, "1"), Heal())
    changes = [a.change for a in result.attempts if a.verdict == FAILING]
    assert "merge the produces at steps 0 and 1" in changes
    assert any(c.startswith("step 0: count 8 ->") for c in changes)


def test_a_throttle_is_dropped_where_the_finding_stays() -> None:
    def moved(schedule: Schedule) -> str | None:
        return "epoch-cache-lost" if any(isinstance(s, MoveDir) for s in schedule.steps) else None

    jbod = Cluster(mode="kraft", brokers=3, replication_factor=3, log_dirs=2)
    result = shrink(Schedule(jbod, steps=(MoveDir(Role.LEADER, throttle=True),)), moved)
    assert result.minimal.steps == (MoveDir(Role.LEADER),)
    assert "step 0: throttle dropped" in [a.change for a in result.attempts]


def test_a_transaction_spans_fewer_partitions_where_the_finding_stays() -> None:
    def committed(schedule: Schedule) -> str | None:
        kinds = [type(s) for s in schedule.steps]
        return "hanging-transaction" if kinds == [TxnWrite, TxnCommit] else None

    kraft = Cluster(mode="kraft", brokers=3, replication_factor=3, background_partitions=2)
    result = shrink(Schedule(kraft, steps=(TxnWrite(2, partitions=3), TxnCommit())), committed)
    assert result.minimal.steps == (TxnWrite(2), TxnCommit())
    assert "step 0: write to partition 0 only" in [a.change for a in result.attempts]


def test_targets_signals_and_the_cluster_get_simpler() -> None:
    def kills(schedule: Schedule) -> str | None:
        return "stuck" if any(isinstance(s, Kill) for s in schedule.steps) else None

    big = Cluster(
        brokers=5,
        replication_factor=3,
        replicas=(3, 4, 5),
        controller=1,
        topic_config=TopicConfig(min_insync_replicas=2, flush_messages=10),
        node_config={4: BrokerConfig(session_timeout_ms=9000)},
    )
    result = shrink(Schedule(big, steps=(Produce(5), Kill(4, "SIGTERM"), Wait(3))), kills)
    assert result.minimal.steps == (Kill(Role.LEADER, "SIGKILL"),)
    c = result.minimal.cluster
    assert (c.replication_factor, c.replicas, c.topic_config, c.node_config) == (
        2,
        (3, 4),
        TopicConfig(),
        {},
    )
    assert c.brokers == 4  # broker 4 holds a replica: no fewer
    assert simulate(result.minimal, KIP101).steps[0].status == "done"


def test_invalid_candidates_are_never_run() -> None:
    seen: list[Schedule] = []

    def runner(schedule: Schedule) -> str | None:
        seen.append(schedule)
        return "diverged"

    schedule = Schedule(
        Cluster(brokers=3, replication_factor=3, replicas=(1, 2, 3)), steps=(Kill(3),)
    )
    result = shrink(schedule, runner)
    for s in seen:
        assert validate(s) == s
    assert result.minimal.cluster.replication_factor == 2


def test_a_prescreen_rules_candidates_out_without_running_them() -> None:
    runs: list[Schedule] = []

    def counted(schedule: Schedule) -> str | None:
        runs.append(schedule)
        return TRUTH(schedule)

    def model(schedule: Schedule) -> str | None:
        predicted = TRUTH(schedule)
        return None if predicted == "diverged" else f"the model predicts {predicted}"

    result = shrink(PADDED, counted, budget=400, prescreen=model)
    assert result.reproducible and TRUTH(result.minimal) == "diverged"
    screened = [a for a in result.attempts if a.verdict == SCREENED]
    assert screened and all(a.runs == [] and a.problem for a in screened)
    assert len(runs) == result.runs  # a screened candidate costs no run
    assert all(TRUTH(s) == "diverged" for s in runs)
    plain = shrink(PADDED, TRUTH, budget=400)
    assert result.runs < plain.runs


def test_a_failure_already_seen_is_the_first_confirmation() -> None:
    result = shrink(PADDED, TRUTH, budget=400, seen="diverged")
    assert result.attempts[0].runs == ["diverged", "diverged"]
    assert result.runs == sum(len(a.runs) for a in result.attempts) - 1
    assert result.reproducible and TRUTH(result.minimal) == "diverged"


def test_several_runners_reach_the_single_runner_s_minimal_running_at_once() -> None:
    alone = shrink(PADDED, TRUTH, budget=400)
    # Each run waits a moment for two others to be in flight beside it: the most seen at once
    # says whether candidates ran together.
    lock = threading.Condition()
    inflight, most = [0], [0]

    def together(schedule: Schedule) -> str | None:
        with lock:
            inflight[0] += 1
            most[0] = max(most[0], inflight[0])
            lock.notify_all()
            lock.wait_for(lambda: inflight[0] >= 3, timeout=0.1)
        try:
            return TRUTH(schedule)
        finally:
            with lock:
                inflight[0] -= 1

    result = shrink(PADDED, together, budget=400, more_runners=[together, together])
    assert result.reproducible and result.failure == "diverged"
    assert result.minimal.steps == alone.minimal.steps
    assert most[0] >= 2
    _check_log(result)
    assert [a.number for a in result.attempts] == list(range(1, len(result.attempts) + 1))
    # The candidates after the first failing one of a batch cost runs alone would not spend.
    assert result.runs >= alone.runs


def test_the_batch_never_spends_more_than_the_budget() -> None:
    calls = []

    def counting(schedule: Schedule) -> str | None:
        calls.append(1)
        return TRUTH(schedule)

    result = shrink(PADDED, counting, budget=15, more_runners=[counting, counting])
    assert result.exhausted and result.runs == len(calls) <= 15
    assert TRUTH(result.minimal) == "diverged"


def test_a_schedule_that_passed_in_an_earlier_shrink_is_not_taken_later() -> None:
    # The race explore met on 4.4.0: the model's minimal passed when run first, then a
    # shrink from the original reached it and two lucky runs would have taken it.
    # The shrinker's first candidate from PADDED: its last 9 steps (run when nothing is known).
    minimal = validate(Schedule(PADDED.cluster, seed=5, steps=PADDED.steps[8:]))
    tried: dict[str, str] = {}
    first = shrink(minimal, lambda s: None, budget=10, tried=tried)
    assert not first.reproducible
    calls: list[Schedule] = []

    def fails(schedule: Schedule) -> str | None:
        calls.append(schedule)
        return "diverged"  # every schedule fails from now on, the minimal too

    again = shrink(PADDED, fails, budget=400, seen="diverged", tried=tried)
    assert again.reproducible
    assert all(s.steps != minimal.steps for s in calls)  # never run again, never taken
    assert again.minimal.steps != minimal.steps


def test_the_minimal_handed_over_fails_every_run_of_the_gate() -> None:
    result = shrink(PADDED, TRUTH, budget=400, gate=5)
    gated = [a for a in result.attempts if a.change == "the gate: 5 runs in a row"]
    assert result.gated and len(gated) == 1 and gated[0].runs == ["diverged"] * 5
    assert gated[0].schedule is not None and gated[0].schedule.steps == result.minimal.steps
    assert result.minimal.origin["confirmed"] == "failed 5 of 5 runs"
    _check_log(result)


def test_a_racy_minimal_gives_way_to_the_latest_schedule_that_passes_the_gate() -> None:
    # Schedules of fewer than 11 steps (the model's minimal has 8) fail two runs in three:
    # two in a row pass the search often enough, never the gate.
    counts: dict[int, int] = {}

    def racy(schedule: Schedule) -> str | None:
        truth = TRUTH(schedule)
        if truth is None or len(schedule.steps) >= 11:
            return truth
        n = counts[len(schedule.steps)] = counts.get(len(schedule.steps), 0) + 1
        return truth if n % 3 != 0 else None

    result = shrink(PADDED, racy, budget=400, gate=5)
    assert result.gated and len(result.minimal.steps) >= 11
    assert TRUTH(result.minimal) == "diverged"
    gates = [a for a in result.attempts if a.change.startswith("the gate")]
    assert all(a.verdict != FAILING for a in gates[:-1]) and gates[-1].verdict == FAILING
    assert any(len(a.schedule.steps) < 11 for a in gates[:-1] if a.schedule is not None)


def test_a_finding_no_schedule_of_which_passes_the_gate_keeps_its_original() -> None:
    calls = [0]

    def third_passes(schedule: Schedule) -> str | None:
        calls[0] += 1
        return None if calls[0] % 3 == 0 else TRUTH(schedule)

    result = shrink(PADDED, third_passes, budget=60, gate=5)
    assert result.reproducible and not result.gated and result.minimal.steps == PADDED.steps
    assert "confirmed" not in result.minimal.origin
