"""The invariants a schedule is judged by: a stuck follower, divergence, and acknowledged
acks=all loss under the rules for unclean elections and power loss (KIP-966)."""

from __future__ import annotations

from dataclasses import replace

from basics.protocol import RecoveryState
from basics.releases import Release
from checkers.abstract import from_spec
from checkers.lineage import Lineage
from checkers.schedules.invariants import leader_lacks_its_epoch
from checkers.schedules.judge import (
    Observed,
    StateSeen,
    elr_on,
    judge,
    loss_rule,
    observed_symptom,
    recovering,
    unclean_elections,
)
from runrecord.outcome import (
    ABORTED_READ,
    LOST_MARKER,
    POWER_LOST_MARKER,
    SKIPPED_MARKER,
    finding_key,
)
from runrecord.replay import (
    BACKGROUND,
    DIVERGED,
    DUPLICATE,
    EPOCH_CACHE_LOST,
    EPOCH_REGRESSION,
    FENCED_LEADER,
    FETCH_LOOP,
    HANGING,
    LEFT_BEHIND,
    LOST,
    METADATA_DIVERGED,
    RECREATED,
    STUCK,
    TORN,
    UNJUDGED,
    StepResult,
    inside_a_step,
    placed_before,
    placement,
)
from suites.broker_logs import same_offset_resets, skipped_markers, timeout_rollbacks

ZK = {"release": Release("1.1.1"), "mode": "zk"}
KRAFT_39 = {"release": Release("3.9.2"), "mode": "kraft"}
KRAFT_43 = {"release": Release("4.3.1"), "mode": "kraft"}


def clean(**fields: object) -> Observed:
    base = {
        "converged": True,
        "audit_status": "consistent",
        "isr": [1, 2],
        "log_end_offsets": {1: 10, 2: 10},
    }
    return Observed(**{**base, **fields})  # type: ignore[arg-type]


def test_everything_held() -> None:
    j = judge({0: clean(), 1: clean()}, unclean_enabled=False, **ZK)
    assert j.failure is None
    assert j.partitions == {0: None, 1: None}
    assert "no acknowledged acks=all write lost" in j.summary


def test_a_partition_the_audit_gave_no_verdict_for_is_not_reached() -> None:
    # Nothing is consistent by default: without the audit's verdict there is no judgement.
    j = judge({0: clean(audit_status=None), 1: clean()}, unclean_enabled=False, **ZK)
    assert j.failure is None
    assert j.unjudged == "partition 0: not judged: the disk audit gave no verdict"
    assert j.summary.startswith("not reached: partition 0")
    assert j.partitions == {0: UNJUDGED, 1: None}
    errors = clean(unjudged="audit errors: ['b1/data/s-0/0.log: bad CRC at byte 0']")
    j = judge({0: clean(), 1: errors}, unclean_enabled=False, **ZK)
    assert "bad CRC at byte 0" in j.unjudged


def test_a_finding_stands_beside_an_unjudged_partition() -> None:
    seen = clean(audit_status="diverged", diverged_at=3)
    j = judge({0: seen, 1: clean(audit_status=None)}, unclean_enabled=False, **ZK)
    assert (j.failure, j.partition) == (DIVERGED, 0)


def test_a_stuck_follower_comes_before_its_divergence() -> None:
    line = "UnexpectedAppendOffsetException: Unexpected offset in append to s-0"
    seen = clean(converged=False, stuck_lines={2: line}, audit_status="diverged", diverged_at=11)
    j = judge({0: seen, 1: clean()}, unclean_enabled=False, **ZK)
    assert (j.failure, j.partition) == (STUCK, 0)
    assert line in j.summary


def test_a_follower_that_recovered_is_not_stuck() -> None:
    line = "[ReplicaFetcher replicaId=1, leaderId=2] Partition s-0 marked as failed"
    j = judge({0: clean(stuck_lines={1: line})}, unclean_enabled=False, **ZK)
    assert j.failure is None
    assert j.evidence["partitions"]["0"]["stuck"] == {"1": line}


