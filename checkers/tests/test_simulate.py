"""The simulator against the scripted scenarios' known outcomes, fed as schedules, and its
mechanics one at a time on crafted schedules."""

from __future__ import annotations

import json

import pytest

from basics.protocol import Protocol
from basics.releases import Release
from checkers.model import Fate
from checkers.simulate import (
    SimOptions,
    SimulationError,
    Simulator,
    checkpoint_variants,
    simulate,
)
from runrecord.schedule import BrokerConfig, Cluster, Schedule, TopicConfig
from runrecord.steps.base import QUORUM, Role
from runrecord.steps.disks import FailDir, MoveDir
from runrecord.steps.elections import ElectPreferred, ElectUnclean
from runrecord.steps.links import Cut, ExpireSession, Heal, HoldBack
from runrecord.steps.processes import Kill, Outage, Pause, PowerLoss, Restart, Resume
from runrecord.steps.quorum import Quorum
from runrecord.steps.waits import Wait
from runrecord.steps.writes import Produce

A, B, C = 1, 2, 3
HW, KIP101, KIP279, DIVERGING = (
    Protocol.HIGH_WATERMARK,
    Protocol.KIP_101,
    Protocol.KIP_279,
    Protocol.DIVERGING_EPOCH,
)
EPOCHS = (KIP101, KIP279, DIVERGING)


def controller_apart(replicas=(B, A), **kwargs) -> Cluster:
    """suites.steps.controller_apart: A and B hold the partition, C is the controller."""
    return Cluster(
        mode="zk", brokers=3, replication_factor=2, replicas=replicas, controller=C, **kwargs
    )


def ids(writes) -> list[int]:
    return [w.id for w in writes]


# --------------------------------------------------------------------------------------
# KIP-101 scenario 1 (suites/scenarios/kip_101.py): B leads; m1, then a high watermark
# checkpoint on A, then m2; A dies, restarts cut off from B, B dies, A is elected.

KIP101_S1 = Schedule(
    controller_apart(topic_config=TopicConfig(1, True)),
    steps=(
        Produce(1),  # m1
        Wait(5),  # A's checkpoint records m1 as committed
        Produce(1),  # m2, committed; A fetched it but its checkpoint still says 1
        Kill(A),
        Cut(A, B),
        Restart(A),  # A follows B without reaching it
        Kill(B),  # A, the only replica left, is elected (uncleanly: it left the ISR)
        Heal(),
        Restart(B),
    ),
)


def test_kip101_scenario1_before_0_11_loses_acknowledged_m2() -> None:
    p = simulate(KIP101_S1, HW)
    assert ids(p.lost_acknowledged) == [1]  # m2
    assert p.outcome is Fate.CONSISTENT and p.logs == {A: [(0, 0, -1)], B: [(0, 0, -1)]}
    assert (
        "step 5: broker 1: follower truncated to its high watermark 1 (pre-KIP-101 rules); "
        "follower truncated [1, 1] (log end offset now 1)" in p.events
    )
    assert p.unclean_elections == 1 and p.failure() is None  # loss excused by the election


@pytest.mark.parametrize("protocol", EPOCHS)
def test_kip101_scenario1_with_leader_epochs_keeps_m2(protocol: Protocol) -> None:
    p = simulate(KIP101_S1, protocol)
    assert p.lost_acknowledged == [] and p.outcome is Fate.CONSISTENT
    assert [s[:2] for s in p.logs[A]] == [(0, 0), (1, 1)] and p.logs[A] == p.logs[B]


def test_a_crash_after_a_checkpoint_is_a_variant_that_keeps_m2() -> None:
    """Had A's high watermark checkpoint caught up before its crash (step 3), it would
    truncate nothing on restart and keep m2: the outcome Kafka reaches when the steps
    before the crash outrun replica.high.watermark.checkpoint.interval.ms."""
    variants = dict(checkpoint_variants(KIP101_S1, HW))
    assert sorted(variants) == [(3,), (3, 6), (6,)]  # the SIGKILLs, alone and together
    kept = variants[(3,)]
    assert kept.lost_acknowledged == [] and kept.logs[A] == [(0, 0, -1), (1, 1, -1)]
    assert "step 5: broker 1: follower truncated to its high watermark 2" in " ".join(kept.events)
    # B's crash does not change what A truncates: m2 is lost as in the model's own run.
    assert ids(variants[(6,)].lost_acknowledged) == [1]
    assert simulate(KIP101_S1, HW, options=SimOptions(checkpoint_before=frozenset({3}))) == kept


def test_a_checkpoint_read_on_disk_after_a_crash_is_taken_and_not_varied() -> None:
    """A run that read A's replication-offset-checkpoint after its crash at step 3 tells
    the model: caught up (2), A keeps m2; as the model had it (1), m2 is lost. Either way
    that crash is no longer a variant, and a told checkpoint wins over `checkpoint_before`."""
    caught_up = SimOptions(hw_checkpoint_at=((3, A, 2),))
    kept = simulate(KIP101_S1, HW, options=caught_up)
    assert kept.lost_acknowledged == [] and kept.logs[A] == [(0, 0, -1), (1, 1, -1)]
    behind = SimOptions(hw_checkpoint_at=((3, A, 1),), checkpoint_before=frozenset({3}))
    assert ids(simulate(KIP101_S1, HW, options=behind).lost_acknowledged) == [1]
    # Only B's crash (step 6) is left to vary.
    assert [c for c, _ in checkpoint_variants(KIP101_S1, HW, options=caught_up)] == [(6,)]
    # A checkpoint told for another broker, or another step, changes nothing here.
    for other in (((3, B, 2),), ((6, A, 2),)):
        p = simulate(KIP101_S1, HW, options=SimOptions(hw_checkpoint_at=other))
        assert ids(p.lost_acknowledged) == [1]


