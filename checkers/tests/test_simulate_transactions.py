"""The model's transactional producer (the `txn-write`, `txn-commit` and `txn-abort` steps):
markers, the coordinator's timeout, and the hanging transaction an unclean election leaves
(KAFKA-20716), on crafted schedules."""

from __future__ import annotations

import dataclasses

from checkers.simulate import SimOptions, simulate
from checkers.simulate.state import SimBatch
from checkers.simulate.transactions import FAILED_TXN, open_transaction
from runrecord.outcome import HANGING, LOST_MARKER, POWER_LOST_MARKER, SKIPPED_MARKER
from runrecord.schedule import Cluster, Schedule, TopicConfig, dumps, loads
from runrecord.steps.elections import ElectUnclean
from runrecord.steps.links import ExpireSession, Heal, HoldBack
from runrecord.steps.processes import Kill, PowerLoss, Restart
from runrecord.steps.txn import TxnAbort, TxnCommit, TxnWrite
from runrecord.steps.waits import Wait
from runrecord.steps.writes import Produce

B, C = 2, 3


def kraft(unclean: bool = True, min_isr: int = 1) -> Cluster:
    return Cluster(
        mode="kraft",
        brokers=3,
        replication_factor=2,
        replicas=(B, C),
        topic_config=TopicConfig(min_isr, unclean),
    )


# KAFKA-20716: the commit's marker reaches B alone, and C, without it, is elected uncleanly.
DROPPED_MARKER = (TxnWrite(3), Kill(C), TxnCommit(), Kill(B), Restart(C), ElectUnclean())


def test_an_unclean_election_that_drops_a_commit_marker_leaves_the_transaction_hanging() -> None:
    for release in ("3.9.2", "4.4.0"):
        p = simulate(Schedule(kraft(), steps=DROPPED_MARKER), release)
        assert p.failure() == HANGING, release
        assert p.hanging == 0
        assert "step 2: broker 2 appends the COMMIT marker of transaction 0 at 3 in epoch 0" in (
            p.events
        )
        assert "step 2: the COMMIT marker of transaction 0 is committed" in p.events
        assert p.logs == {B: [(0, 2, 0)], C: [(0, 2, 0)]}  # B truncated the marker
        assert p.summary().startswith("a transaction hangs: the last stable offset stays at 0")


def test_the_marker_on_both_replicas_leaves_nothing_hanging() -> None:
    steps = (TxnWrite(3), TxnCommit(), Kill(C), Kill(B), Restart(C), ElectUnclean())
    p = simulate(Schedule(kraft(), steps=steps), "4.4.0")
    assert p.failure() is None
    assert p.hanging is None
    assert p.logs[C] == [(0, 2, 0), (3, 3, 0)]


def test_a_transaction_left_open_is_aborted_by_the_coordinator() -> None:
    p = simulate(Schedule(kraft(False), steps=(TxnWrite(2), Produce(1))), "4.4.0")
    assert p.failure() is None
    assert "transaction 0 ends: ABORT (left open: the coordinator aborts it at its timeout)" in (
        p.events
    )
    assert p.logs[B] == [(0, 1, 0), (2, 2, 0), (3, 3, 0)]  # data, the write, the marker


def test_the_coordinator_aborts_at_the_timeout_and_a_later_write_begins_anew() -> None:
    steps = (TxnWrite(1), Wait(60), TxnWrite(1), TxnCommit())
    p = simulate(Schedule(kraft(False), steps=steps), "4.4.0")
    ended = [e for e in p.events if "ends:" in e]
    assert ended == [
        "step 1: transaction 0 ends: ABORT (open longer than transaction.timeout.ms 60 s)",
        "step 3: transaction 1 ends: COMMIT (the producer's commit)",
    ]
    assert p.transactions == 2 and p.failure() is None


def test_a_commit_after_a_failed_write_aborts() -> None:
    # min.insync.replicas 2 with the follower held back: the write times out unacknowledged.
    steps = (HoldBack(), TxnWrite(2), TxnCommit())
    p = simulate(Schedule(kraft(False, min_isr=2), steps=steps), "4.4.0")
    assert "step 1: write 0 not acknowledged (high watermark 0, ISR [2, 3])" in p.events
    assert any("ends: ABORT (a write failed: the producer can only abort)" in e for e in p.events)
    assert p.steps[2].targets == {"transaction": 0, "marker": "ABORT"}


