"""The invariants a schedule is judged by, once everything is healed and the cluster had
time to converge. Pure: it reads what the run observed (convergence, the audit of the logs
on disk, the history check of acknowledged writes, the partition's state history, what
each power loss dropped) and says which invariant failed, where, and by which rule.

Per partition, in this order:

0. What a step saw or the heal left, whatever the audit says: a replica re-created beside
   its offline log dir (KAFKA-16234); a leader epoch cache that lost an epoch (a replica
   swapped in from another log dir lacks one its predecessor cached, or the leader lacks
   the one it leads in, which every leader caches from 2.1, KAFKA-7415; KAFKA-20961's swap
   drops the epochs that hold no records); a broker a reassignment removed still holding
   the replica under its own name (a stray: KAFKA-13127).
1. A follower that cannot make progress after the heal is "stuck": the replicas did not
   converge and nothing changed for the stall time; its log says why, where it does
   (KAFKA-6361, n < 20: the fetcher thread dies on out-of-order offsets before 2.3; a
   broker halted rather than truncate). A partition that converged is not stuck, whatever
   its followers logged on the way (from 2.3 a partition marked failed resumes with its
   next leader change, KIP-461). A follower that converged but keeps resetting its fetch
   to the offset it stands at loops on OffsetOutOfRange (KAFKA-20961).
2. KRaft: the metadata log's copies (every voter's, every broker's) agree wherever they
   overlap (KIP-595); a replica's leader epochs never go backwards on its disk; and the
   controller elects only unfenced brokers: no metadata record names a new
   leader that the log has fenced, or not registered, at that offset (KAFKA-19522, 4.0.x:
   a fenced last known leader elected under KIP-966).
3. Replicas converge: no divergence on disk.
4. Transactions: none hangs: once every transaction had time to end (its timeout, and the
   coordinator's abort scan), none is open on a replica's disk and the last stable offset
   clients are given reaches the high watermark (KAFKA-20716: an unclean election that drops
   a marker). The two readings must agree; where they do not, the partition is not judged.
   And no transaction is torn, across replicas (COMMIT on one, ABORT on another) or
   against what its coordinator completed in __transaction_state, no idempotent write
   appended twice (checkers.transactions).
5. A read_committed consumer, once transactions ended, reads no aborted record, every
   committed transaction whole, nothing past the last stable offset and in offset order; a
   read_uncommitted one nothing past the high watermark, in offset order
   (checkers.txn_reads) -- unless the loss rules below allow losing data, which may take a
   marker with it. A committed write never read is 6's, as an acknowledged write.
6. No acknowledged acks=all write is lost, unless a rule allows it:
   - an unclean election, where the topic enables them, may lose acknowledged writes;
   - power loss (KIP-966): in ZooKeeper mode and in KRaft before 4.1 no broker handles an
     unclean shutdown, so a replica that lost its unflushed tail rejoins the ISR and may
     lead: a loss of writes only unflushed tails held is "last replica standing",
     allowed. KRaft from 4.1 (eligible leader replicas on for new clusters) removes a
     broker restarted after an unclean shutdown from the ISR and ELR (KAFKA-15586,
     KAFKA-18635): a loss is then a finding unless the state history shows an unclean or
     last-known-leader election (leader recovery state RECOVERING).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from basics.protocol import RecoveryState
from basics.releases import Release
from runrecord.outcome import (
    CONSISTENT,
    POWER_LOST_MARKER,
    SKIPPED_MARKER,
    Outcome,
    Symptom,
    high_watermark_clause,
)
from runrecord.outcome import hang_cause as cause_of_hang
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
    QUORUM_BROKEN,
    RECREATED,
    STUCK,
    TORN,
    UNJUDGED,
    Judgement,
)

SCHEDULE_PARTITION = 0  # the partition the schedule's steps write to; the model's
BACKGROUND_PARTITION = 1  # the background workload's

# Findings in a broker's or controller's own code (a log-dir move, a reassignment's
# cleanup, the metadata log, the fetcher's reset) that the replication model does not
# follow, so it never predicts them: the model is compared with what the brokers showed
# besides (`beside_model`), never counted wrong for them.
BESIDE_MODEL = (
    RECREATED, EPOCH_CACHE_LOST, LEFT_BEHIND, FETCH_LOOP, METADATA_DIVERGED, EPOCH_REGRESSION,
    FENCED_LEADER, QUORUM_BROKEN,
)  # fmt: skip


@dataclass(frozen=True)
class StateSeen:
    """One observed state of a partition (observe.state.PartitionState, in short)."""

    leader: int
    isr: tuple[int, ...]
    recovery_state: RecoveryState = RecoveryState.RECOVERED


@dataclass
class Observed:
    """What a run observed of one partition after the heal."""

    converged: bool
    # The disk audit's status (None: it gave none, and `unjudged` says why).
    audit_status: str | None
    stuck_lines: dict[int, str] = field(default_factory=dict)  # broker -> log line
    stalled: bool = False
    isr: list[int] = field(default_factory=list)
    log_end_offsets: dict[int, int] = field(default_factory=dict)
    unjudged: str = ""  # why the partition cannot be judged: no audit verdict, an audit error
    diverged_at: int | None = None
    below_high_watermark: bool = False
    durable_lost: list[int] = field(default_factory=list)  # offsets of lost acks=all writes
    dropped: list[tuple[int, int]] = field(default_factory=list)  # power loss [from, to)
    states: list[StateSeen] = field(default_factory=list)
    # KRaft: (metadata log offset, broker) of each leader elected while fenced
    fenced_leaders: list[tuple[int, int]] = field(default_factory=list)
    epoch_regressions: list[str] = field(default_factory=list)  # a replica's epochs going back
    metadata_diverged: str | None = None  # KRaft: the metadata log's copies disagree
    quorum_broken: str | None = None  # KRaft: checkers.schedules.invariants.quorum_violations
    # Transactions open on a replica's disk past their timeout (first offsets), and what
    # clients saw of the schedule's partition once every transaction had time to end (its
    # last stable offset below its high watermark: `stable_stuck`); None: not asked.
    hanging: list[int] = field(default_factory=list)
    # A coordinator's log line skipping the partition's marker (suites.broker_logs).
    skipped_marker: str | None = None
    torn: list[int] = field(default_factory=list)  # marker offsets of torn transactions
    duplicates: list[int] = field(default_factory=list)  # first offsets of writes appended twice
    stable: str | None = None
    stable_stuck: bool | None = None
    # A broker re-created its replica of an offline log dir in another of its dirs (what
    # the fail-dir step saw, in words).
    recreated: list[str] = field(default_factory=list)
    # Followers that kept resetting their fetch to the offset they stood at once the
    # replicas converged: broker -> its log line (suites.explore.engine.fetch_loop).
    fetch_loops: dict[int, str] = field(default_factory=dict)
    # Brokers a reassignment removed that still hold the replica under its own name after
    # the heal: broker -> its path (suites.explore.engine.left_behind).
    left_behind: dict[int, str] = field(default_factory=dict)
    # A leader epoch cache that lost an epoch: one a log-dir swap dropped (seen at the
    # move-dir step), or the leader's lacking the epoch it leads in (after the heal).
    epoch_cache_lost: str | None = None
    # What consumers read of the schedule's partition that they must not have
    # (checkers.txn_reads): (kind, offset, detail, which names the reader's isolation).
    read_anomalies: list[tuple[str, int, str]] = field(default_factory=list)


def unclean_elections(states: Sequence[StateSeen]) -> int:
    """Leaders that came from outside the ISR before them (the controller's unclean
    election), as the state history shows them."""
    count = 0
    for before, after in itertools.pairwise(states):
        new = after.leader
        if new >= 0 and new != before.leader and new not in before.isr:
            count += 1
    return count


def recovering(states: Sequence[StateSeen]) -> bool:
    """An unclean or last-known-leader election in KRaft marks the partition RECOVERING
    (KIP-704)."""
    return any(s.recovery_state == RecoveryState.RECOVERING for s in states)


def elr_on(release: Release, mode: str) -> bool:
    """Eligible leader replicas (KIP-966) are on for new KRaft clusters from 4.1."""
    return mode == "kraft" and release.at_least(4, 1)


def loss_rule(
    seen: Observed,
    *,
    release: Release,
    mode: str,
    unclean_enabled: bool,
    flush_every_message: bool = False,
) -> tuple[bool, str]:
    """Whether the partition's lost acks=all writes are allowed, and the rule that says so.
    `flush_every_message`: the topic sets flush.messages=1."""
    lost = seen.durable_lost
    if unclean_enabled and unclean_elections(seen.states):
        return True, (
            "unclean election: the topic enables unclean.leader.election.enable and the "
            "state history shows a leader elected from outside the ISR, which may lose "
            "acknowledged writes"
        )
    dropped = [off for off in lost if any(lo <= off < hi for lo, hi in seen.dropped)]
    if flush_every_message and dropped:
        # A replica appends, then flushes, before it fetches again (UnifiedLog's flush on
        # flush.messages), and the high watermark passes a write only once every ISR
        # member fetched past it: whichever replica an election chose had it on disk.
        return False, (
            "flush.messages=1: every replica in the ISR fsynced each write before it was "
            "acknowledged, so no election explains losing one; the disks lost fsynced "
            f"writes (offsets {dropped[0]}..{dropped[-1]} in tails power losses dropped)"
        )
    if seen.dropped:
        if elr_on(release, mode):
            if unclean_elections(seen.states) or recovering(seen.states):
                return True, (
                    "KIP-966 (KRaft 4.1+, eligible leader replicas on): a broker restarted "
                    "after an unclean shutdown leaves the ISR and ELR (KAFKA-15586, "
                    "KAFKA-18635); the state history shows an unclean or last-known-leader "
                    "election, which may lose acknowledged writes"
                )
            return False, (
                "KIP-966 (KRaft 4.1+, eligible leader replicas on): a broker restarted after "
                "an unclean shutdown leaves the ISR and ELR (KAFKA-15586, KAFKA-18635), and "
                "the state history shows no unclean or last-known-leader election, so no "
                "acknowledged acks=all write may be lost to a power loss"
            )
        where = "ZooKeeper mode" if mode == "zk" else f"KRaft {release} (before 4.1)"
        if all(any(lo <= off < hi for lo, hi in seen.dropped) for off in lost):
            return True, (
                f"last replica standing: {where} has no unclean-shutdown handling (KIP-966 "
                "acts from KRaft 4.1), so a replica that lost its unflushed tail to a power "
                "loss rejoins the ISR and may lead; the lost writes were all in tails a "
                "power loss dropped"
            )
        return False, (
            f"last replica standing ({where}) allows losing only writes a power loss "
            "dropped; these were not all in a dropped tail"
        )
    return False, "unclean elections disabled: no acknowledged acks=all write may be lost"


def judge_partition(
    seen: Observed,
    *,
    release: Release,
    mode: str,
    unclean_enabled: bool,
    flush_every_message: bool = False,
) -> tuple[str | None, str, str | None]:
    """(finding kind or None, one line, the loss rule that decided, if one did)."""
    if seen.recreated:
        # Seen while the dir was offline, before the heal: no audit needed. It comes first,
        # as the cause of what follows: the broker holds two copies once the disk is back,
        # which 3.7.0 refuses to start with, and the audit cannot judge.
        return RECREATED, "; ".join(seen.recreated), None
    if seen.epoch_cache_lost:
        # The cause of a fetch loop, and unlike the loop, on disk whatever the timing.
        return (
            EPOCH_CACHE_LOST,
            f"a replica's leader epoch cache lost an epoch: {seen.epoch_cache_lost}",
            None,
        )
    if seen.left_behind:
        said = "; ".join(f"broker {b}: {path}" for b, path in sorted(seen.left_behind.items()))
        return (
            LEFT_BEHIND,
            f"a replica a reassignment removed is still current on its broker ({said})",
            None,
        )
    if not seen.converged and (seen.stuck_lines or seen.stalled):
        if seen.stuck_lines:
            b, line = sorted(seen.stuck_lines.items())[0]
            why = f"broker {b}'s log: {line}"
        else:
            why = (
                f"nothing changed for the stall time: ISR {seen.isr}, log end offsets "
                f"{seen.log_end_offsets}"
            )
        return STUCK, f"a follower cannot make progress after the heal ({why})", None
    if seen.fetch_loops:
        b, line = sorted(seen.fetch_loops.items())[0]
        return (
            FETCH_LOOP,
            f"a follower loops on OffsetOutOfRange after the heal, making no progress until "
            f"new writes arrive (broker {b}'s log: {line})",
            None,
        )
    if seen.audit_status is None or seen.unjudged:
        return UNJUDGED, f"not judged: {seen.unjudged or 'the disk audit gave no verdict'}", None
    if seen.metadata_diverged:
        return METADATA_DIVERGED, seen.metadata_diverged, None
    if seen.quorum_broken:
        return QUORUM_BROKEN, f"the controller quorum: {seen.quorum_broken}", None
    if seen.epoch_regressions:
        return (
            EPOCH_REGRESSION,
            "a replica's leader epochs go backwards on disk: " + "; ".join(seen.epoch_regressions),
            None,
        )
    if seen.fenced_leaders:
        said = ", ".join(f"broker {b} at offset {o}" for o, b in seen.fenced_leaders)
        return (
            FENCED_LEADER,
            f"the controller elected a fenced broker as leader ({said} of the metadata log)",
            None,
        )
    if seen.audit_status == "diverged":
        where = high_watermark_clause(seen.below_high_watermark)
        return DIVERGED, f"replicas diverged at offset {seen.diverged_at} ({where})", None
    allowed, rule = loss_rule(
        seen,
        release=release,
        mode=mode,
        unclean_enabled=unclean_enabled,
        flush_every_message=flush_every_message,
    )
    excused = ""  # what the loss rule allows (a marker, a read anomaly), said after the losses
    if seen.hanging or seen.stable_stuck:
        if seen.stable_stuck is not None and bool(seen.hanging) != seen.stable_stuck:
            # One of the two readings is wrong, and it is logfork's: no verdict on it.
            return (
                UNJUDGED,
                f"not judged: clients see {seen.stable}, while the disk audit found "
                f"{seen.hanging or 'no'} hanging transaction(s)",
                None,
            )
        said = f" ({seen.stable})" if seen.stable else ""
        cause = hang_cause(seen)
        hangs = f"a transaction hangs from offset {seen.hanging[0]}{said}"
        if cause == SKIPPED_MARKER:
            why = (
                "its coordinator skipped the partition's marker, finding no leader for it "
                f"(KAFKA-20734; {seen.skipped_marker})"
            )
        elif cause == POWER_LOST_MARKER:
            why = (
                "a power loss dropped the partition's tail past its start "
                f"({seen.dropped}), its marker with it, and no replica holds one"
            )
        else:
            why = "no coordinator logged skipping its marker, and no replica holds one"
        if cause == POWER_LOST_MARKER and allowed:
            # The marker is one more write of the dropped tails the rule allows losing (the
            # coordinator appends it with acks=all, KafkaApis.handleWriteTxnMarkersRequest:
            # every ISR member lost it); losing it leaves the transaction open instead.
            excused = f"; {hangs} ({why}), allowed: {rule}"
        else:
            return (
                HANGING,
                f"{hangs}: open on disk past its timeout, with no marker after it, so "
                f"read_committed consumers stop there for good; {why}",
                None,
            )
    if seen.torn:
        return (
            TORN,
            f"a transaction's markers disagree, across replicas or with what its coordinator "
            f"completed (the marker at offset {seen.torn[0]})",
            None,
        )
    if seen.duplicates:
        return (
            DUPLICATE,
            f"an idempotent write appended twice to a replica (first at {seen.duplicates[0]})",
            None,
        )
    if seen.read_anomalies:
        kind, offset, detail = seen.read_anomalies[0]
        read = f"what a consumer read: {kind} at offset {offset} ({detail})"
        if not allowed:  # what an unclean election or a power loss may do to a marker
            return kind, read, None
        excused += f"; {read}, allowed: {rule}"
    if seen.durable_lost:
        lost = f"{len(seen.durable_lost)} acknowledged acks=all write(s) lost"
        if not allowed:
            return LOST, f"{lost} (offsets {seen.durable_lost[:10]}): {rule}", rule
        return None, f"replicas converged; {lost}, allowed: {rule}{excused}", rule
    said = f"replicas converged; no acknowledged acks=all write lost{excused}"
    return None, said, rule if excused else None


def beside_model(seen: Observed) -> Observed:
    """What the run observed, without the findings of `BESIDE_MODEL`."""
    return replace(
        seen,
        recreated=[],
        epoch_cache_lost=None,
        left_behind={},
        fetch_loops={},
        metadata_diverged=None,
        quorum_broken=None,
        epoch_regressions=[],
        fenced_leaders=[],
    )


def hang_cause(seen: Observed) -> str:
    """Why the partition's transaction hangs, as far as the run can tell
    (runrecord.outcome.hang_cause): a coordinator logged skipping its marker (KAFKA-20734),
    a power loss dropped the tail past its start, or else no replica holds the marker (an
    unclean election dropped it, KAFKA-20716; or a cause logfork does not know)."""
    return cause_of_hang(bool(seen.skipped_marker), seen.hanging[0], seen.dropped)


def judge(
    partitions: Mapping[int, Observed],
    *,
    release: Release,
    mode: str,
    unclean_enabled: bool,
    flush_every_message: bool = False,
    exited: Mapping[int, str] | None = None,
) -> Judgement:
    """The schedule's judgement: its own partition's finding first, then the background
    partition's (its kind carries BACKGROUND)."""
    kinds: dict[int, str | None] = {}
    lines: dict[int, str] = {}
    rules: dict[int, str | None] = {}
    for p, seen in sorted(partitions.items()):
        kinds[p], lines[p], rules[p] = judge_partition(
            seen,
            release=release,
            mode=mode,
            unclean_enabled=unclean_enabled,
            flush_every_message=flush_every_message,
        )
    modelled = {
        p: judge_partition(
            beside_model(partitions[p]),
            release=release,
            mode=mode,
            unclean_enabled=unclean_enabled,
            flush_every_message=flush_every_message,
        )[0]
        for p in kinds
        if kinds[p] in BESIDE_MODEL
    }
    evidence: dict[str, Any] = {"partitions": {str(p): _evidence(s) for p, s in partitions.items()}}
    if exited:
        evidence["exited"] = {str(b): why for b, why in exited.items()}
    for p in sorted(kinds, key=lambda x: x != SCHEDULE_PARTITION):
        if kinds[p] not in (None, UNJUDGED):
            failure = kinds[p] if p == SCHEDULE_PARTITION else f"{kinds[p]}{BACKGROUND}"
            where = "" if p == SCHEDULE_PARTITION else " (the background workload's partition)"
            cause = hang_cause(partitions[p]) if kinds[p] == HANGING else ""
            return Judgement(
                failure,
                f"partition {p}{where}: {lines[p]}",
                p,
                rules[p],
                evidence,
                kinds,
                cause=cause,
                modelled=modelled,
            )
    rule = next((r for r in rules.values() if r), None)
    summary = "; ".join(f"partition {p}: {lines[p]}" for p in sorted(lines))
    unjudged = "; ".join(f"partition {p}: {lines[p]}" for p in sorted(kinds)
                         if kinds[p] == UNJUDGED)  # fmt: skip
    if unjudged:
        summary = f"not reached: {unjudged}"
    return Judgement(None, summary, None, rule, evidence, kinds, unjudged, modelled=modelled)