# --------------------------------------------------------------------------------------
# KIP-101 scenario 2: three committed messages; a power outage costs A one and B two; B
# comes back first, leads and writes m4 at offset 1; then A.

KIP101_S2 = Schedule(
    controller_apart(),
    steps=(
        Produce(1),
        Produce(1),
        Produce(1),
        Wait(5),  # both checkpoints record all three as committed
        PowerLoss(A, lose=1),
        PowerLoss(B, lose=2),
        Restart(B),
        Produce(1, "1"),  # m4
        Restart(A),
    ),
)


def test_kip101_scenario2_before_0_11_diverges() -> None:
    p = simulate(KIP101_S2, HW)
    assert p.outcome is Fate.DIVERGED and p.diverged_at == 1 and p.below_high_watermark
    assert p.failure() == "diverged" and p.power_losses == 2
    versions = {tuple(v.replicas): v.batch.span for v in p.verdict.versions}
    assert versions == {(A,): "[1, 1]", (B,): "[1, 1]"}


@pytest.mark.parametrize("protocol", EPOCHS)
def test_kip101_scenario2_with_leader_epochs_converges(protocol: Protocol) -> None:
    p = simulate(KIP101_S2, protocol)
    assert p.outcome is Fate.CONSISTENT
    assert p.logs[A] == p.logs[B] and len(p.logs[A]) == 2
    # m2 and m3 went with the power; KIP-966's rules judge that, not this invariant.
    assert ids(p.lost_acknowledged) == [1, 2] and p.failure() is None


# --------------------------------------------------------------------------------------
# KIP-279 scenario 1 (KAFKA-6361, suites/scenarios/kip_279_s1.py), through the KRaft path of
# the scripted scenario: B, the preferred replica, steps down and comes back so that A leads.


def kip279_s1(n: int) -> Schedule:
    return Schedule(
        controller_apart(
            broker_config=BrokerConfig(replica_lag_time_max_ms=600000, session_timeout_ms=60000),
            node_config={B: BrokerConfig(session_timeout_ms=6000)},
        ),
        steps=(
            Kill(B, "SIGTERM"),
            Restart(B),
            Produce(11),  # [0, 10] on both, epoch 1
            HoldBack(B),
            Produce(10, "1"),  # [11, 20] on A only
            ElectPreferred(),  # B leads epoch 2; A cannot reach it, so it does not truncate
            Produce(n - 10, "1"),  # [11, n] on B
            ExpireSession(B),  # A leads epoch 3
            Produce(10, "1"),  # [21, 30] on A
            Heal(),  # B follows A and asks for the end of epoch 2
        ),
    )


A_FINAL = [(0, 10, 1), (11, 20, 1), (21, 30, 3)]


def test_kip279_s1_short_follower_stuck_before_2_0() -> None:
    p = simulate(kip279_s1(15), KIP101)
    assert p.outcome is Fate.STUCK and p.failure() == "stuck"
    assert p.stuck == {
        B: "out-of-order offsets: batch [11, 20] from broker 1 starts below its log end offset 16"
    }
    assert p.logs == {A: A_FINAL, B: [(0, 10, 1), (11, 15, 2)]}
    assert p.isr == [A]  # B never gets back in


def test_kip279_s1_equal_silent_divergence_before_2_0() -> None:
    p = simulate(kip279_s1(20), KIP101)
    assert p.outcome is Fate.DIVERGED and p.diverged_at == 11 and p.below_high_watermark
    assert p.logs[B] == [(0, 10, 1), (11, 20, 2), (21, 30, 3)] and p.logs[A] == A_FINAL
    assert p.isr == [B, A]  # nobody notices: B is back in the ISR
    assert (
        "step 9: broker 2: follower asked for epoch 2; leader answered offset 21 (KIP-101 "
        "rules); follower kept [11, 20]" in p.events
    )


def test_kip279_s1_long_departs_from_the_kip_before_2_0() -> None:
    # KIP-279 says B truncates the whole batch [11, 25] and refetches from 11. Kafka 1.1.1
    # drops the batch but sets its log end offset to 21 (MID_BATCH): 11-20 are missing.
    p = simulate(kip279_s1(25), KIP101)
    assert p.outcome is Fate.DIVERGED and p.diverged_at == 11
    assert p.logs[B] == [(0, 10, 1), (21, 30, 3)]
    assert p.verdict.lacking == [B]
    assert any("sets the log end offset to 21 (Kafka before 2.0)" in e for e in p.events)


@pytest.mark.parametrize("n", [15, 20, 25])
@pytest.mark.parametrize("protocol", [KIP279, DIVERGING])
def test_kip279_s1_converges_from_2_0(n: int, protocol: Protocol) -> None:
    p = simulate(kip279_s1(n), protocol)
    assert p.outcome is Fate.CONSISTENT and p.failure() is None
    assert p.logs == {A: A_FINAL, B: A_FINAL}
    # B's acks=1 batch [11, n] was written by a leader that lost its session: gone.
    assert ids(p.lost_acks1) == [2] and p.lost_acknowledged == []


# --------------------------------------------------------------------------------------
# KIP-279 scenario 3 = KIP-101 appendix (a): alternating unclean failovers.

KIP279_S3 = Schedule(
    controller_apart(replicas=(A, B), topic_config=TopicConfig(1, True)),
    steps=(
        Kill(B),
        Produce(1, "1"),  # A:0
        Kill(A),
        Restart(B),  # elected uncleanly
        Produce(1, "1"),  # B:0
        Kill(B),
        Restart(A),
        Produce(1, "1"),  # A:1
        Kill(A),
        Restart(B),
        Produce(1, "1"),  # B:1
        Restart(A),  # A follows B
    ),
)


