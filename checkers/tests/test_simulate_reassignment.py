"""The simulator's reassignments (KIP-455, KRaft): replicas added catch up and join the ISR
before the removed ones go, a removed leader gives way, and the epoch bumps only then."""

from __future__ import annotations

from checkers.model import Fate
from checkers.simulate import Simulator
from runrecord.schedule import Cluster
from runrecord.steps.base import Role
from runrecord.steps.links import Cut, Heal
from runrecord.steps.processes import Kill, Restart
from runrecord.steps.reassign import Reassign
from runrecord.steps.writes import Produce

FOUR = Cluster(mode="kraft", brokers=4, replication_factor=3, replicas=(1, 2, 3))


def sim(release: str = "3.9.2") -> Simulator:
    return Simulator(FOUR, release)


def test_an_added_replica_catches_up_and_the_reassignment_completes_without_a_bump() -> None:
    s = sim()
    s.apply(Produce(5))
    epoch = s.ctl.epoch
    record = s.apply(Reassign(add=Role.ANY_BROKER, remove=3))
    assert record.status == "done", record.note
    assert record.targets == {"remove": 3, "add": 4, "replicas": [1, 2, 4], "in_flight": False}
    assert s.assignment == [1, 2, 4] and sorted(s.ctl.isr) == [1, 2, 4]
    assert 3 not in s.replicas and s.replicas[4].leo == 5
    assert s.ctl.epoch == epoch + 1  # a replica removed: the leader epoch is bumped
    added = sim()
    added.apply(Reassign(add=4))
    assert added.assignment == [1, 2, 3, 4] and added.ctl.epoch == 0  # nothing removed
    p = s.finish()
    assert p.outcome is Fate.CONSISTENT


def test_a_removed_leader_gives_way_to_the_first_target_replica_in_the_isr() -> None:
    s = sim()
    s.apply(Produce(3))
    s.apply(Reassign(remove=Role.LEADER))
    assert s.assignment == [2, 3] and s.ctl.leader == 2 and s.ctl.epoch == 1
    s.apply(Produce(2))
    assert s.replicas[2].batches[-1].epoch == 1


def test_a_new_order_changes_only_the_preferred_replica() -> None:
    s = sim()
    s.apply(Reassign(prefer=3))
    assert s.assignment == [3, 1, 2] and s.ctl.leader == 1 and s.ctl.epoch == 0


def test_an_added_replica_cut_from_the_leader_leaves_the_reassignment_in_flight() -> None:
    s = sim()
    s.apply(Produce(3))
    s.apply(Cut(4, 1))
    record = s.apply(Reassign(add=4, remove=2))
    assert record.targets["in_flight"] is True
    assert s.assignment == [1, 3, 4, 2] and sorted(s.ctl.isr) == [1, 2, 3]
    assert s.apply(Reassign(prefer=3)).note == "a reassignment to [1, 3, 4] is in flight"
    s.apply(Heal())
    assert s.reassignments.reassignment is None and s.assignment == [1, 3, 4]


def test_what_completes_a_reassignment_depends_on_the_release() -> None:
    # Replica 2 stays in the target but is down, out of the ISR: from 3.8 every target
    # replica must be in the ISR (KAFKA-15665), from 4.3 only the added ones again
    # (KAFKA-19975), as before 3.8.
    outcomes = {}
    for release in ("3.7.1", "3.9.2", "4.3.1"):
        s = sim(release)
        s.apply(Kill(2))
        s.apply(Reassign(add=4, remove=3))
        outcomes[release] = s.reassignments.reassignment is None
    assert outcomes == {"3.7.1": True, "3.9.2": False, "4.3.1": True}
    s = sim("3.9.2")
    s.apply(Kill(2))
    s.apply(Reassign(add=4, remove=3))
    s.apply(Restart(2))
    assert s.reassignments.reassignment is None and s.assignment == [1, 2, 4]


def test_a_reassignment_keeps_two_replicas() -> None:
    two = Simulator(
        Cluster(mode="kraft", brokers=3, replication_factor=2, replicas=(1, 2)), "4.3.1"
    )
    record = two.apply(Reassign(remove=2))
    assert (record.status, record.note) == ("skipped", "a reassignment to [1] leaves one replica")
    assert two.apply(Reassign(add=3, remove=2)).status == "done"


def test_a_removal_keeps_an_isr_member() -> None:
    s = sim()
    s.apply(Kill(2))
    s.apply(Kill(3))
    record = s.apply(Reassign(remove=Role.LEADER))
    assert record.status == "skipped"
    assert record.note == "broker 1 is the ISR's last member [1]"