def test_no_change_for_the_stall_time_is_stuck_too() -> None:
    seen = clean(converged=False, stalled=True, isr=[1], log_end_offsets={1: 31, 2: 15})
    j = judge({0: seen}, unclean_enabled=False, **ZK)
    assert j.failure == STUCK
    assert "ISR [1]" in j.summary


def test_divergence_and_the_background_partition() -> None:
    j = judge({0: clean(audit_status="diverged", diverged_at=11, below_high_watermark=True)},
              unclean_enabled=False, **ZK)  # fmt: skip
    assert j.failure == DIVERGED
    assert "diverged at offset 11 (below the high watermark: committed data" in j.summary
    j = judge({0: clean(), 1: clean(audit_status="diverged", diverged_at=40)},
              unclean_enabled=False, **ZK)  # fmt: skip
    assert (j.failure, j.partition) == (DIVERGED + BACKGROUND, 1)
    assert "background workload" in j.summary


def test_acks_all_loss_is_a_finding_with_unclean_elections_disabled() -> None:
    j = judge({0: clean(durable_lost=[3, 4])}, unclean_enabled=False, **ZK)
    assert j.failure == LOST
    assert j.rule is not None and "unclean elections disabled" in j.rule


def test_an_unclean_election_excuses_loss_only_where_enabled_and_seen() -> None:
    states = [StateSeen(1, (1,)), StateSeen(-1, (1,)), StateSeen(2, (2,))]
    assert unclean_elections(states) == 1
    lost = clean(durable_lost=[5], states=states)
    assert judge({0: lost}, unclean_enabled=True, **ZK).failure is None
    assert judge({0: lost}, unclean_enabled=False, **ZK).failure == LOST
    no_election = clean(durable_lost=[5], states=[StateSeen(1, (1, 2)), StateSeen(2, (2,))])
    assert judge({0: no_election}, unclean_enabled=True, **ZK).failure == LOST


def test_power_loss_before_kraft_41_is_last_replica_standing() -> None:
    for target in (ZK, KRAFT_39):
        seen = clean(durable_lost=[7, 8], dropped=[(5, 10)])
        allowed, rule = loss_rule(seen, unclean_enabled=False, **target)  # type: ignore[arg-type]
        assert allowed and rule.startswith("last replica standing")
        outside = clean(durable_lost=[3], dropped=[(5, 10)])
        allowed, rule = loss_rule(outside, unclean_enabled=False, **target)  # type: ignore[arg-type]
        assert not allowed and "not all in a dropped tail" in rule


def test_with_flush_every_message_a_dropped_write_is_the_disks_loss() -> None:
    """flush.messages=1: no election excuses an acknowledged write the disks dropped."""
    states = [StateSeen(1, (1,)), StateSeen(1, (1,), RecoveryState.RECOVERING)]
    seen = clean(durable_lost=[7, 8], dropped=[(5, 10)], states=states)
    for target in (ZK, KRAFT_39, KRAFT_43):
        j = judge({0: seen}, unclean_enabled=False, flush_every_message=True, **target)
        assert j.failure == LOST and j.rule is not None and "flush.messages=1" in j.rule
        assert "offsets 7..8" in j.rule
        assert judge({0: seen}, unclean_enabled=False, **target).failure is None
    # An unclean election the topic allows still explains it: its leader may never have
    # held the write.
    elected = [StateSeen(1, (1,)), StateSeen(-1, (1,)), StateSeen(2, (2,))]
    unclean = clean(durable_lost=[7], dropped=[(5, 10)], states=elected)
    assert judge({0: unclean}, unclean_enabled=True, flush_every_message=True, **ZK).failure is None