def test_kip279_s3_diverges_at_offset_0_under_kip101() -> None:
    p = simulate(KIP279_S3, KIP101)
    assert p.outcome is Fate.DIVERGED and p.diverged_at == 0 and p.below_high_watermark
    assert p.unclean_elections == 3
    # Epochs: 1 drops B from the ISR; each Kill(A|B) of the last ISR member takes the
    # partition offline in an epoch of its own (2, 4, 6) before the next election (3, 5, 7).
    assert p.logs == {A: [(0, 0, 1), (1, 1, 7)], B: [(0, 0, 3), (1, 1, 7)]}


@pytest.mark.parametrize("protocol", [KIP279, DIVERGING])
def test_kip279_s3_converges_from_2_0(protocol: Protocol) -> None:
    p = simulate(KIP279_S3, protocol)
    assert p.outcome is Fate.CONSISTENT
    assert p.logs[A] == p.logs[B] == [(0, 0, 3), (1, 1, 7)]
    # Unclean elections lose acknowledged acks=1 writes (A:0, A:1) by design.
    assert ids(p.lost_acks1) == [0, 2]


def test_kip279_s3_two_rounds_then_the_high_watermark() -> None:
    p = simulate(KIP279_S3, KIP279)
    last = [e for e in p.events if e.startswith("step 11: broker 1: follower")]
    assert last == [
        "step 11: broker 1: follower asked for epoch 5; leader answered epoch 3, offset 1 "
        "(KIP-279 rules); follower truncated [1, 1] (log end offset now 1)",
        "step 11: broker 1: follower asked for epoch 1; leader answered unknown offset "
        "(KIP-279 rules); follower fell back to its high watermark 0, truncated [0, 0] (log "
        "end offset now 0)",
    ]


# --------------------------------------------------------------------------------------
# Mechanics

TWO = Cluster(brokers=3, replication_factor=2, controller=3)


def test_a_held_back_follower_keeps_acks_all_unacknowledged_while_it_stays_in_the_isr() -> None:
    long_lag = Cluster(
        brokers=3,
        replication_factor=2,
        controller=3,
        broker_config=BrokerConfig(replica_lag_time_max_ms=600000),
    )
    p = simulate(
        Schedule(long_lag, steps=(HoldBack(), Produce(3), Wait(60), Produce(1, "1"))), KIP101
    )
    done = [s.status for s in p.steps]
    assert done == ["done"] * 4
    assert [e for e in p.events if "write 0" in e] == [
        "step 1: broker 1 appends 0..2 in epoch 0 (write 0, acks=all)",
        "step 1: write 0 not acknowledged (high watermark 0, ISR [1, 2])",
    ]
    assert not any("drops" in e for e in p.events)  # 60 s < replica.lag.time.max.ms


def test_a_lagging_follower_leaves_the_isr_and_acks_all_is_refused_below_min_isr() -> None:
    strict = Cluster(brokers=3, replication_factor=2, controller=3, topic_config=TopicConfig(2))
    p = simulate(Schedule(strict, steps=(HoldBack(), Produce(3), Wait(11), Produce(2))), KIP101)
    # 8 s of the first write timing out, then the 11 s wait.
    assert "step 2: leader 1 drops broker 2 from the ISR after 19 s behind (ISR [1])" in p.events
    refused = p.steps[3]
    assert refused.status == "rejected"
    assert refused.note.startswith("NOT_ENOUGH_REPLICAS: ISR [1] is below min.insync.replicas=2")
    assert p.logs[1] == [(0, 2, 0)]  # nothing written by the refused produce


def test_skipped_steps_say_what_was_observed_and_change_nothing() -> None:
    steps = (
        Restart(),
        ElectPreferred(),
        Resume(),
        Heal(),
        Kill(1),
        Kill(2),
        Produce(1),
        Heal(1, 2),
        HoldBack(),
    )
    p = simulate(Schedule(TWO, steps=steps), KIP101)
    assert [(s.status, s.note) for s in p.steps] == [
        ("skipped", "broker 1 is running; broker 2 is running; broker 3 is running"),
        ("skipped", "preferred replica 1 already leads"),
        ("skipped", "broker 1 is running; broker 2 is running; broker 3 is running"),
        ("skipped", "nothing is cut"),
        ("done", ""),
        ("done", ""),
        ("skipped", "the partition has no leader (offline)"),
        ("skipped", "no cut between 1 and 2"),
        ("skipped", "no live leader to hold a follower back from"),
    ]
    # Skips cost nothing: without them the prediction is the same.
    q = simulate(Schedule(TWO, steps=(Kill(1), Kill(2))), KIP101)
    assert (q.logs, q.leader, q.leader_epoch) == (p.logs, p.leader, p.leader_epoch)


def test_roles_resolve_when_the_step_comes_lowest_eligible_broker_first() -> None:
    three = Cluster(brokers=4, replication_factor=3, replicas=(3, 1, 2), controller=4)
    sim = Simulator(three, KIP101)
    assert sim.apply(Kill(Role.FOLLOWER_IN_ISR)).targets == {"broker": 1}
    assert sim.apply(Kill(Role.FOLLOWER_IN_ISR)).targets == {"broker": 2}
    assert sim.apply(Restart(Role.OUT_OF_SYNC)).targets == {"broker": 1}
    assert sim.apply(Kill(Role.CONTROLLER)).targets == {"broker": 4}
    assert sim.apply(Pause(Role.ANY_BROKER)).targets == {"broker": 1}
    assert sim.apply(Kill(Role.ANY_BROKER)).targets == {"broker": 3}  # 1 is paused, 2 stopped