def test_steps_without_their_precondition_are_skipped() -> None:
    p = simulate(Schedule(kraft(False), steps=(TxnCommit(), TxnAbort())), "4.4.0")
    assert [(s.status, s.note) for s in p.steps] == [("skipped", "no transaction is open")] * 2
    # A new transaction waits for the last one's marker, which waits for a leader (on a
    # release whose coordinator does not skip a leaderless partition's marker).
    steps = (TxnWrite(1), Kill(B), Kill(C), TxnAbort(), TxnWrite(1))
    p = simulate(Schedule(kraft(False), steps=steps), "3.9.2")
    assert p.steps[4].status == "skipped"
    assert "CONCURRENT_TRANSACTIONS" in p.steps[4].note
    # Before KIP-98's message format there are no transactions.
    p = simulate(Schedule(Cluster(replication_factor=2), steps=(TxnWrite(1),)), "0.10.2.2")
    assert p.steps[0].status == "skipped"


def test_the_leader_log_tracks_one_open_transaction_per_producer() -> None:
    data = [SimBatch(0, 1, 0, "w0", 0), SimBatch(2, 2, 0, "m0.0", 0, True)]
    assert open_transaction(data) is None
    assert open_transaction(data[:1]) == 0
    # A later transaction's marker closes an earlier one left open (one producer id).
    later = [data[0], SimBatch(2, 3, 1, "w1", 1), SimBatch(4, 4, 1, "m1.0", 1, True)]
    assert open_transaction(later) is None
    assert open_transaction([SimBatch(0, 0, 0, "w0"), data[0]]) == 0


def test_transactional_steps_round_trip_through_the_file() -> None:
    schedule = Schedule(kraft(), steps=(TxnWrite(3), TxnCommit(), TxnWrite(1), TxnAbort()))
    text = dumps(schedule)
    assert '{"kind": "txn-write", "count": 3}' in text
    assert '{"kind": "txn-commit"}' in text
    assert loads(text).steps == schedule.steps


def test_a_failed_transaction_takes_no_more_writes() -> None:
    steps = (HoldBack(), TxnWrite(2), TxnWrite(1), TxnAbort(), TxnWrite(1))
    p = simulate(Schedule(kraft(False, min_isr=2), steps=steps), "4.4.0")
    assert [s.status for s in p.steps] == ["done", "done", "skipped", "done", "skipped"]
    assert p.steps[2].note == FAILED_TXN


# KAFKA-17754: transaction 0's abort held; transaction 1 writes; the heal delivers the
# abort, which ends transaction 1 (transactions v1: one epoch across transactions).
LATE_ABORT = (TxnWrite(1), TxnAbort(held=True), TxnWrite(1), Heal())


def test_a_late_endtxn_ends_the_transaction_open_when_it_arrives() -> None:
    p = simulate(Schedule(kraft(False), steps=LATE_ABORT), "4.4.0")
    assert [s.status for s in p.steps] == ["done"] * 4
    assert p.steps[3].targets["late_end"] == "ended transaction 1"
    assert "step 3: transaction 1 ends: ABORT (a late EndTxn)" in p.events
    # Data, ABORT, data, ABORT: nothing hangs, and nothing else was asked of the producer.
    assert p.logs[B] == [(0, 0, 0), (1, 1, 0), (2, 2, 0), (3, 3, 0)] and p.failure() is None
    assert p.unpredictable == ()


def test_the_producer_going_on_after_a_late_endtxn_is_not_predicted() -> None:
    p = simulate(Schedule(kraft(False), steps=(*LATE_ABORT, TxnWrite(1), TxnCommit())), "4.4.0")
    assert p.unpredictable == (
        "the producer goes on at step 4 with a transaction a late EndTxn ended",
    )


def test_a_late_endtxn_with_no_transaction_open_changes_nothing() -> None:
    steps = (TxnWrite(1), TxnCommit(held=True), Heal(), TxnWrite(1), TxnCommit())
    p = simulate(Schedule(kraft(False), steps=steps), "4.4.0")
    assert p.steps[2].targets["late_end"] == "nothing open"
    assert p.unpredictable == ()
    assert p.transactions == 2