def _evidence(seen: Observed) -> dict[str, Any]:
    return {
        "converged": seen.converged,
        "stalled": seen.stalled,
        "stuck": {str(b): line for b, line in seen.stuck_lines.items()},
        "isr": seen.isr,
        "log_end_offsets": {str(b): v for b, v in seen.log_end_offsets.items()},
        "audit": seen.audit_status,
        "unjudged": seen.unjudged,
        "diverged_at": seen.diverged_at,
        "durable_lost": seen.durable_lost[:100],
        "dropped_by_power_loss": [list(r) for r in seen.dropped],
        "fenced_leaders": [list(x) for x in seen.fenced_leaders],
        "epoch_regressions": seen.epoch_regressions,
        "metadata_diverged": seen.metadata_diverged,
        "quorum_broken": seen.quorum_broken,
        "hanging": seen.hanging,
        "skipped_marker": seen.skipped_marker,
        "torn": seen.torn,
        "duplicates": seen.duplicates,
        "recreated": seen.recreated,
        "epoch_cache_lost": seen.epoch_cache_lost,
        "left_behind": {str(b): path for b, path in seen.left_behind.items()},
        "fetch_loops": {str(b): line for b, line in seen.fetch_loops.items()},
        "stable": seen.stable,
        "read_anomalies": [list(a) for a in seen.read_anomalies[:20]],
        "unclean_elections": unclean_elections(seen.states),
        "recovering": recovering(seen.states),
    }


