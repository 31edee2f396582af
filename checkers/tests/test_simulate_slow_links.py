"""The model's slow links and late fetch responses (checkers.simulate.slow_links), on
crafted schedules: KAFKA-18723's race, and the arrivals a run's clock places."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from basics.protocol import Protocol
from checkers.model import Fate
from checkers.simulate import SimOptions, Simulator, simulate
from checkers.simulate.slow_links import (
    LATE_FOLLOWS,
    LATE_ISOLATED,
    LATE_REFILLED,
    LATE_TRUNCATED,
)
from runrecord.schedule import BrokerConfig, Cluster, Schedule, load_schedule
from runrecord.steps.base import QUORUM, Role
from runrecord.steps.elections import ElectPreferred
from runrecord.steps.links import Cut, ExpireSession, Heal, HoldBack, Slow
from runrecord.steps.processes import Kill, Pause, Restart, Resume
from runrecord.steps.waits import Wait
from runrecord.steps.writes import Produce

A, B, C = 1, 2, 3
FINDING = Path(__file__).resolve().parents[2] / "docs" / "findings" / "KAFKA-18723.json"


def test_a_slow_link_replicates_as_usual_and_is_lifted_by_a_heal() -> None:
    three = Cluster(mode="kraft", brokers=3, replication_factor=3, replicas=(B, A, C))
    sim = Simulator(three, Protocol.DIVERGING_EPOCH)
    sim.apply(Produce(2))
    assert sim.apply(Slow(B, C, 30)).targets == {"a": B, "b": C, "rate": 30}
    assert sim.apply(Slow(B, C, 30)).status == "skipped"  # slowed already
    sim.apply(Produce(3))
    assert sim.replicas[C].leo == 5 and sim.slow.slow_receivers() == {C}
    assert not sim.transactions.cannot_predict  # without a filler nothing comes late
    assert sim.linked(B, C)  # slow, not cut
    assert sim.apply(Heal(C, B)).status == "done"
    assert sim.slow.slow_receivers() == set()
    sim.apply(Slow(A, C, 10))
    assert sim.apply(Heal()).targets["links"] == ["1->3"]


def test_kafka_18723_the_follower_appends_its_old_leaders_new_epoch_before_the_fix() -> None:
    """docs/findings/KAFKA-18723.json: broker 3's response from broker 1, answered behind a
    700 KB filler, is read after broker 1 truncated and appended the new leader's batches
    at the same positions."""
    schedule = load_schedule(FINDING)
    for bad in ("3.9.0", "4.0.0", "3.8.1"):
        p = simulate(schedule, bad)
        assert (p.outcome, p.diverged_at, p.late_appends) == (Fate.DIVERGED, 5, 1), bad
        assert any("appends [15, 24] (epoch 2)" in e for e in p.events)
    for good in ("3.9.1", "4.0.1", "4.1.0", "4.3.1"):
        p = simulate(schedule, good)
        assert p.failure() is None and p.late_appends == 0, good
        assert any("skipping batch [15, 24] of leader epoch 2" in e for e in p.events)


def test_the_runs_clock_places_the_arrival() -> None:
    """The filler drains in 23 s. With the steps after the resume taking 1 s each the
    response arrives during the final wait, after the new writes: the race. With the
    resume's step taking 40 s it timed out first (30 s), and nothing late is appended."""
    schedule = load_schedule(FINDING)
    quick = tuple([1.0] * 15 + [30.0])
    p = simulate(schedule, "3.9.0", options=SimOptions(step_seconds=quick))
    assert p.failure() == "diverged" and p.clock_used and not p.unpredictable
    # The filler took 2 s: it was out before the election, and the batch as it was with it.
    fast = replace(schedule, steps=tuple(
        replace(s, filler=60) if isinstance(s, Produce) and s.filler else s
        for s in schedule.steps
    ))  # fmt: skip
    p = simulate(fast, "3.9.0", options=SimOptions(step_seconds=quick))
    assert p.failure() is None and p.late_appends == 0


def test_an_arrival_inside_a_step_that_changed_the_logs_is_not_predicted() -> None:
    schedule = load_schedule(FINDING)
    # 25 s on the first new write's step: the 23 s drain ends inside it, while broker 1
    # appends the batch the response may or may not hold.
    seconds = tuple([1.0] * 13 + [25.0] + [1.0] + [30.0])
    p = simulate(schedule, "3.9.0", options=SimOptions(step_seconds=seconds))
    assert any("arrived inside step 13" in why for why in p.unpredictable), p.unpredictable
    # Inside the election's step, which changes neither log, it arrives at the step's end:
    # before the truncation, as it was answered.
    seconds = tuple([1.0] * 11 + [25.0] + [1.0] * 3 + [30.0])
    p = simulate(schedule, "3.9.0", options=SimOptions(step_seconds=seconds))
    assert p.failure() is None and not p.unpredictable