def test_a_late_endtxn_from_before_an_epoch_bump_is_fenced() -> None:
    steps = (TxnWrite(1), TxnAbort(held=True), TxnWrite(1), Wait(61), TxnWrite(1), Heal())
    p = simulate(Schedule(kraft(False), steps=steps), "4.4.0")
    assert p.steps[5].targets["late_end"] == "fenced"


def test_one_endtxn_is_held_at_a_time_and_a_heal_releases_it() -> None:
    steps = (TxnWrite(1), TxnAbort(held=True), TxnWrite(1), TxnAbort(held=True), Heal(), Heal())
    p = simulate(Schedule(kraft(False), steps=steps), "4.4.0")
    assert [s.status for s in p.steps] == ["done", "done", "done", "skipped", "done", "skipped"]
    assert p.steps[3].note == "an EndTxn is held already (until a heal)"
    assert p.steps[5].note == "nothing is cut"


def test_the_late_endtxn_is_delivered_by_the_final_heal() -> None:
    p = simulate(Schedule(kraft(False), steps=LATE_ABORT[:3]), "4.4.0")
    assert "transaction 1 ends: ABORT (a late EndTxn)" in p.events
    assert not any("left open" in e for e in p.events)


def test_a_held_end_round_trips_through_the_file() -> None:
    schedule = Schedule(kraft(False), steps=LATE_ABORT)
    text = dumps(schedule)
    assert '{"kind": "txn-abort", "held": true}' in text
    assert loads(text).steps == schedule.steps
    assert TxnCommit(held=True).describe() == (
        "commit the transaction, its first EndTxn held until a heal"
    )


def test_a_late_abort_of_a_failed_transaction_is_fenced_by_the_producers_epoch_bump() -> None:
    # The write times out (min.insync.replicas 2, a follower held back): the producer aborts
    # and bumps its epoch (KIP-360), which fences its held ABORT.
    steps = (HoldBack(), TxnWrite(1), TxnCommit(held=True), Heal(), TxnWrite(1))
    p = simulate(Schedule(kraft(False, min_isr=2), steps=steps), "3.5.2")
    assert p.steps[2].targets["marker"] == "ABORT"
    assert p.steps[3].targets["late_end"] == "fenced"
    assert p.unpredictable == ()


OFFLINE_COMMIT = (
    TxnWrite(3),
    Kill(C, "SIGTERM"),
    Kill(B, "SIGTERM"),
    TxnCommit(),
    Restart(B),
    Restart(C),
)


def test_a_kraft_coordinator_skips_the_marker_of_a_partition_without_a_leader() -> None:
    # Committed while the partition is offline: the coordinator takes it for deleted, and
    # once its replicas are back the transaction hangs (seen on 4.3.1, not on 3.9.2).
    p = simulate(Schedule(kraft(False), steps=OFFLINE_COMMIT), "4.3.1")
    assert any("skips the COMMIT marker of transaction 0" in e for e in p.events)
    assert p.hanging == 0 and p.failure() == HANGING
    p = simulate(Schedule(kraft(False), steps=OFFLINE_COMMIT), "3.9.2")
    assert "step 4: broker 2 appends the COMMIT marker of transaction 0 at 3 in epoch 2" in p.events
    assert p.failure() is None
    zk = Cluster(brokers=3, replication_factor=2, replicas=(B, C))
    assert simulate(Schedule(zk, steps=OFFLINE_COMMIT), "3.9.2").failure() is None


def test_a_coordinator_cut_off_from_the_quorum_decides_on_its_own_stale_metadata() -> None:
    # Explore's schedule 18 on 4.3.1: the producer's coordinator (broker 1, as the run told
    # at the write) was cut off from the quorum, still led the partition in its own
    # metadata, and wrote the marker there; the controller's view had no leader.
    steps = (TxnWrite(3), ExpireSession(1), Kill(C, "SIGTERM"), Kill(B, "SIGTERM"), TxnCommit())
    told = simulate(Schedule(kraft(False), steps=steps), "4.3.1", options=SimOptions(
        coordinator_at=((0, 1),)))  # fmt: skip
    assert told.unpredictable and "broker 1, cut off from the quorum" in told.unpredictable[0]
    # A coordinator the model only guesses does not make it doubt the controller's view.
    guessed = simulate(Schedule(kraft(False), steps=steps), "4.3.1")
    assert not guessed.unpredictable and guessed.failure() == HANGING