def test_power_loss_on_kraft_41_needs_an_unclean_or_last_known_leader_election() -> None:
    assert elr_on(Release("4.1.0"), "kraft") and not elr_on(Release("4.0.2"), "kraft")
    assert not elr_on(Release("4.3.1"), "zk")
    seen = clean(durable_lost=[7], dropped=[(5, 10)], states=[StateSeen(1, (1, 2))])
    j = judge({0: seen}, unclean_enabled=False, **KRAFT_43)
    assert j.failure == LOST
    assert j.rule is not None and "KAFKA-15586" in j.rule and "no unclean" in j.rule
    states = [StateSeen(1, (1,)), StateSeen(1, (1,), RecoveryState.RECOVERING)]
    assert recovering(states)
    seen = clean(durable_lost=[7], dropped=[(5, 10)], states=states)
    j = judge({0: seen}, unclean_enabled=False, **KRAFT_43)
    assert j.failure is None
    assert j.rule is not None and "last-known-leader" in j.rule


def test_a_broker_that_exited_is_evidence() -> None:
    seen = clean(converged=False, stalled=True)
    j = judge({0: seen}, unclean_enabled=False, exited={2: "halted"}, **ZK)
    assert j.failure == STUCK
    assert j.evidence["exited"] == {"2": "halted"}


def test_a_replica_recreated_beside_its_offline_dir_comes_first() -> None:
    # KAFKA-16234: the copy made while the dir was offline, then a broker that will not
    # start with two copies: stuck, and an audit error, follow from it.
    said = "broker 2 re-created its replica of s-0 in /logfork/data while /logfork/data2, ..."
    seen = clean(recreated=[said], converged=False, stalled=True, unjudged="audit errors: [...]")
    j = judge({0: seen, 1: clean()}, unclean_enabled=False, **KRAFT_39)
    assert (j.failure, j.partition) == (RECREATED, 0)
    assert said in j.summary
    assert j.evidence["partitions"]["0"]["recreated"] == [said]
    symptom = observed_symptom(j)
    assert (symptom.kind, symptom.replicas) == (RECREATED, [2])


LOOP = (
    "[2026-11-27 04:25:12,078] INFO [ReplicaFetcher replicaId=2, leaderId=1, fetcherId=0] "
    "Current offset 10 for partition s-25a05e9c-0 is out of range, which typically implies "
    "a leader change. Reset fetch offset to 10 (kafka.server.ReplicaFetcherThread)"
)


def test_a_follower_looping_on_out_of_range_after_convergence_is_a_finding() -> None:
    # KAFKA-20961: log ends equal, ISR full, and the follower still resets round after round.
    seen = clean(fetch_loops={2: f"5 resets to one offset after convergence: {LOOP}"})
    j = judge({0: seen, 1: clean()}, unclean_enabled=False, **KRAFT_43)
    assert (j.failure, j.partition) == (FETCH_LOOP, 0)
    assert "loops on OffsetOutOfRange" in j.summary and "broker 2's log" in j.summary
    symptom = observed_symptom(j)
    assert (symptom.kind, symptom.replicas) == (FETCH_LOOP, [2])


def test_resets_to_the_offset_a_follower_stood_at_are_counted_per_partition() -> None:
    moved = LOOP.replace("Current offset 10", "Current offset 7")  # a leader change's reset
    other = LOOP.replace("s-25a05e9c-0", "s-25a05e9c-11")
    prefix = LOOP.replace("s-25a05e9c-0", "s-25a05e9c-0x-0")  # another topic
    own_end = (
        "[2026-11-27 04:25:14,126] INFO [ReplicaFetcher replicaId=2, leaderId=1, fetcherId=0] "
        "Reset fetch offset for partition s-25a05e9c-0 from 10 to the current local replica's "
        "end offset 10 (kafka.server.ReplicaFetcherThread)"
    )
    found = same_offset_resets([LOOP, moved, LOOP, other, prefix, own_end], "s-25a05e9c")
    assert found == {0: (3, own_end), 11: (1, other)}


def test_an_epoch_cache_that_lost_an_epoch_comes_before_the_loop() -> None:
    said = "leader 1 leads in epoch 2, and its leader-epoch-checkpoint holds 0 from 0"
    seen = clean(epoch_cache_lost=said, fetch_loops={2: LOOP})
    j = judge({0: seen, 1: clean()}, unclean_enabled=False, **KRAFT_43)
    assert (j.failure, j.partition) == (EPOCH_CACHE_LOST, 0)
    assert said in j.summary
    assert observed_symptom(j).kind == EPOCH_CACHE_LOST
    # The model follows neither: beside them, it is answerable for a hang only.
    assert j.modelled == {0: None}
    hung = replace(seen, hanging=[3], stable_stuck=True)
    assert judge({0: hung, 1: clean()}, unclean_enabled=False, **KRAFT_43).modelled == {0: HANGING}
    alone = judge({0: clean(hanging=[3]), 1: clean()}, unclean_enabled=False, **KRAFT_43)
    assert alone.modelled == {}