def test_a_paused_leader_loses_its_session_and_comes_back_as_a_follower() -> None:
    three = Cluster(brokers=3, replication_factor=3)
    steps = (Produce(5), Pause(Role.LEADER), Wait(7), Produce(2), Resume(1), Produce(1))
    p = simulate(Schedule(three, steps=steps), KIP101)
    assert "step 2: broker 1 loses its session (paused, 7 s)" in p.events
    assert p.steps[3].targets == {"to": 2}
    assert "step 4: broker 1 follows broker 2 in epoch 1" in p.events
    assert p.outcome is Fate.CONSISTENT and p.isr == [1, 2, 3]


def test_a_short_pause_keeps_the_session() -> None:
    p = simulate(Schedule(TWO, steps=(Pause(1), Wait(5), Resume(1), Produce(1))), KIP101)
    assert p.leader == 1 and p.leader_epoch == 0 and p.steps[3].targets == {"to": 1}


def test_a_zombie_leader_acknowledges_acks_1_writes_that_are_then_lost() -> None:
    # KIP-359: produce requests carry no leader epoch, so a deposed leader that does not
    # know it was deposed keeps acknowledging acks=1; acks=all it cannot complete.
    steps = (
        Produce(2),
        ExpireSession(Role.LEADER),
        Produce(3, "1", to=1),
        Produce(1, "all", to=1),
        Produce(2),
    )
    p = simulate(Schedule(TWO, steps=steps), KIP101)
    assert p.steps[2].targets == {"to": 1} and p.steps[4].targets == {"to": 2}
    assert ids(p.lost_acks1) == [1] and p.lost_acknowledged == []
    assert p.outcome is Fate.CONSISTENT and p.failure() is None


def test_power_loss_keeps_what_was_flushed() -> None:
    # SIGTERM flushes; the restart's log recovery is the new recovery point; what came
    # after is lost with the power.
    steps = (Produce(2), Kill(2, "SIGTERM"), Restart(2), Produce(3), PowerLoss(2), Restart(2))
    p = simulate(Schedule(TWO, steps=steps), KIP101)
    assert "step 4: broker 2 loses power; unflushed [2, 4] gone" in p.events
    assert p.outcome is Fate.CONSISTENT and p.logs[2] == p.logs[1]  # it refetched [2, 4]


def test_a_restart_recovers_its_log_but_checkpoints_the_recovery_point_later() -> None:
    # Broker 2 crashes and restarts with [0, 1] and [2, 4] recovered; its
    # recovery-point-offset-checkpoint still says 0 until the periodic checkpoint (60 s).
    crash = (Produce(2), Produce(3), Kill(2), Restart(2))
    p = simulate(Schedule(TWO, steps=(*crash, PowerLoss(2))), KIP101)
    assert "step 4: broker 2 loses power; unflushed [0, 1], [2, 4] gone" in p.events
    p = simulate(Schedule(TWO, steps=(*crash, Wait(60), PowerLoss(2))), KIP101)
    assert "step 5: broker 2 loses power; unflushed nothing gone" in p.events


def test_flush_messages_moves_the_flush_point() -> None:
    flushing = Cluster(brokers=3, replication_factor=2, topic_config=TopicConfig(flush_messages=3))
    steps = (Produce(2), Produce(2), Produce(1), PowerLoss(1))
    p = simulate(Schedule(flushing, steps=steps), KIP101)
    # Flushed after the second batch (4 messages >= 3), not after the third (1 message).
    assert "step 3: broker 1 loses power; unflushed [4, 4] gone" in p.events


def test_power_loss_of_every_isr_member_halts_the_follower_before_2_0() -> None:
    # The last ISR member comes back empty and leads; the follower's log is longer, and
    # with unclean elections disabled Kafka before 2.0 halts rather than truncate it
    # (ReplicaFetcherThread.handleOffsetOutOfRange): the partition is stuck.
    steps = (
        Produce(2),
        Kill(2, "SIGTERM"),
        Restart(2),
        Produce(3, "1"),
        PowerLoss(2),
        PowerLoss(1),
    )
    p = simulate(Schedule(TWO, steps=steps), KIP101)
    assert p.outcome is Fate.STUCK and p.stuck[2].startswith("halted: log end offset 2")
    assert p.power_losses == 2 and ids(p.lost_acknowledged) == [0]


def test_an_outage_cuts_every_running_broker_and_keeps_what_each_was_told() -> None:
    every = TopicConfig(min_insync_replicas=2, flush_messages=1)
    three = Cluster(brokers=3, replication_factor=3, topic_config=every)
    steps = (Produce(3), Outage(), Restart(1), Restart(2), Restart(3))
    p = simulate(Schedule(three, steps=steps), KIP279)
    # flush.messages=1: every replica flushed each write, so the model loses nothing.
    assert p.steps[1].targets == {"brokers": [1, 2, 3], "lost_batches": 0}
    assert p.power_losses == 3 and p.outcome is Fate.CONSISTENT and p.lost_acknowledged == []
    # The disks decide what a filesystem model keeps: told each replica ended empty (a new
    # partition's directory gone), the model loses the acknowledged writes with them.
    told = SimOptions(kept_after_power_loss=((1, 1, 0), (1, 2, 0), (1, 3, 0)))
    p = simulate(Schedule(three, steps=steps), KIP279, options=told)
    assert "step 1: broker 3 loses power; unflushed [0, 2] gone" in p.events
    assert ids(p.lost_acknowledged) == [0]  # the one batch, offsets 0 to 2
    # A paused broker cannot be frozen with the others; with none running nothing is cut.
    paused = simulate(Schedule(three, steps=(Produce(1), Pause(2), Outage())), KIP279)
    assert (paused.steps[2].status, paused.steps[2].note) == ("skipped", "broker 2 is paused")
    later = simulate(Schedule(three, steps=(Outage(), Outage())), KIP279)
    assert (later.steps[1].status, later.steps[1].note) == ("skipped", "no broker is running")