def test_the_model_names_why_a_transaction_hangs() -> None:
    # Two bugs, one symptom: explore shrinks each apart (runrecord.outcome.finding_key).
    skipped = simulate(Schedule(kraft(False), steps=OFFLINE_COMMIT), "4.3.1")
    assert skipped.hang_cause == SKIPPED_MARKER
    assert skipped.finding() == f"{HANGING} ({SKIPPED_MARKER})"
    assert "(its coordinator skipped the marker: KAFKA-20734)" in skipped.summary()
    lost = simulate(Schedule(kraft(), steps=DROPPED_MARKER), "4.4.0")
    assert lost.hang_cause == LOST_MARKER
    assert lost.finding() == f"{HANGING} ({LOST_MARKER})"
    fine = simulate(Schedule(kraft(False), steps=OFFLINE_COMMIT), "3.9.2")
    assert fine.hang_cause == "" and fine.finding() is None
    # Explore's 4.4.0 run: the COMMIT marker reached broker 3 alone, whose power loss
    # dropped it unflushed; whoever leads next has none. Broker 3 comes back by an unclean
    # election, which may lose what the power loss dropped, the marker with it (KIP-966).
    steps = (TxnWrite(1), Kill(B), TxnCommit(), PowerLoss(C, 1))
    powered = simulate(Schedule(kraft(), steps=steps), "4.4.0")
    assert any("unflushed [1, 1] gone" in e for e in powered.events)
    assert powered.hang_cause == POWER_LOST_MARKER and powered.unclean_elections
    assert powered.marker_loss_allowed and powered.failure() is None
    assert "dropped its marker from every replica: allowed" in powered.summary()


# The leader appends the marker while its follower is held back (in the ISR, not fetching),
# then its session expires with the cut still on: a zombie holding the coordinator's request.
ZOMBIE = (TxnWrite(2), HoldBack(C), TxnCommit(), ExpireSession(B), Wait(40), Produce(1))


def test_a_marker_waiting_in_a_zombies_purgatory_is_not_predicted_without_a_clock() -> None:
    p = simulate(Schedule(kraft(False), steps=ZOMBIE), "3.9.2")
    assert p.unpredictable and "in the purgatory of broker 2" in p.unpredictable[0]
    assert not any("step 5: broker 3 appends the COMMIT" in e for e in p.events)


def test_the_runs_clock_times_the_coordinators_request_out() -> None:
    # The wait takes 40 s on the wall, and the request's 30 s ran out in it: nothing moved
    # during the wait, so the marker went to broker 3 as at its end, ahead of the produce.
    clock = SimOptions(step_seconds=(1, 1, 1, 7, 40, 1))
    p = simulate(Schedule(kraft(False), steps=ZOMBIE), "3.9.2", options=clock)
    assert not p.unpredictable and p.clock_used
    timed_out = p.events.index(
        "step 5: the coordinator's request to broker 2 times out (request.timeout.ms 30 s, "
        "by the run's clock)"
    )
    assert "broker 3 appends the COMMIT marker of transaction 0" in p.events[timed_out + 1]
    # Were the wait short, the request would still be waiting when the heal answers it.
    short = SimOptions(step_seconds=(1, 1, 1, 7, 2, 1))
    p = simulate(Schedule(kraft(False), steps=ZOMBIE), "3.9.2", options=short)
    assert not p.unpredictable
    assert not any("step 5: broker 3 appends the COMMIT" in e for e in p.events)
    # Ran out inside the session expiry that made broker 2 a zombie: where the marker went
    # then, the model cannot place.
    early = SimOptions(step_seconds=(1, 1, 1, 31, 10, 1))
    p = simulate(Schedule(kraft(False), steps=ZOMBIE), "3.9.2", options=early)
    assert p.unpredictable


