"""Transactions and idempotent writes of one partition, judged from its replicas' disks.

A transactional producer's data is closed by a control batch of its producer id: the COMMIT
or ABORT marker its coordinator writes (KIP-98; EndTransactionMarker, whose key is version
int16 + type int16). Three findings, each a bug whatever fault was injected:

- hanging: data of a producer after its last marker on a replica and older than the longest
  transaction timeout. The coordinator aborts a transaction once its timeout has passed, so
  data still open then never got its marker on that replica: its last stable offset is
  stuck and read_committed consumers stall (KIP-664, "hanging transactions").
- torn: one transaction (producer id, marker offset) committed on one replica and aborted on
  another.
- duplicate sequence: one write (producer id, epoch, base sequence) appended twice to one
  replica, which idempotence exists to prevent (KIP-98: the leader answers a retry of an
  appended batch with DUPLICATE_SEQUENCE_NUMBER and the first copy's offset).

Transactions are tracked per producer id, not per epoch, as Kafka's producer state does
(ProducerStateEntry.currentTxnFirstOffset): a transaction aborted after its producer was
fenced or timed out gets a marker with the bumped epoch, and from KIP-890's transactions v2
every marker carries the epoch after its data's.

What the log cleaner does stays healthy here: it drops an ABORT marker only once no batch of
its transaction is left, a COMMIT marker only in a pass that met no batch of it
(LogCleaner's CleanedTransactionMetadata.onControlBatchRead), and may leave a control batch
empty. So a marker may stand alone, but data never outlives its marker; nor does retention,
which deletes from the log start and so removes data before its marker.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from checkers.compaction import ABORT, COMMIT, marker_type
from checkers.coordinator_log import Decision, PartitionDecisions
from checkers.lineage import Lineage
from checkers.recordlog import ReplicaLog
from checkers.records import Batch

# transaction.max.timeout.ms defaults to 15 minutes: TRANSACTIONS_MAX_TIMEOUT_MS_DEFAULT =
# TimeUnit.MINUTES.toMillis(15) in Kafka's TransactionStateManagerConfig (transaction-coordinator
# module); InitProducerId refuses a client's transaction.timeout.ms above it.
DEFAULT_TXN_TIMEOUT_MS = 900_000
KINDS = {ABORT: "ABORT", COMMIT: "COMMIT"}


def _plain(obj: Any) -> dict[str, Any]:
    return {
        f.name: list(v) if isinstance(v := getattr(obj, f.name), tuple) else v for f in fields(obj)
    }


@dataclass(frozen=True)
class HangingTransaction:
    """A transaction still open on `brokers` though older than the transaction timeout."""

    producer_id: int
    producer_epoch: int
    first_offset: int  # base offset of its first data batch
    timestamp_ms: int  # that batch's max timestamp
    age_ms: int  # how far before the reference time
    brokers: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True)
class TornTransaction:
    """A transaction whose marker is a COMMIT on some replicas and an ABORT on others, or
    whose markers are not of the kind its coordinator logged (`checkers.coordinator_log`)."""

    producer_id: int
    first_offset: int  # its first data offset on any replica; the marker's if none is known
    marker_offset: int
    kinds: tuple[tuple[int, str], ...]  # (broker, "COMMIT" or "ABORT")
    coordinator: str | None = None  # the kind the coordinator completed, where it is known
    transactional_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = _plain(self)
        out["kinds"] = [{"broker": b, "kind": k} for b, k in self.kinds]
        return out


@dataclass(frozen=True)
class DuplicateSequence:
    """One producer's write found at several offsets of one replica."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    first_offset: int  # the first copy's base offset
    offsets: tuple[int, ...]  # every copy's base offset
    broker: int

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True)
class TransactionFindings:
    hanging: list[HangingTransaction] = field(default_factory=list)
    torn: list[TornTransaction] = field(default_factory=list)
    duplicates: list[DuplicateSequence] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return bool(self.hanging or self.torn or self.duplicates)

    def to_dict(self) -> dict[str, Any]:
        return {
            "hanging_transactions": [x.to_dict() for x in self.hanging],
            "torn_transactions": [x.to_dict() for x in self.torn],
            "duplicate_sequences": [x.to_dict() for x in self.duplicates],
        }


