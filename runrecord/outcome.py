"""The outcome of a run: one type for the scenarios, the verdicts, the reports and the index."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    CONSISTENT = "consistent"  # replicas agree and no acknowledged write was lost
    REPRODUCED = "reproduced"  # the known bug showed, on a release before its fix
    DEPARTS = "departs"  # the release departs from the KIP's text, as logfork documents
    DIVERGED = "diverged"  # replicas diverged or data was lost where the release should not
    NOT_REACHED = "not-reached"  # the scenario could not create the state it needs
    NOT_APPLICABLE = "not-applicable"  # the release or mode lacks what the scenario tests
    SETUP_FAILED = "setup-failed"  # the cluster could not start: no engine, no image, ...

    @property
    def has_verdict(self) -> bool:
        """Whether the run judged anything: a run that did not reach its state, does not
        apply, or could not start says nothing either way."""
        return self not in (Outcome.NOT_REACHED, Outcome.NOT_APPLICABLE, Outcome.SETUP_FAILED)

    @property
    def label(self) -> str:
        return self.value.upper().replace("-", " ")


# What the brokers showed, by kind: a run's observed symptom and a scenario's expected one.
CONSISTENT = "consistent"
STUCK = "stuck"  # a follower cannot make progress (KAFKA-6361, n < 20)
DIVERGED = "diverged"  # replicas hold different data at an offset both hold
LOST = "lost-acknowledged"  # an acknowledged acks=all write is gone from the final log
DEPARTS = "departs"  # expected only: the release departs from the KIP's text as documented
VIOLATED = "violated"  # an invariant of a conformance table broke
FENCED_LEADER = "fenced-leader"  # KRaft: the controller elected a fenced broker (KAFKA-19522)
# A transaction left open for good: its data has no marker, so the last stable offset stays
# at its first offset and read_committed consumers stop there (KAFKA-20716).
HANGING = "hanging-transaction"
# What read_committed consumers saw of a transaction (checkers.txn_reads): part of one that
# committed, or a record of one that aborted (KAFKA-17754).
TORN_TRANSACTION = "torn-transaction"
ABORTED_READ = "aborted-read"
# A read_committed consumer handed a record at or past the last stable offset, or one
# partition's records out of offset order (checkers.txn_reads).
PAST_STABLE = "read-past-stable-offset"
PAST_HIGH_WATERMARK = "read-past-high-watermark"  # ... a read_uncommitted consumer, past it
OUT_OF_ORDER = "out-of-order"
# One idempotent write appended twice to a replica (checkers.transactions).
DUPLICATE_SEQUENCE = "duplicate-sequence"
# A broker re-created a replica of its offline log dir in another of its log dirs, which
# KIP-112 rules out while a dir is bad (KAFKA-16234, 3.7.0).
RECREATED = "replica-recreated"
# A follower that, once everything healed, resets its fetch to the offset it stands at
# round after round: OffsetOutOfRange from a leader that cannot place its epoch, until new
# writes arrive (KAFKA-20961).
FETCH_LOOP = "fetch-loop"
# A leader epoch cache lost an epoch: a replica swapped in from another log dir lacks one its
# predecessor cached, or the leader lacks the one it leads in, which every leader caches when
# elected (KAFKA-7415). KAFKA-20961's swap drops empty epochs; a fetch loop follows.
EPOCH_CACHE_LOST = "epoch-cache-lost"
# A broker a reassignment removed still holds the replica under its own name after the heal
# (a broker down at the change must find it a stray when it starts: KAFKA-13127).
LEFT_BEHIND = "replica-left-behind"
# A node that cannot start again on what its disk kept (its storage as the format left it).
UNSTARTABLE = "node-cannot-start"
# Why a transaction hangs, where a run can tell. Several ways end in the same symptom, and
# explore shrinks each cause apart (`finding_key`): the coordinator skipped the partition's
# marker, taking a partition with no leader for deleted (KAFKA-20734, KRaft from 4.3.0); a
# power loss dropped the partition's tail past the transaction's start, its marker with it
# (a loss the rules allow where it left no replica holding the marker); or neither, and no
# replica holds the marker, as when an unclean election drops one only the old leader held
# (KAFKA-20716).
SKIPPED_MARKER = "skipped-marker"
POWER_LOST_MARKER = "power-lost-marker"
LOST_MARKER = "lost-marker"


def hang_cause(skipped: bool, first: int, dropped: Sequence[tuple[int, int]]) -> str:
    """Why the transaction open from offset `first` hangs: a coordinator skipped its marker
    (`skipped`), a power loss dropped a tail [from, to) that began past `first`
    (`dropped`), or its marker was lost otherwise."""
    if skipped:
        return SKIPPED_MARKER
    if any(lo > first for lo, hi in dropped if hi > lo):
        return POWER_LOST_MARKER
    return LOST_MARKER


def finding_key(kind: str | None, cause: str = "") -> str | None:
    """A finding's kind with its cause where one is known: what explore tells findings
    apart by, and what a shrunk schedule must keep failing with."""
    if kind is None or not cause:
        return kind
    return f"{kind} ({cause})"


SYMPTOM_KINDS = (
    CONSISTENT, STUCK, DIVERGED, LOST, DEPARTS, VIOLATED, FENCED_LEADER, HANGING,
    TORN_TRANSACTION, ABORTED_READ, PAST_STABLE, PAST_HIGH_WATERMARK, OUT_OF_ORDER,
    DUPLICATE_SEQUENCE, RECREATED,
    FETCH_LOOP, EPOCH_CACHE_LOST, LEFT_BEHIND, UNSTARTABLE,
)  # fmt: skip


@dataclass(frozen=True)
class Symptom:
    """A bug as the brokers show it: its kind and, where one applies, where. Fields left
    None in an expected symptom accept any value; in an observed one they did not apply."""

    kind: str
    offset: int | None = None
    replicas: list[int] | None = None  # the replicas showing it (the stuck follower, say)
    below_high_watermark: bool | None = None
    # A departure (kind DEPARTS) names the kind the brokers show when they depart.
    shows: str | None = None

    def matches(self, observed: Symptom) -> bool:
        """Whether `observed` is exactly this symptom, where this one says anything."""
        kind = self.shows if self.kind == DEPARTS else self.kind
        if observed.kind != kind:
            return False
        if self.offset is not None and observed.offset != self.offset:
            return False
        if self.replicas is not None and sorted(observed.replicas or []) != sorted(self.replicas):
            return False
        return self.below_high_watermark is None or (
            observed.below_high_watermark == self.below_high_watermark
        )

    def describe(self) -> str:
        """ "diverged at offset 11 (replicas 1, 2; below the high watermark)"."""
        text = self.kind if self.kind != DEPARTS else f"departs ({self.shows})"
        if self.offset is not None:
            text += f" at offset {self.offset}"
        where = []
        if self.replicas:
            where.append(f"replica{'s' if len(self.replicas) > 1 else ''} "
                         + ", ".join(map(str, self.replicas)))  # fmt: skip
        if self.below_high_watermark is not None:
            where.append(high_watermark_clause(self.below_high_watermark))
        return text + (f" ({'; '.join(where)})" if where else "")


@dataclass(frozen=True)
class SymptomPair:
    """verdict.json's `symptom`: what the scenario set out to show beside what showed."""

    expected: Symptom
    observed: Symptom | None  # None: the run reached no verdict


def high_watermark_clause(below: bool, high_watermark: int | None = None) -> str:
    """Whether a divergence lies in committed data, in the words every verdict uses."""
    at = "" if high_watermark is None else f" {high_watermark}"
    if below:
        return f"below the high watermark{at}: committed data differs"
    return f"at or above the high watermark{at}"