def test_sigterm_moves_leadership_before_the_leader_stops() -> None:
    p = simulate(Schedule(TWO, steps=(Produce(1), Kill(1, "SIGTERM"), Produce(1))), KIP101)
    assert "step 1: controlled shutdown: broker 2 leads in epoch 1" in p.events
    assert p.steps[2].targets == {"to": 2} and p.lost_acknowledged == []


def test_the_zookeeper_controller_moves_when_its_broker_dies() -> None:
    p = simulate(Schedule(TWO, steps=(Kill(Role.CONTROLLER), Kill(Role.LEADER))), KIP101)
    assert "step 0: broker 1 becomes the controller" in p.events
    assert "step 1: broker 2 becomes the controller" in p.events
    assert p.leader == 2 and p.outcome is Fate.CONSISTENT


def test_a_zookeeper_controller_that_dies_stays_in_the_isr_its_successor_inherits() -> None:
    # The successor never sees broker 3 fail (it is absent from /brokers/ids when it takes
    # over), so only the leader's lag check, here 10 minutes away, could drop it.
    long_lag = Cluster(
        brokers=3,
        replication_factor=2,
        replicas=(A, C),
        controller=C,
        broker_config=BrokerConfig(replica_lag_time_max_ms=600000),
    )
    p = simulate(Schedule(long_lag, steps=(Produce(1), Kill(C), Wait(30))), KIP101)
    assert "step 1: broker 1 becomes the controller" in p.events
    assert not [e for e in p.events if "removes failed broker" in e]
    assert p.isr == [A, C] and p.leader == A


def test_a_broker_cut_from_the_controller_keeps_its_old_view() -> None:
    # Broker 2 restarts but cannot hear from the controller (3): no LeaderAndIsr, so it
    # neither follows nor fetches until healed.
    steps = (Produce(2), Cut(2, Role.CONTROLLER), Kill(2), Restart(2), Produce(1))
    sim = Simulator(TWO, KIP101)
    for step in steps:
        sim.apply(step)
    assert sim.replicas[2].role is None and sim.replicas[2].leo == 2
    assert simulate(Schedule(TWO, steps=steps), KIP101).logs[2] == [(0, 1, 0), (2, 2, 1)]


def test_unclean_elections_rf3() -> None:
    three = Cluster(
        brokers=4,
        replication_factor=3,
        controller=4,
        topic_config=TopicConfig(1, True),
    )
    steps = (
        HoldBack(2),
        HoldBack(3),
        Wait(11),
        Produce(5, "1"),
        Kill(1),
        ElectUnclean(),
        Produce(2),
    )
    p = simulate(Schedule(three, steps=steps), KIP101)
    assert "step 4: controller elects out-of-sync broker 2 (unclean, epoch 1)" in p.events
    assert p.steps[5].status == "skipped"  # the controller already did it
    assert p.unclean_elections == 1 and ids(p.lost_acks1) == [0]
    assert p.outcome is Fate.CONSISTENT and p.logs[1] == p.logs[2] == p.logs[3]


def test_unclean_election_by_step_when_the_last_isr_member_is_down() -> None:
    clean_then = Cluster(brokers=3, replication_factor=2, topic_config=TopicConfig(1, True))
    sim = Simulator(clean_then, KIP101)
    sim.apply(Kill(2))  # out of the ISR
    sim.apply(Produce(1, "1"))
    sim.apply(Kill(1))  # offline: broker 2 is stopped, nothing to elect
    sim.apply(Restart(2))  # ... and now the controller elects it, uncleanly
    assert sim.ctl.leader == 2 and sim.unclean_elections == 1
    assert sim.apply(ElectUnclean(2)).status == "skipped"


def test_diverging_epoch_fetches_are_fenced_by_epoch() -> None:
    # From 2.7 a fetch carries the follower's leader epoch (KIP-320): a follower that missed
    # an epoch bump (here the controller's, dropping broker 3 from the ISR) cannot fetch.
    three = Cluster(brokers=4, replication_factor=3, controller=4)
    steps = (Cut(2, Role.CONTROLLER), Kill(3), Produce(1, "1"))
    for protocol, fetched in ((DIVERGING, 0), (KIP279, 1)):
        sim = Simulator(three, protocol)
        for step in steps:
            sim.apply(step)
        assert (sim.replicas[1].epoch, sim.replicas[2].epoch) == (1, 0)
        assert sim.replicas[2].leo == fetched, protocol


def test_the_prediction_is_deterministic_and_serialisable() -> None:
    for protocol in Protocol:
        first = simulate(kip279_s1(20), protocol).to_dict()
        assert simulate(kip279_s1(20), protocol).to_dict() == first
        assert json.loads(json.dumps(first)) == first


def test_protocols_by_release() -> None:
    assert [Release(v).protocol for v in ("0.10.2.2", "1.1.1", "2.0.1", "2.6.3", "2.7.0")] == [
        HW,
        KIP101,
        KIP279,
        KIP279,
        DIVERGING,
    ]


def test_a_release_version_stands_for_its_rules() -> None:
    assert Simulator(TWO, "1.1.1").protocol is KIP101
    assert simulate(kip279_s1(20), "2.0.1").to_dict() == simulate(kip279_s1(20), KIP279).to_dict()


def test_epoch_on_election_option() -> None:
    # Before KAFKA-7415 (2.1) a leader wrote its epoch with its first append only.
    sim = Simulator(TWO, KIP279, SimOptions(epoch_on_election=False))
    sim.apply(Kill(1, "SIGTERM"))
    assert sim.replicas[2].epochs == []
    sim = Simulator(TWO, KIP279)
    sim.apply(Kill(1, "SIGTERM"))
    assert sim.replicas[2].epochs == [(1, 0)]


def test_replication_factors_outside_the_model() -> None:
    with pytest.raises(SimulationError, match="replication factors 2 and 3, not 1"):
        Simulator(Cluster(replication_factor=1), KIP101)


