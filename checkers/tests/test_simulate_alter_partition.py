"""The model's held AlterPartition (the `hold-alter-partition` step): a leader whose ISR
changes do not reach the controller until the heal, on crafted schedules."""

from __future__ import annotations

from basics.protocol import Protocol
from checkers.simulate import simulate
from runrecord.schedule import Cluster, Schedule, TopicConfig, dumps, loads
from runrecord.schedule_roles import NO_ALTER_PARTITION
from runrecord.steps.links import Heal, HoldAlterPartition, HoldBack
from runrecord.steps.processes import Kill
from runrecord.steps.waits import Wait
from runrecord.steps.writes import Produce

A, B = 1, 2


def kraft(min_isr: int = 1) -> Cluster:
    return Cluster(mode="kraft", brokers=3, replication_factor=2, topic_config=TopicConfig(min_isr))


def test_a_held_shrink_keeps_the_lagging_follower_in_the_isr_until_it_lands_late() -> None:
    steps = (HoldAlterPartition(), HoldBack(), Produce(3), Wait(11), Heal(), Produce(1))
    p = simulate(Schedule(kraft(2), steps=steps), "4.3.1")
    assert [s.status for s in p.steps] == ["done"] * 6
    held = [e for e in p.events if "AlterPartition (remove 2) held" in e]
    assert held == ["step 3: broker 1's AlterPartition (remove 2) held"]  # one request
    assert not any("drops" in e for e in p.events)
    assert "step 2: write 0 not acknowledged (high watermark 0, ISR [1, 2])" in p.events
    # The heal: the request lands on an unchanged partition and is taken; the follower,
    # back, rejoins; the next write is acknowledged by both.
    heal = [e for e in p.events if e.startswith("step 4")]
    assert "step 4: broker 1's late AlterPartition (remove 2): ISR [1]" in heal
    assert "step 4: broker 2 caught up and rejoins the ISR [1, 2]" in heal
    assert "step 5: write 1 acknowledged (high watermark 4, ISR [1, 2])" in p.events


def test_a_late_request_on_a_partition_that_changed_is_rejected() -> None:
    steps = (HoldAlterPartition(), HoldBack(), Wait(11), Kill(B), Heal())
    p = simulate(Schedule(kraft(), steps=steps), "4.3.1")
    assert "step 4: broker 1's late AlterPartition (remove 2) rejected" in p.events, p.events


def test_a_held_expansion_waits_for_the_heal() -> None:
    steps = (HoldBack(), Wait(11), HoldAlterPartition(), Heal(B, A), Produce(2), Heal())
    p = simulate(Schedule(kraft(), steps=steps), "4.3.1")
    assert [s.status for s in p.steps] == ["done"] * 6
    assert any(e == "step 3: broker 1's AlterPartition (add 2) held" for e in p.events)
    assert "step 4: write 0 acknowledged (high watermark 2, ISR [1])" in p.events
    assert "step 5: broker 1's late AlterPartition (add 2): ISR [1, 2]" in p.events
    assert p.steps[5].targets == {"links": [], "released": [A]}


def test_a_held_broker_is_skipped_twice_and_a_broker_without_a_replica_never() -> None:
    steps = (HoldAlterPartition(), HoldAlterPartition(A), HoldAlterPartition(3))
    p = simulate(Schedule(kraft(), steps=steps), "4.3.1")
    assert [s.status for s in p.steps] == ["done", "skipped", "skipped"]
    assert p.steps[1].note == "broker 1's AlterPartition requests are already held"
    assert p.steps[2].note == "broker 3 holds no replica"


def test_no_alter_partition_before_2_7_in_zookeeper_mode() -> None:
    zk = Cluster(mode="zk", brokers=3, replication_factor=2, controller=3)
    p = simulate(Schedule(zk, steps=(HoldAlterPartition(),)), "2.6.3")
    assert (p.steps[0].status, p.steps[0].note) == ("skipped", NO_ALTER_PARTITION)
    assert simulate(Schedule(zk, steps=(HoldAlterPartition(),)), "2.7.0").steps[0].status == "done"
    assert (
        simulate(Schedule(zk, steps=(HoldAlterPartition(),)), Protocol.KIP_279).steps[0].status
        == "done"
    )


def test_the_step_loads_with_the_leader_by_default() -> None:
    text = (
        '{"format": 1, "cluster": {"mode": "kraft", "replication_factor": 2},'
        ' "steps": [{"kind": "hold-alter-partition"},'
        ' {"kind": "hold-alter-partition", "target": 2}]}'
    )
    schedule = loads(text)
    assert schedule.steps[0] == HoldAlterPartition()
    assert schedule.steps[1] == HoldAlterPartition(2)
    assert loads(dumps(schedule)) == schedule