@dataclass
class _Replica:
    """What one replica's batches say of its producers."""

    lineage: Lineage
    open: dict[int, Batch] = field(default_factory=dict)  # producer -> first open data batch
    # marker offset -> (producer, epoch, kind); kind None when the batch is empty or does not
    # decode
    markers: dict[int, tuple[int, int, str | None]] = field(default_factory=dict)
    # (producer, epoch) -> the kinds of its markers
    kinds_of: dict[tuple[int, int], set[str | None]] = field(default_factory=dict)
    last_marker: dict[int, int] = field(default_factory=dict)  # producer -> its last marker
    firsts: dict[int, int] = field(default_factory=dict)  # marker -> first data offset it ends
    duplicates: list[DuplicateSequence] = field(default_factory=list)

    @property
    def broker(self) -> int:
        return self.lineage.broker_id


def _marker_kind(log: ReplicaLog, batch: Batch) -> str | None:
    if not batch.crc_valid:
        return None
    found = log.batch(batch)
    if isinstance(found, str) or not found:
        return None  # the cleaner may leave a control batch empty (onControlBatchRead)
    kind = marker_type(next(iter(found.values())))
    return KINDS.get(kind) if kind is not None else None


def _scan(lineage: Lineage) -> _Replica:
    rep = _Replica(lineage)
    copies: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    log = ReplicaLog(lineage)
    try:
        for b in lineage.batches:
            pid = b.producer_id
            if pid < 0:
                continue  # no producer id: not idempotent (v0/v1, or a plain v2 producer)
            if b.is_control:
                first = rep.open.pop(pid, None)
                if first is not None:
                    rep.firsts[b.base_offset] = first.base_offset
                kind = _marker_kind(log, b)
                rep.markers[b.base_offset] = (pid, b.producer_epoch, kind)
                rep.kinds_of.setdefault((pid, b.producer_epoch), set()).add(kind)
                rep.last_marker[pid] = b.base_offset
                continue
            if b.is_transactional:
                rep.open.setdefault(pid, b)
            if b.base_sequence >= 0:
                copies[(pid, b.producer_epoch, b.base_sequence)].append(b.base_offset)
    finally:
        log.close()
    # A sequence wraps to 0 after 2**31 - 1 (DefaultRecordBatch.incrementSequence); no test
    # writes that many batches under one epoch, so a repeat is a write appended twice.
    for (pid, epoch, seq), offsets in copies.items():
        distinct = tuple(sorted(set(offsets)))
        if len(distinct) > 1:
            rep.duplicates.append(
                DuplicateSequence(pid, epoch, seq, distinct[0], distinct, rep.broker)
            )
    return rep


def _lags_behind_marker(rep: _Replica, others: Sequence[_Replica], first: Batch) -> bool:
    """Whether another replica holds a marker of the producer past `first` where `rep`'s log
    has not reached yet: `rep` lags (a stopped broker, a slow follower), nothing hangs."""
    reach = max(rep.lineage.leo, first.base_offset + 1)
    return any(o.last_marker.get(first.producer_id, -1) >= reach for o in others)


def _hanging(
    replicas: list[_Replica], reference_ms: int, timeout_ms: int
) -> list[HangingTransaction]:
    found: dict[tuple[int, int], list[Batch]] = defaultdict(list)
    brokers: dict[tuple[int, int], list[int]] = defaultdict(list)
    for rep in replicas:
        others = [o for o in replicas if o is not rep]
        for pid, first in rep.open.items():
            # Younger than the timeout it may simply be in flight.
            if first.max_timestamp >= reference_ms - timeout_ms:
                continue
            if _lags_behind_marker(rep, others, first):
                continue
            found[(pid, first.base_offset)].append(first)
            brokers[(pid, first.base_offset)].append(rep.broker)
    out = []
    for (pid, offset), firsts in sorted(found.items()):
        stamp = min(b.max_timestamp for b in firsts)
        out.append(
            HangingTransaction(
                pid,
                firsts[0].producer_epoch,
                offset,
                stamp,
                reference_ms - stamp,
                tuple(sorted(brokers[(pid, offset)])),
            )
        )
    return out