def test_quorum_cut_without_waiting_expires_as_time_passes() -> None:
    p = simulate(Schedule(TWO, steps=(Cut(1, QUORUM), Wait(3), Wait(3), Produce(1))), KIP101)
    assert "step 2: broker 1 loses its session (running, 6 s)" in p.events
    assert p.steps[3].targets == {"to": 2}


def test_the_runs_clock_runs_a_cut_off_brokers_session_out() -> None:
    # Seen on 4.4.0: the cut took 3.3 s and the wait 10.2 s on the brokers, past the 6 s
    # session, and the controller fenced the leader; the model's own 5 s did not.
    kraft = Cluster(
        mode="kraft",
        brokers=3,
        replication_factor=2,
        broker_config=BrokerConfig(session_timeout_ms=6000),
    )
    steps = (Cut(1, QUORUM), Wait(5), Produce(1))
    own = simulate(Schedule(kraft, steps=steps), "4.4.0")
    assert own.steps[2].targets == {"to": 1} and not own.clock_used
    clocked = simulate(
        Schedule(kraft, steps=steps), "4.4.0", options=SimOptions(step_seconds=(3.3, 10.2, 1.0))
    )
    assert clocked.clock_used  # the cut's 3.3 s ran on through the wait
    assert "step 1: broker 1 is fenced (running, 8.3 s)" in clocked.events
    assert clocked.steps[2].targets == {"to": 2}
    # Time the clock adds at a step's end that runs a session out is said before it.
    late = simulate(
        Schedule(kraft, steps=steps), "4.4.0", options=SimOptions(step_seconds=(0.5, 9.0, 1.0))
    )
    at = late.events.index(
        "step 2: the run's clock: step 1 took 9.0 s on the brokers, 4.0 s more than the "
        "model's own time for it"
    )
    assert late.events[at + 1] == "step 2: broker 1 is fenced (running, 9.5 s)"
    # A cut that spent most of its step setting up its rules: the session runs from when
    # it took effect (SimOptions.step_lead), and expires in the wait after the next step.
    slow_cut = SimOptions(step_seconds=(8.0, 1.2, 11.0), step_lead=(7.7, 0.0, 0.0))
    steps2 = (Cut(1, QUORUM), Produce(1), Wait(11))
    p = simulate(Schedule(kraft, steps=steps2), "4.4.0", options=slow_cut)
    assert p.steps[1].targets == {"to": 1}
    assert any(e.startswith("step 2: broker 1 is fenced") for e in p.events)
    whole = SimOptions(step_seconds=(8.0, 1.2, 11.0))
    p = simulate(Schedule(kraft, steps=steps2), "4.4.0", options=whole)
    assert p.steps[1].targets.get("to") != 1  # fenced before the write, as if cut at once
    # A clock that leaves the session short of its timeout changes nothing.
    same = simulate(
        Schedule(kraft, steps=steps), "4.4.0", options=SimOptions(step_seconds=(0.1, 5.0, 0.5))
    )
    assert same.to_dict() == own.to_dict()


def test_a_follower_without_a_session_that_still_fetches() -> None:
    # ZooKeeper mode: the controller drops it from the ISR once; its leader, still served
    # by its fetches, adds it straight back (faults/session.py). KRaft keeps a fenced
    # broker out of the ISR (KIP-841).
    for mode, isr in (("zk", [1, 2]), ("kraft", [1])):
        cluster = Cluster(
            mode=mode, brokers=3, replication_factor=2, controller=3 if mode == "zk" else None
        )
        sim = Simulator(cluster, KIP279)
        record = sim.apply(ExpireSession(2))
        assert sim.ctl.isr == isr, mode
        assert "controller removes failed broker 2 from the ISR [1]" in " ".join(record.events)


def test_near_misses_for_ranking() -> None:
    p = simulate(kip279_s1(20), KIP101)
    # The preferred election left A, cut off, holding [11, 20] that B lacked; B's write
    # made the two ISR members differ; A's re-election put the difference in front of B.
    assert (p.risky_elections, p.max_isr_divergence, p.divergent_failovers) == (1, 1, 1)
    assert p.isr_gap and p.clean_elections == 3
    quiet = simulate(Schedule(TWO, steps=(Produce(3), Kill(1), Restart(1))), KIP101)
    assert (quiet.risky_elections, quiet.max_isr_divergence, quiet.divergent_failovers) == (0, 0, 0)
    assert not quiet.isr_gap and quiet.clean_elections == 1


def test_the_model_takes_the_controller_the_brokers_elected() -> None:
    """Who wins a controller election is a race the model cannot call: by default the
    lowest registered broker takes over, unless a run on real brokers saw the winner; and a
    controller the brokers moved while the model's kept its session (before 2.4 an unclean
    election deletes /controller) is followed once the step is done."""
    schedule = Schedule(controller_apart(), steps=(ExpireSession(C), Produce(1)))
    default = Simulator(schedule.cluster, KIP101)
    for step in schedule.steps:
        default.apply(step)
    assert default.controller_id == A
    seen = Simulator(schedule.cluster, KIP101, SimOptions(controller_after=((0, B), (1, A))))
    record = seen.apply(schedule.steps[0])
    assert "step 0: broker 2 becomes the controller (as on the brokers)" in record.events
    assert seen.controller_id == B
    record = seen.apply(schedule.steps[1])
    assert seen.controller_id == A
    assert "step 1: broker 1 becomes the controller (as on the brokers)" in record.events