def test_a_leader_epoch_cache_is_judged_against_the_epoch_it_leads_in() -> None:
    def lin(broker: int, epochs: list[tuple[int, int]] | None) -> Lineage:
        return from_spec(broker, [(0, 9, 0, "a")], epochs=epochs)

    lineages = [lin(1, [(0, 0)]), lin(2, [(0, 0), (1, 10)])]
    assert leader_lacks_its_epoch(lineages, 1, 2) == (
        "leader 1 leads in epoch 2, and its leader-epoch-checkpoint holds 0 from 0"
    )
    assert leader_lacks_its_epoch(lineages, 1, 0) is None
    assert leader_lacks_its_epoch([lin(1, [(0, 0), (2, 10)])], 1, 2) is None
    assert leader_lacks_its_epoch([lin(1, [(0, 0), (3, 10)])], 1, 2) is None  # a stale look
    assert leader_lacks_its_epoch([lin(1, None)], 1, 2) is None  # no file: nothing to judge
    assert leader_lacks_its_epoch(lineages, 3, 2) is None  # no copy of the leader's log


def test_a_removed_replica_left_current_on_its_broker_is_a_finding() -> None:
    seen = clean(left_behind={2: "/work/runs/c/nodes/b2/data/s-1-0"})
    j = judge({0: seen, 1: clean()}, unclean_enabled=False, **KRAFT_39)
    assert (j.failure, j.partition) == (LEFT_BEHIND, 0)
    assert "broker 2: /work/runs/c/nodes/b2/data/s-1-0" in j.summary
    assert observed_symptom(j).replicas == [2]


def test_a_fenced_broker_elected_leader_is_a_finding() -> None:
    # KAFKA-19522: the replicas converge, and the metadata log shows the election.
    seen = clean(fenced_leaders=[(412, 1)])
    j = judge({0: seen, 1: clean()}, unclean_enabled=False, **KRAFT_43)
    assert (j.failure, j.partition) == (FENCED_LEADER, 0)
    assert "broker 1 at offset 412" in j.summary
    assert j.evidence["partitions"]["0"]["fenced_leaders"] == [[412, 1]]


def test_metadata_and_epoch_invariants_come_before_the_partition_audit() -> None:
    said = "replicas [1, 101] of the metadata log diverged at 77"
    split = clean(audit_status="diverged", diverged_at=4, metadata_diverged=said)
    j = judge({0: split, 1: clean()}, unclean_enabled=False, **KRAFT_43)
    assert (j.failure, j.partition) == (METADATA_DIVERGED, 0)
    back = clean(epoch_regressions=["broker 2: [5, 9] in epoch 1 after epoch 3"])
    j = judge({0: back, 1: clean()}, unclean_enabled=False, **KRAFT_43)
    assert j.failure == EPOCH_REGRESSION and "in epoch 1 after epoch 3" in j.summary


def test_epoch_regressions_on_a_replica() -> None:
    from checkers.abstract import from_spec
    from checkers.schedules.invariants import epoch_regressions

    fine = from_spec(1, [(0, 4, 0, "a"), (5, 9, 2, "b")])
    back = from_spec(2, [(0, 4, 0, "a"), (5, 9, 3, "c"), (10, 12, 1, "d")])
    assert epoch_regressions([fine, back]) == ["broker 2: [10, 12] in epoch 1 after epoch 3"]