def test_the_runs_clock_times_the_coordinators_abort_at_the_transaction_timeout() -> None:
    # Left open across a kill and a restart that take 70 s on the wall (the model's own
    # time passes 6 s): the coordinator aborted it meanwhile, while broker 2 led alone.
    steps = (TxnWrite(2), Kill(C, "SIGTERM"), Restart(C), Produce(1))
    clock = SimOptions(step_seconds=(1, 3, 70, 1))
    p = simulate(Schedule(kraft(False), steps=steps), "3.9.2", options=clock)
    ended = [e for e in p.events if "ends: ABORT" in e]
    assert ended == [
        "step 3: transaction 0 ends: ABORT (open longer than transaction.timeout.ms 60 s)"
    ]
    assert not p.unpredictable and p.failure() is None
    # Without the clock the model's own time keeps it open to the end.
    p = simulate(Schedule(kraft(False), steps=steps), "3.9.2")
    assert not any(e.startswith("step") and "ends: ABORT" in e for e in p.events)
    # A commit in the step the timeout fell in raced the coordinator's abort.
    steps = (TxnWrite(2), Wait(1), TxnCommit())
    clock = SimOptions(step_seconds=(1, 1, 70))
    p = simulate(Schedule(kraft(False), steps=steps), "3.9.2", options=clock)
    assert p.unpredictable and "raced the coordinator's abort" in p.unpredictable[0]


def test_an_abort_the_clock_places_inside_the_last_step_is_not_predicted() -> None:
    # Left open through two kills, the last taking 70 s: the coordinator aborted it inside
    # that step, with the partition's leader gone or not (then it skips the marker,
    # KAFKA-20734), not at the heal with a leader back. Seen on 4.4.0 (explore seed 1,
    # schedule 17): the model called it consistent, the brokers a skipped marker.
    steps = (TxnWrite(2), Kill(B), Kill(C))
    late = SimOptions(step_seconds=(1, 1, 70))
    p = simulate(Schedule(kraft(False), steps=steps), "4.4.0", options=late)
    assert p.unpredictable and "fell inside step 2" in p.unpredictable[0]
    # Short steps: the heal aborts it, as without a clock.
    short = SimOptions(step_seconds=(1, 1, 2))
    p = simulate(Schedule(kraft(False), steps=steps), "4.4.0", options=short)
    assert not p.unpredictable and p.failure() is None
    # Told where the coordinator logged its abort, the model predicts: before the last
    # kill took effect, the marker reached broker 3; after it, nobody led the partition.
    for before, finding in ((2, None), (3, f"{HANGING} ({SKIPPED_MARKER})")):
        told = dataclasses.replace(late, timeout_aborts=(before,))
        p = simulate(Schedule(kraft(False), steps=steps), "4.4.0", options=told)
        assert not p.unpredictable and p.finding() == finding
    # Told it fell inside the last kill's step, or in the heal: whether the partition had a
    # leader then is the step's (or the heal's) own doing, and the model does not say.
    # 4.3.1, explore seed 33, schedules 3 and 4: a restart, and a heal, bringing it back.
    inside = dataclasses.replace(late, timeout_aborts=(3,), timeout_aborts_within=(3,))
    p = simulate(Schedule(kraft(False), steps=steps), "4.4.0", options=inside)
    assert p.unpredictable and "fell inside step 2" in p.unpredictable[0]
    heal = dataclasses.replace(late, timeout_aborts=(4,))
    p = simulate(Schedule(kraft(False), steps=steps), "4.4.0", options=heal)
    assert p.unpredictable and "fell inside the heal" in p.unpredictable[0]


def test_no_coordinator_aborts_while_no_broker_could_lead_its_log() -> None:
    # Both replicas are killed and the third broker's session expired: nobody leads the
    # coordinator's log through the wait, so the transaction is aborted only at the heal,
    # with the partition back, and nothing hangs (seen on 4.3.1, explore seed 13).
    steps = (TxnWrite(2), ExpireSession(1), Kill(B), Kill(C), Wait(70))
    p = simulate(Schedule(kraft(False), steps=steps), "4.3.1")
    assert not any(e.startswith("step") and "ends: ABORT" in e for e in p.events)
    assert p.failure() is None
    clock = SimOptions(step_seconds=(1, 8, 6, 6, 70))
    assert simulate(Schedule(kraft(False), steps=steps), "4.3.1", options=clock).failure() is None
    # With broker 1's session kept, it leads the log and aborts into the offline partition.
    steps = (TxnWrite(2), Kill(B), Kill(C), Wait(70))
    p = simulate(Schedule(kraft(False), steps=steps), "4.3.1")
    assert p.failure() == HANGING