def test_a_leader_shut_down_before_0_11_truncates_as_it_hands_over() -> None:
    """SIGTERM: the controller's LeaderAndIsr reaches the leader shutting down too, and
    before KIP-101 it truncates to its high watermark as it becomes a follower (seen on
    0.10.2.2: its unreplicated tail was gone before it restarted). From 0.11 a follower
    truncates from its fetcher, which stops with the broker."""
    steps = (HoldBack(A), Produce(3, "1"), Kill(B, "SIGTERM"))
    schedule = Schedule(controller_apart(), steps=steps)
    for protocol, leo in ((HW, 0), (KIP101, 3)):
        sim = Simulator(schedule.cluster, protocol)
        shutdown = [sim.apply(step) for step in steps][-1]
        assert sim.replicas[B].leo == leo, protocol
        handed = "step 2: broker 2 follows broker 1 in epoch 1" in shutdown.events
        assert handed == (protocol is HW)


def test_a_new_controller_leaves_brokers_lost_before_it_in_the_isr() -> None:
    """A follower frozen as the controller dies loses its session with no controller to
    act on it; the successor starts from the live brokers and never takes it out of the
    ISR (seen on 1.1.1: ISR [1, 2, 3] with broker 2 frozen and broker 3 dead)."""
    steps = (Pause(A), Kill(C))
    sim = Simulator(controller_apart(), KIP101)
    for step in steps:
        sim.apply(step)
    assert sim.controller_id == B and sorted(sim.ctl.isr) == [A, B]


def test_a_write_timing_out_lets_a_cut_off_leader_lose_its_session() -> None:
    """An acks=all write the ISR cannot complete takes the producer's request timeout,
    and a leader cut off from the quorum 6 s before loses its session meanwhile (seen on
    1.1.1: the controller had moved leadership by the time the write timed out)."""
    steps = (HoldBack(A), Cut(B, QUORUM), Produce(1))
    p = simulate(Schedule(controller_apart(), steps=steps), KIP101)
    assert "step 2: broker 2 loses its session (running, 8 s)" in p.steps[2].events
    assert not p.steps[2].events[-1].startswith("step 2: write 0 acknowledged")


def test_an_offline_partition_has_an_epoch_of_its_own() -> None:
    # As 1.1.1's controller writes it: leader -1 in a new epoch, the ISR left as it was,
    # then another epoch when the broker comes back and is elected.
    sim = Simulator(TWO, KIP101)
    sim.apply(Kill(2))  # ISR shrink: epoch 1
    sim.apply(Kill(1))
    assert (sim.ctl.leader, sim.ctl.isr, sim.ctl.epoch) == (None, [1], 2)
    sim.apply(Restart(1))
    assert (sim.ctl.leader, sim.ctl.isr, sim.ctl.epoch) == (1, [1], 3)


def test_an_isr_shrink_bumps_the_leader_epoch_where_the_release_does() -> None:
    # KAFKA-15021: KRaft stopped bumping it with metadata version 3.6-IV0; ZooKeeper mode
    # always does (LeaderAndIsr.newLeaderAndIsr). A protocol alone takes KRaft as 3.6+.
    cases = [
        ("zk", "3.5.2", 1),
        ("zk", DIVERGING, 1),
        ("kraft", "3.5.2", 1),
        ("kraft", "3.9.2", 0),
        ("kraft", DIVERGING, 0),
    ]
    for mode, protocol, epoch in cases:
        cluster = Cluster(
            mode=mode, brokers=3, replication_factor=2, controller=3 if mode == "zk" else None
        )
        sim = Simulator(cluster, protocol)
        sim.apply(Kill(2))
        assert (sim.ctl.isr, sim.ctl.epoch) == ([1], epoch), (mode, protocol)


def elr_cluster(elr: int | None) -> Cluster:
    features = {} if elr is None else {"eligible.leader.replicas.version": elr}
    return Cluster(
        mode="kraft",
        brokers=3,
        replication_factor=3,
        replicas=(A, B, C),
        topic_config=TopicConfig(min_insync_replicas=2),
        features=features,
    )


THREE_CRASHES = (
    Produce(5),
    Kill(C),  # ISR {A, B}: still at min.insync.replicas, nobody enters the ELR
    Kill(B),  # ISR {A}: below it, B enters the ELR
    Kill(A),  # the leader, last in the ISR: with ELR it leaves the ISR for the ELR
    Restart(B),  # unclean (SIGKILL): out of the ELR at its registration
    Restart(A),  # unclean too: ISR and ELR empty, A is the last known leader
)


@pytest.mark.parametrize(
    ("elr", "release", "unclean"),
    [(1, "4.0.2", 1), (None, "4.3.1", 1), (0, "4.3.1", 0), (None, "3.9.2", 0)],
)
def test_eligible_leader_replicas_and_the_last_known_leader(
    elr: int | None, release: str, unclean: int
) -> None:
    """KIP-966 as Kafka implements it: with ELR (4.0 formatted with it, 4.1+ by default) the
    last known leader, restarted uncleanly after B, is elected as an unclean election
    (RECOVERING); without, A never left the ISR and is elected cleanly."""
    sim = Simulator(elr_cluster(elr), release)
    for step in THREE_CRASHES:
        assert sim.apply(step).status == "done", sim.events
    assert sim.ctl.leader == A
    assert sim.unclean_elections == unclean, sim.events
    if unclean:
        assert any("last known leader" in e for e in sim.events)
        assert any("broker 2 restarted uncleanly: out of the ELR" in e for e in sim.events)


def test_a_clean_restart_keeps_its_place_in_the_elr() -> None:
    """B, stopped cleanly (SIGTERM), stays eligible and is elected from the ELR."""
    sim = Simulator(elr_cluster(1), "4.3.1")
    steps = (Produce(5), Kill(C), Kill(B, "SIGTERM"), Kill(A), Restart(B))
    for step in steps:
        assert sim.apply(step).status == "done", sim.events
    assert sim.ctl.leader == B and sim.unclean_elections == 0, sim.events
    assert any("from the ELR" in e for e in sim.events)