def test_a_hanging_transaction_is_a_finding_both_readings_agree_on() -> None:
    stuck = "last stable offset 0, high watermark 3"
    seen = clean(hanging=[0], stable=stuck, stable_stuck=True)
    j = judge({0: seen, 1: clean()}, unclean_enabled=True, **KRAFT_43)
    assert j.failure == HANGING
    assert j.summary.startswith(f"partition 0: a transaction hangs from offset 0 ({stuck})")
    assert observed_symptom(j).kind == HANGING and observed_symptom(j).offset == 0
    # The healthy twin: every transaction ended, nothing open on disk.
    fine = clean(hanging=[], stable="last stable offset 4, high watermark 4", stable_stuck=False)
    assert judge({0: fine, 1: clean()}, unclean_enabled=True, **KRAFT_43).failure is None


def test_a_hang_names_its_cause_a_coordinators_skip_or_a_lost_marker() -> None:
    line = "broker 1's log: ... Couldn't find leader endpoint for partitions [s-1a2b-0] ..."
    stuck = "last stable offset 0, high watermark 3"
    seen = clean(hanging=[0], stable=stuck, stable_stuck=True, skipped_marker=line)
    j = judge({0: seen, 1: clean()}, unclean_enabled=True, **KRAFT_43)
    assert j.failure == HANGING and j.cause == SKIPPED_MARKER
    assert "its coordinator skipped the partition's marker" in j.summary and line in j.summary
    assert finding_key(j.failure, j.cause) == "hanging-transaction (skipped-marker)"
    seen = clean(hanging=[0], stable=stuck, stable_stuck=True)
    j = judge({0: seen, 1: clean()}, unclean_enabled=True, **KRAFT_43)
    assert j.failure == HANGING and j.cause == LOST_MARKER
    assert "no coordinator logged skipping its marker" in j.summary
    # A power loss that dropped the tail past the transaction's start took its marker.
    seen = clean(hanging=[0], stable=stuck, stable_stuck=True, dropped=[(1, 2)])
    j = judge({0: seen, 1: clean()}, unclean_enabled=True, **KRAFT_43)
    assert j.cause == POWER_LOST_MARKER and "a power loss dropped the partition's tail" in j.summary
    # Without eligible leader replicas (3.9) a replica that lost its tail may lead again:
    # the marker is one more write of the tail, whose loss "last replica standing" allows.
    j = judge({0: seen, 1: clean()}, unclean_enabled=False, **KRAFT_39)
    assert j.failure is None and j.cause == "" and "last replica standing" in j.summary
    assert "a transaction hangs from offset 0" in j.summary
    # ... not one that dropped the transaction's own start (that leaves nothing open there).
    seen = clean(hanging=[3], stable=stuck, stable_stuck=True, dropped=[(2, 5)])
    assert judge({0: seen, 1: clean()}, unclean_enabled=True, **KRAFT_43).cause == LOST_MARKER
    # Only a hang has a cause; the kind alone names every other finding.
    j = judge({0: clean(torn=[8]), 1: clean()}, unclean_enabled=False, **KRAFT_43)
    assert j.cause == "" and finding_key(j.failure, j.cause) == TORN


def test_clients_and_disk_disagreeing_on_a_hang_is_not_judged() -> None:
    # One of the two readings is wrong, and that is logfork's to find: no verdict.
    for hanging, stuck in (([0], False), ([], True)):
        seen = clean(hanging=hanging, stable="s", stable_stuck=stuck)
        j = judge({0: seen, 1: clean()}, unclean_enabled=True, **KRAFT_43)
        assert j.failure is None and j.partitions[0] == UNJUDGED
        assert "clients see s, while the disk audit found" in j.unjudged
    # A background partition has no client reading: the disk alone speaks.
    j = judge({0: clean(), 1: clean(hanging=[7])}, unclean_enabled=True, **KRAFT_43)
    assert j.failure == HANGING + BACKGROUND


def test_torn_transactions_and_duplicate_writes_on_disk_are_findings() -> None:
    j = judge({0: clean(torn=[8]), 1: clean()}, unclean_enabled=False, **KRAFT_43)
    assert j.failure == TORN and "across replicas or with what its coordinator" in j.summary
    j = judge({0: clean(), 1: clean(duplicates=[5])}, unclean_enabled=False, **KRAFT_43)
    assert j.failure == DUPLICATE + BACKGROUND