def _against_coordinator(
    rep: _Replica, pid: int, epoch: int, decisions: PartitionDecisions
) -> Decision | None:
    """The coordinator's decision when this replica's markers of the transaction's producer
    and epoch are all of one kind, and not the decided one. (One kind only: in transactions
    v1 several transactions share an epoch, and a coordinator log that lost one of them to
    an unclean election would pair its marker with another.)"""
    decision = decisions.get((pid, epoch))
    if decision is None:
        return None
    kinds = rep.kinds_of[(pid, epoch)]
    return decision if len(kinds) == 1 and decision.kind not in kinds | {None} else None


def _torn(replicas: list[_Replica], decisions: PartitionDecisions) -> list[TornTransaction]:
    kinds: dict[tuple[int, int], dict[int, str]] = defaultdict(dict)
    firsts: dict[tuple[int, int], list[int]] = defaultdict(list)
    disagree: dict[tuple[int, int], Decision] = {}
    for rep in replicas:
        for offset, (pid, epoch, kind) in rep.markers.items():
            if kind is not None:
                kinds[(pid, offset)][rep.broker] = kind
                decision = _against_coordinator(rep, pid, epoch, decisions)
                if decision is not None:
                    disagree[(pid, offset)] = decision
            if offset in rep.firsts:
                firsts[(pid, offset)].append(rep.firsts[offset])
        for txn in rep.lineage.aborted:
            key = (txn.producer_id, txn.last_offset)
            firsts[key].append(txn.first_offset)
            # The .txnindex entry (KIP-98) still says ABORT where the cleaner removed the
            # marker; where the replica holds a batch at that offset, the batch speaks.
            if rep.lineage.batch_containing(txn.last_offset) is None:
                kinds[key].setdefault(rep.broker, KINDS[ABORT])
    out = []
    for (pid, offset), by_broker in sorted(kinds.items()):
        decision = disagree.get((pid, offset))
        if len(set(by_broker.values())) > 1 or decision is not None:
            first = min(firsts.get((pid, offset)) or [offset])
            out.append(
                TornTransaction(
                    pid,
                    first,
                    offset,
                    tuple(sorted(by_broker.items())),
                    None if decision is None else decision.kind,
                    None if decision is None else decision.transactional_id,
                )
            )
    return out


def judge_transactions(
    lineages: Sequence[Lineage],
    *,
    txn_timeout_ms: int = DEFAULT_TXN_TIMEOUT_MS,
    reference_ms: int | None = None,
    decisions: PartitionDecisions | None = None,
) -> TransactionFindings:
    """Hanging and torn transactions and duplicate sequences among one partition's replicas;
    `decisions`: what the transaction coordinator completed for this partition, by producer
    id and epoch (`checkers.coordinator_log`).

    `reference_ms` is the time open transactions are aged against: the newest timestamp of
    the audit, or now; by default the newest batch timestamp of the partition, so a cluster
    stopped with a transaction in flight and audited later is not judged by the wall clock.
    """
    replicas = [_scan(lin) for lin in lineages]
    if reference_ms is None:
        stamps = (b.max_timestamp for lin in lineages for b in lin.batches)
        reference_ms = max(stamps, default=None)
    hanging = [] if reference_ms is None else _hanging(replicas, reference_ms, txn_timeout_ms)
    duplicates = sorted(
        (d for rep in replicas for d in rep.duplicates), key=lambda d: (d.broker, d.first_offset)
    )
    return TransactionFindings(hanging, _torn(replicas, decisions or {}), duplicates)