def test_the_quorum_without_a_majority_changes_nothing_until_it_is_back() -> None:
    """KRaft with three voters: the active one killed, another leads; a second killed, no
    majority: a broker that dies then is neither fenced nor replaced until the quorum is
    back, when its session starts afresh."""
    cluster = Cluster(mode="kraft", brokers=3, replication_factor=2, replicas=(A, B),
                      controllers=3)  # fmt: skip
    sim = Simulator(cluster, "3.9.2")
    assert sim.apply(Produce(5)).status == "done"
    first = sim.apply(Quorum("kill"))
    assert first.targets == {"voter": 1, "quorum_leader": 2}
    second = sim.apply(Quorum("kill"))
    assert second.targets == {"voter": 2, "quorum_leader": None}
    assert sim.apply(Kill(A)).status == "done"
    assert sim.ctl.leader == A and sim.registered(A), sim.events  # nobody fences it
    assert sim.apply(Quorum("restart", 1)).targets == {"voter": 1, "quorum_leader": 1}
    assert sim.apply(Wait(10)).status == "done"
    assert sim.ctl.leader == B, sim.events
    skipped = sim.apply(Quorum("resume", 3))
    assert skipped.status == "skipped" and skipped.note == "voter 3 is running"


def test_an_isolated_active_controller_is_replaced_and_healed() -> None:
    cluster = Cluster(mode="kraft", brokers=3, replication_factor=2, replicas=(A, B),
                      controllers=3)  # fmt: skip
    sim = Simulator(cluster, "4.3.1")
    assert sim.apply(Quorum("isolate")).targets == {"voter": 1, "quorum_leader": 2}
    assert sim.apply(Heal()).status == "done"
    assert sim.quorum_up() and sim.voters_up() == [1, 2, 3]


@pytest.mark.parametrize(("release", "fenced"), [("3.9.2", False), ("4.3.1", True)])
def test_a_fast_restart(release: str, fenced: bool) -> None:
    """A leader SIGKILLed and started again at once: before 4.0 a KRaft broker registers
    again within its session and leads on in its epoch; from 4.0 the controller refuses it
    until the old session ends, fences it, and another replica leads."""
    cluster = Cluster(mode="kraft", brokers=3, replication_factor=2, replicas=(A, B))
    sim = Simulator(cluster, release)
    assert sim.apply(Produce(5)).status == "done"
    epoch = sim.ctl.epoch
    assert sim.apply(Kill(A, "SIGKILL", True)).status == "done"
    assert (sim.ctl.leader == B) is fenced, sim.events
    assert (sim.ctl.epoch > epoch) is fenced
    assert any("restarted at once" in e for e in sim.events)


# --------------------------------------------------------------------------------------
# JBOD: a replica moved between its broker's log dirs, and the log dir holding one failing.

JBOD = Cluster(mode="kraft", brokers=3, replication_factor=3, replicas=(A, B, C), log_dirs=2)


def test_a_move_between_log_dirs_changes_nothing_the_model_keeps() -> None:
    steps = (Produce(3), MoveDir(Role.LEADER), Produce(2), MoveDir(B, throttle=True))
    moved = simulate(Schedule(JBOD, steps=steps), DIVERGING)
    plain = simulate(Schedule(JBOD, steps=(Produce(3), Produce(2))), DIVERGING)
    assert moved.outcome is Fate.CONSISTENT and moved.logs == plain.logs
    assert "step 1: broker 1's replica moved to its other log dir (swapped in)" in moved.events


def test_a_broker_cut_off_from_the_quorum_is_not_restarted() -> None:
    # 4.4.0, explore: restarted at once while cut off, broker 3 never registered and exited
    # after initial.broker.registration.timeout.ms; a plain restart is refused alike.
    sim = Simulator(JBOD, DIVERGING)
    sim.apply(Cut(B, QUORUM))
    fast = sim.apply(Kill(B, "SIGKILL", restart=True))
    assert fast.status == "skipped" and "started, it could not register" in fast.note
    sim.apply(Kill(B, "SIGKILL"))
    assert sim.apply(Restart(B)).status == "skipped"
    sim.apply(Heal())
    assert sim.apply(Restart(B)).status == "done"


def test_a_move_needs_its_broker_to_reach_the_controller_quorum() -> None:
    # 3.9.2, explore: the move's throttle, a dynamic broker config, is forwarded to the
    # controller (KIP-590); a broker cut off from the quorum timed the request out.
    sim = Simulator(JBOD, DIVERGING)
    records = [sim.apply(s) for s in (Cut(B, QUORUM), MoveDir(B, throttle=True), Heal())]
    assert records[1].status == "skipped"
    assert records[1].note.endswith("cannot reach the controller quorum to set its move throttle")
    assert sim.apply(MoveDir(B)).status == "done"


def test_a_failed_log_dir_takes_the_replica_offline_until_its_broker_restarts() -> None:
    steps = (Produce(3), FailDir(Role.LEADER), Produce(2), Kill(A), Restart(A), Produce(1))
    sim = Simulator(JBOD, DIVERGING)
    records = [sim.apply(s) for s in steps]
    # The leader's dir fails: another ISR member leads at once (no session to wait out),
    # broker 1 is down for the partition, so killing it is skipped and restarting it works.
    assert [r.status for r in records] == ["done", "done", "done", "skipped", "done", "done"]
    p = sim.finish()
    assert p.outcome is Fate.CONSISTENT and p.logs[A] == p.logs[B] == p.logs[C]
    # In ZooKeeper mode the controller broker keeps its session, and its role, so its dir is
    # not failed in the model.
    zk = Simulator(Cluster(brokers=3, replication_factor=3, replicas=(A, B, C), controller=A,
                           log_dirs=2), KIP279)  # fmt: skip
    assert zk.apply(FailDir(A)).status == "skipped"