def observed_symptom(judgement: Judgement) -> Symptom:
    """What the brokers showed, as a symptom: the finding's kind (a background partition's
    carries BACKGROUND) and where, or consistency."""
    if judgement.failure is None:
        return Symptom(CONSISTENT)
    seen = judgement.evidence.get("partitions", {}).get(str(judgement.partition), {})
    if judgement.failure == DIVERGED:
        return Symptom(DIVERGED, seen.get("diverged_at"))
    if judgement.failure == LOST:
        lost = seen.get("durable_lost") or [None]
        return Symptom(LOST, lost[0])
    if judgement.failure == HANGING:
        return Symptom(HANGING, (seen.get("hanging") or [None])[0])
    if judgement.failure == STUCK:
        return Symptom(STUCK, replicas=sorted(int(b) for b in seen.get("stuck", {})) or None)
    if judgement.failure == FETCH_LOOP:
        loops = seen.get("fetch_loops", {})
        return Symptom(FETCH_LOOP, replicas=sorted(int(b) for b in loops) or None)
    if judgement.failure == LEFT_BEHIND:
        strays = seen.get("left_behind", {})
        return Symptom(LEFT_BEHIND, replicas=sorted(int(b) for b in strays) or None)
    if judgement.failure == RECREATED:
        brokers = sorted({int(line.split()[1]) for line in seen.get("recreated", [])})
        return Symptom(RECREATED, replicas=brokers or None)
    return Symptom(judgement.failure)


def schedule_outcome(judgement: Judgement, expected: Symptom | None) -> tuple[Outcome, Outcome]:
    """(outcome, expected outcome) of a judged schedule. Without a declared symptom every
    invariant must hold; with one (the schedule's `expect`), "reproduced" means exactly
    that symptom, and any other finding is "diverged"."""
    if judgement.unjudged and judgement.failure is None:
        return Outcome.NOT_REACHED, Outcome.CONSISTENT
    wanted = Outcome.CONSISTENT
    if expected is not None and expected.kind != CONSISTENT:
        wanted = Outcome.REPRODUCED
    if judgement.failure is None:
        return Outcome.CONSISTENT, wanted
    if expected is not None and expected.matches(observed_symptom(judgement)):
        return Outcome.REPRODUCED, wanted
    return Outcome.DIVERGED, wanted
