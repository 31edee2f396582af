"""Role resolution: a step's target against the partition's state as it was recorded, the
rule the simulator and the real runner share."""

from __future__ import annotations

import pytest

from basics.protocol import RecoveryState
from checkers.simulate import Simulator
from checkers.simulate.state import SimOptions
from runrecord.schedule import Cluster
from runrecord.schedule_roles import Skip, View, candidates, pick
from runrecord.states import StateRecord
from runrecord.steps.base import QUORUM, Role


def recorded(leader: int, isr: list[int]) -> StateRecord:
    return StateRecord("t", 0, leader, 3, isr, RecoveryState.RECOVERED, 7, "zk")


def view(leader: int, isr: list[int], *, mode: str = "zk", controller: int | None = 3) -> View:
    return View.of_state(
        recorded(leader, isr),
        mode=mode,
        brokers=[1, 2, 3],
        assignment=[2, 1],
        controller=controller,
    )


def test_roles_on_a_recorded_state() -> None:
    v = view(2, [1, 2])
    assert candidates(Role.LEADER, v) == [2]
    assert candidates(Role.FOLLOWER_IN_ISR, v) == [1]
    assert candidates(Role.OUT_OF_SYNC, v) == []
    assert candidates(Role.CONTROLLER, v) == [3]
    assert candidates(Role.ANY_BROKER, v) == [1, 2, 3]
    assert candidates(2, v) == [2]
    assert candidates(QUORUM, v) == [QUORUM]


def test_an_offline_partition_has_no_leader_and_keeps_its_last_isr() -> None:
    v = view(-1, [2])
    assert v.leader is None
    assert candidates(Role.LEADER, v) == []
    assert candidates(Role.OUT_OF_SYNC, v) == [1]
    with pytest.raises(Skip) as skip:
        pick(Role.LEADER, v, lambda b: None, "kill")
    assert skip.value.observed == "no leader to kill"


def test_kraft_controller_is_the_quorum() -> None:
    v = view(2, [2], mode="kraft", controller=None)
    assert candidates(Role.CONTROLLER, v) == [QUORUM]


def test_pick_takes_the_lowest_eligible_and_says_why_none_fit() -> None:
    v = view(1, [1, 2])
    down = {1: "broker 1 is stopped", 2: None, 3: None}
    assert pick(Role.ANY_BROKER, v, down.get, "restart") == 2
    with pytest.raises(Skip) as skip:
        pick(Role.ANY_BROKER, v, lambda b: f"broker {b} is running", "restart")
    assert skip.value.observed == "broker 1 is running; broker 2 is running; broker 3 is running"


def test_the_simulator_resolves_through_the_same_rule() -> None:
    sim = Simulator(Cluster(replication_factor=2, replicas=(2, 1), controller=3), "1.1.1")
    # The coordinator, told nothing: the model's guess, the lowest running broker.
    assert sim.view() == View("zk", [1, 2, 3], [2, 1], 2, [2, 1], 3, 1)
    assert sim._candidates(Role.FOLLOWER_IN_ISR) == candidates(Role.FOLLOWER_IN_ISR, sim.view())


def test_the_coordinator_is_the_broker_a_run_found() -> None:
    view = View("kraft", [1, 2, 3], [2, 1], 2, [2, 1], coordinator=3)
    assert candidates(Role.COORDINATOR, view) == [3]
    assert candidates(Role.COORDINATOR, View("kraft", [1, 2, 3], [2, 1], 2, [2, 1])) == []
    cluster = Cluster(mode="kraft", replication_factor=2, replicas=(2, 1))
    told = Simulator(cluster, "4.3.1", options=SimOptions(coordinator_at=((0, 3),)))
    told._step = 0
    assert told.view().coordinator == 3
    told._step = 1  # not told for this step: the guess
    assert told.view().coordinator == 1