def test_what_a_read_committed_consumer_must_not_read_is_a_finding() -> None:
    read = [(ABORTED_READ, 4, "its transaction was aborted")]
    j = judge({0: clean(read_anomalies=read), 1: clean()}, unclean_enabled=False, **KRAFT_43)
    assert j.failure == ABORTED_READ
    assert "what a consumer read: aborted-read at offset 4" in j.summary
    # An unclean election may drop a marker: allowed then, and said.
    states = [StateSeen(1, (1,)), StateSeen(-1, (1,)), StateSeen(2, (2,))]
    allowed = clean(read_anomalies=read, states=states)
    j = judge({0: allowed, 1: clean()}, unclean_enabled=True, **KRAFT_43)
    assert j.failure is None and "aborted-read at offset 4" in j.summary
    assert "allowed: unclean election" in j.summary


def test_a_coordinators_skipped_marker_is_read_from_its_log() -> None:
    # As a 4.3.1 coordinator logged it (TransactionMarkerChannelManager, KAFKA-20734); the
    # filler topic beside the schedule's, and another topic, are not the schedule's.
    lines = [
        "[2026-11-27 15:01:02,003] INFO [Transaction Marker Channel Manager 1]: Couldn't find "
        "leader endpoint for partitions [s-1a2b-filler-0, s-1a2b-1] while trying to send "
        "transaction markers for logfork-txn, these partitions are likely deleted already "
        "and hence can be skipped (org.apache.kafka...)",
        "[2026-11-27 15:01:03,003] INFO ... for partitions [s-ffff-0] while trying to send "
        "transaction markers for t, these partitions are likely deleted already and hence "
        "can be skipped",
        "[2026-11-27 15:01:04,003] INFO Partition s-1a2b-0 has no leader",
    ]
    found = skipped_markers(lines, "s-1a2b")
    assert list(found) == [1] and "s-1a2b-1" in found[1]
    assert skipped_markers(lines, "s-1a2") == {}


def test_the_coordinators_aborts_at_the_timeout_are_placed_among_the_steps() -> None:
    tid = "logfork-s-bd91ea8c"
    lines = [
        "[2026-11-28 22:01:14,077] INFO [TransactionCoordinator id=3] Completed rollback of "
        f"ongoing transaction for transactionalId {tid} due to timeout (kafka.coordinator...)",
        "[2026-11-28 22:01:15,000] INFO [TransactionCoordinator id=3] Completed rollback "
        f"ongoing transaction of transactionalId: {tid} due to timeout",  # before 3.x
        "[2026-11-28 22:01:16,000] INFO ... Completed rollback of ongoing transaction for "
        f"transactionalId {tid}-2 due to timeout",  # another producer's
    ]
    at = timeout_rollbacks(lines, tid)
    assert at == [1795903274.077, 1795903275.0]
    # Schedule 17 of a 4.4.0 explore: step 12 (a SIGKILL) began at 266.96 and took effect
    # 2.5 s later; the abort came after that, so before step 13's.
    steps = [StepResult(i, "step", "kill", "done", seconds=8.3, lead=2.5) for i in range(14)]
    steps[12].began, steps[13].began = 1795903266.96, 1795903275.26
    for i in range(12):
        steps[i].began = 1795903200.0 + i
    assert placed_before(at[0], steps) == 13
    assert placed_before(1795903268.0, steps) == 12  # before the kill took effect
    assert placed_before(1795903278.0, steps) == 14  # after the last step's, inside it
    assert placed_before(1795903290.0, steps) == 15  # in the heal
    # Inside step 12 once its kill took effect (it ended at 275.26): what the kill set off
    # (an election) may still be under way. Before its effect, or after the step, it is not.
    assert inside_a_step(at[0], steps)
    assert not inside_a_step(1795903268.0, steps)
    assert not inside_a_step(1795903290.0, steps)
    assert [placement(i, 14) for i in (13, 14, 15)] == [
        "before step 13",
        "after the last step",
        "in the heal",
    ]
