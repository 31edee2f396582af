"""Invariants of a schedule's run read from its evidence beyond the per-partition audit:
the KRaft metadata log's copies, and each replica's leader epochs (checkers.schedules.judge
says what a violation of each amounts to)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from basics.protocol import Protocol
from checkers.audit.local import execute
from checkers.audit.plan import plan_audit
from checkers.metadata_log import METADATA_TOPICS, MetadataLog


def epoch_regressions(lineages: Any) -> list[str]:
    """Where a replica's log holds a batch of a lower leader epoch after a higher one: a
    partition's epochs never go backwards on a broker's disk (a follower appends only what
    its leader of that epoch wrote, and truncates anything of a later epoch first)."""
    found = []
    for lin in lineages:
        top = -1
        for batch in lin.batches:
            if batch.leader_epoch < top:
                found.append(
                    f"broker {lin.broker_id}: {batch.span} in epoch {batch.leader_epoch} after "
                    f"epoch {top}"
                )
                break
            top = max(top, batch.leader_epoch)
    return found


def leader_lacks_its_epoch(lineages: Any, leader: int, leader_epoch: int | None) -> str | None:
    """Where the partition's leader does not hold the epoch it leads in as its leader-epoch-
    checkpoint's last entry. A leader caches every new leader epoch it is given, records or
    not, and writes the file before it serves (Partition.makeLeader, "we must cache the new
    leader epoch", from 2.1, KAFKA-7415): a follower holding a later epoch than any batch of
    the leader's truncates to the right offset only by it. KAFKA-20961: a replica swapped
    in from another log dir rebuilt its cache from the batches alone and lost the empty
    epochs; its followers then loop on OffsetOutOfRange (KAFKA-15608)."""
    lin = next((x for x in lineages if x.broker_id == leader), None)
    if lin is None or leader_epoch is None or lin.checkpointed_epoch_starts is None:
        return None
    cached = lin.checkpointed_epoch_starts
    if cached and cached[-1][0] >= leader_epoch:
        return None  # later than the state history's last look: that look was stale
    held = ", ".join(f"{e} from {s}" for e, s in cached) or "nothing"
    return (
        f"leader {leader} leads in epoch {leader_epoch}, and its leader-epoch-checkpoint holds "
        f"{held}"
    )


def metadata_divergence(*inputs: Path) -> str | None:
    """KRaft: the metadata log as every controller and broker holds it (copied with the
    schedule's evidence) must agree wherever two copies overlap: each voter's log is the
    quorum's up to what it committed, and each broker applied a prefix of it (KIP-595).
    What the audit says where they do not, or None. `inputs`: run dirs, or the nodes' log
    dirs holding the metadata log."""
    run = execute(plan_audit(list(inputs), METADATA_TOPICS[0]), Protocol.DIVERGING_EPOCH)
    for v in run.result.partitions:
        if v.topic == METADATA_TOPICS[0] and v.status == "diverged":
            return f"replicas {v.replicas} of the metadata log diverged at offset {v.diverged_at}"
    return None


def quorum_violations(
    copies: dict[str, MetadataLog], leader: str, voters: dict[int, str] | None
) -> str | None:
    """KRaft: what the quorum's own invariants say of the metadata log's copies (every
    controller's and broker's, by node), as Kafka's Raft simulation checks them
    (RaftEventSimulationTest): one leader per epoch across every copy, and epochs that never
    go back within one; and in a dynamic quorum (`voters`: the voters the schedule's steps
    made, by id with their directory ids) the voter set the quorum leader's copy (`leader`)
    records last is that one (KIP-853: no removed voter votes, no added voter is missing).
    The first violation found, in words, or None."""
    led: dict[int, tuple[int, str]] = {}  # epoch -> (leader, the copy that says so)
    for name, log in sorted(copies.items()):
        top = -1
        for change in log.leader_changes:
            if change.raft_epoch < top:
                return (
                    f"{name}'s metadata log has epoch {change.raft_epoch} after epoch {top} "
                    f"(offset {change.offset})"
                )
            top = change.raft_epoch
            seen = led.setdefault(change.raft_epoch, (change.leader_id, name))
            if seen[0] != change.leader_id:
                return (
                    f"epoch {change.raft_epoch} has two leaders: {seen[0]} in {seen[1]}'s "
                    f"metadata log, {change.leader_id} in {name}'s"
                )
    if voters is None:
        return None
    sets = copies[leader].voter_sets
    if not sets:
        return f"the quorum leader {leader}'s metadata log records no voter set"
    recorded = {v.voter_id: v.directory_id for v in sets[-1].voters}
    if recorded != voters:
        return (
            f"the voter set {leader}'s metadata log records last (offset {sets[-1].offset}) is "
            f"{_voters(recorded)}, and the schedule's steps made {_voters(voters)}"
        )
    return None


def _voters(voters: dict[int, str]) -> str:
    return ", ".join(f"{v} ({d})" for v, d in sorted(voters.items())) or "none"