def test_a_filler_to_a_fetching_follower_holds_its_fetches_back() -> None:
    """A follower that is fetching gets the filler alone; it fetches nothing else until
    the filler has drained, so an acks=all write meanwhile is not acknowledged."""
    three = Cluster(mode="kraft", brokers=3, replication_factor=2, replicas=(A, C))
    sim = Simulator(three, "3.9.0")
    sim.apply(Slow(A, C, 10))
    sim.apply(Produce(1, "1", filler=300))
    assert sim.awaiting(C)
    sim.apply(Produce(2))
    assert not sim.writes[-1].acknowledged and sim.replicas[C].leo == 1
    sim.apply(Pause(B))
    sim.apply(Resume(B))
    assert sim.apply(Heal(A, C)).status == "done" and not sim.awaiting(C)
    assert sim.finish().outcome is Fate.CONSISTENT


def test_a_zombie_leaders_late_response_fails_with_its_filler() -> None:
    """The race through a zombie fails: broker 1, cut off from the quorum and fenced, takes
    the writes and the filler, which no other broker holds; once it learns it follows
    broker 2 it truncates the filler's partition too, under the send, and the response
    fails ("has been truncated during write"), as it did on 3.9.0."""
    three = Cluster(mode="kraft", brokers=3, replication_factor=3, replicas=(A, B, C))
    steps = (
        Slow(A, C, 30),
        Cut(C, QUORUM),
        ExpireSession(A),
        Produce(10, "1", A),
        Pause(C),
        Produce(10, "1", A, filler=700),
        Resume(C),
        Heal(A, QUORUM),
        Produce(10, "1"),
        Produce(10, "1"),
        Wait(30),
    )
    p = simulate(Schedule(three, steps=steps), "3.9.0")
    assert p.failure() is None and p.late_slices == 1 and p.late_appends == 0
    assert any("truncated the filler only it held" in e for e in p.events)
    # Without the wait the final heal lifts the slow link first and lets the response
    # arrive before it heals the follower's cut from the quorum (faults.slow_link): the
    # same failure, not a race with the news of the new leader.
    p = simulate(Schedule(three, steps=steps[:-1]), "3.9.0")
    assert not p.unpredictable and p.late_appends == 0
    failed = next(e for e in p.events if "truncated the filler only it held" in e)
    assert p.events.index(failed) < p.events.index("broker 3 registers (new session)")


def test_a_slice_in_flight_climbs_towards_its_rewrite() -> None:
    """The near misses explore ranks by (suites.explore.drawing.guide.score): KAFKA-18723's form,
    step by step; and the final heal lets the response arrive before the follower's cut
    from the quorum heals, so no wait is needed at the end (faults.slow_link)."""
    replicas = Cluster(
        mode="kraft",
        brokers=3,
        replication_factor=3,
        replicas=(B, A, C),
        broker_config=BrokerConfig(replica_lag_time_max_ms=600000, session_timeout_ms=30000),
    )
    race = (
        Kill(B),
        Restart(Role.OUT_OF_SYNC),
        HoldBack(Role.FOLLOWER_IN_ISR),
        Produce(10, "1"),
        Slow(Role.LEADER, C, 30),
        Pause(C),
        Produce(10, "1", filler=700),
        Resume(C),
        Cut(C, QUORUM),
        ElectPreferred(),
        Heal(Role.FOLLOWER_IN_ISR, Role.LEADER),
        Produce(10, "1"),
        Produce(10, "1"),
    )
    stages = [simulate(Schedule(replicas, steps=race[:n]), "3.9.0") for n in (8, 9, 10, 12)]
    assert [p.late_stage for p in stages] == [
        0,
        LATE_ISOLATED,
        LATE_FOLLOWS,
        LATE_TRUNCATED,
    ]
    p = simulate(Schedule(replicas, steps=race), "3.9.0")
    assert p.late_stage == LATE_REFILLED and p.late_rewritten == p.late_appends == 1
    assert p.failure() == "diverged" and p.diverged_at == 0 and not p.unpredictable
    assert any("(as the slow link is lifted) holds what broker 1's log" in e for e in p.events)
