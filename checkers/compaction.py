"""The replicas of a compacted partition, compared as compaction allows them to differ.

Each broker's log cleaner compacts its own replicas on its own schedule, so two healthy
replicas of a compacted partition differ in bytes wherever either has been cleaned. What
the cleaner does to a v2 batch (MemoryRecords.filterTo, 0.11+; LogCleaner / Cleaner):

- It rewrites whole segments up to its cleaned offset, `cleaner-offset-checkpoint`'s
  entry for the partition in that log dir (Cleaner.cleanSegments, doneCleaning).
- A rewritten batch keeps its base offset, its last offset (lastOffsetDelta is kept even
  when the last record goes, `overrideLastOffset`), producer id, epoch and base sequence,
  partition leader epoch and transactional/control flags; it gets a new CRC, length, record
  count and base timestamp. Each kept record keeps its offset, timestamp, key, value and
  headers.
- A batch left with no record may stay as a header-only batch, to keep producer state
  (BatchRetention.RETAIN_EMPTY, KAFKA-5490 in 0.11.0.1; the last batch of a cleaning round,
  KAFKA-17076 in 3.9.2 and 4.0), or go entirely.
- From 3.1 a batch holding a tombstone or a removable marker is rewritten once to stamp its
  delete horizon in the base timestamp (attribute bit 0x40, KIP-534), even when nothing is
  removed.
- It removes: a keyed record superseded by a later record with the same key, a keyless
  record, a tombstone past its delete horizon, the data of aborted transactions (`.txnindex`)
  and transaction markers no longer needed (CleanedTransactionMetadata).
- Untouched batches are copied byte for byte, and nothing at or above a replica's cleaned
  range is rewritten: there the comparison stays byte for byte.

So within the range either replica may have cleaned, batches are compared by what the
cleaner keeps and records one by one; a record one replica holds and the other does not is
a divergence unless compaction explains its absence.
"""

from __future__ import annotations

import struct
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from checkers.lineage import Lineage, cleaned_end
from checkers.recordlog import ReplicaLog
from checkers.records import Batch, Record

# Always compacted: the group and transaction coordinators' own logs.
INTERNAL_COMPACTED = ("__consumer_offsets", "__transaction_state")
ABORT, COMMIT = 0, 1  # ControlRecordType of a transaction marker (EndTransactionMarker)
_CONTROL_KEY = struct.Struct(">hh")


def compaction_reason(
    topic: str, configs: Mapping[str, str] | None = None, named: Collection[str] = ()
) -> str | None:
    """Why a topic is known to be compacted from what the inputs say of the topic itself,
    or None."""
    if topic in INTERNAL_COMPACTED:
        return f"{topic} is always compacted"
    if topic in named:
        return "named with --compacted"
    policy = (configs or {}).get("cleanup.policy", "")
    if "compact" in policy.split(","):
        return f"cleanup.policy={policy} in the metadata log"
    return None


def cleaner_evidence(lineages: Sequence[Lineage]) -> str | None:
    """Why the replicas themselves say the partition is compacted: a log cleaner cleaned it."""
    cleaned = [lin for lin in lineages if lin.cleaned_to is not None]
    if not cleaned:
        return None
    where = ", ".join(f"broker {lin.broker_id} up to {lin.cleaned_to}" for lin in cleaned)
    return f"the log cleaner has cleaned it ({where}, cleaner-offset-checkpoint)"


@dataclass(frozen=True)
class Discrepancy:
    offset: int
    what: str


def _identity(b: Batch) -> tuple[int, ...]:
    """What the cleaner keeps of a batch's header (see the module's docstring)."""
    return (
        b.last_offset,
        b.leader_epoch,
        b.producer_id,
        b.producer_epoch,
        b.base_sequence,
        b.is_control,
        b.is_transactional,
    )


def marker_type(record: Record) -> int | None:
    key = record.key or b""
    return _CONTROL_KEY.unpack_from(key)[1] if len(key) >= 4 else None


class _Side:
    """One replica's records in the compared range, and what explains their absence."""

    def __init__(self, lineage: Lineage, log: ReplicaLog, start: int, end: int) -> None:
        self.lineage = lineage
        self.id = lineage.broker_id
        self.cleaned = cleaned_end(lineage)
        self.records: dict[int, tuple[Batch, Record]] = {}
        self.undecodable: list[tuple[Batch, str]] = []
        self.last_of_key: dict[bytes, int] = {}
        self.markers: dict[int, tuple[int, int | None]] = {}  # offset -> (producer, type)
        for batch in lineage.batches:
            found = log.batch(batch)
            if isinstance(found, str):
                if start <= batch.last_offset and batch.base_offset < end:
                    self.undecodable.append((batch, found))
                continue
            for offset, record in found.items():
                if record.key is not None and not batch.is_control:
                    self.last_of_key[record.key] = offset
                if batch.is_control:
                    self.markers[offset] = (batch.producer_id, marker_type(record))
                if start <= offset < end:
                    self.records[offset] = (batch, record)

    def aborted(self, producer_id: int, offset: int) -> bool:
        """Whether this replica knows the transaction holding `offset` was aborted: its
        .txnindex says so, or the first marker of the producer after it is an ABORT."""
        if any(txn.covers(producer_id, offset) for txn in self.lineage.aborted):
            return True
        after = sorted(o for o, (p, _t) in self.markers.items() if p == producer_id and o > offset)
        return bool(after) and self.markers[after[0]][1] == ABORT

    def aborted_at(self, marker_offset: int) -> bool:
        return any(txn.last_offset == marker_offset for txn in self.lineage.aborted)


def _why_absent(offset: int, batch: Batch, record: Record, x: _Side, y: _Side) -> str | None:
    """Why replica y's cleaner may have removed what replica x holds at `offset` (None: it
    cannot have)."""
    if offset >= y.cleaned:
        return None  # y's cleaner never rewrote this offset
    if batch.is_control:
        return "a transaction marker"
    if record.key is None:
        return "a keyless record"
    if record.value is None:
        return "a tombstone"
    # The later record y's cleaner kept the key for may itself be gone from y since (a
    # tombstone past its horizon): x still showing it is evidence enough, for its own
    # absence from y is judged in turn.
    later = max(y.last_of_key.get(record.key, -1), x.last_of_key.get(record.key, -1))
    if later > offset:
        return f"superseded by offset {later}, same key"
    if record.key not in y.last_of_key and x.lineage.leo < y.lineage.leo:
        # y's cleaner left no record of the key at all: its last record was a tombstone,
        # removed too once past its delete horizon (delete.retention.ms), and x, which lags,
        # ends before that tombstone, so neither replica still shows what superseded it.
        return (
            f"superseded by a tombstone beyond broker {x.id}'s end, since removed past its "
            "delete horizon"
        )
    if batch.is_transactional and (
        x.aborted(batch.producer_id, offset) or y.aborted(batch.producer_id, offset)
    ):
        return "aborted transaction data"
    return None


def compare_cleaned(a: Lineage, b: Lineage, start: int, end: int) -> Discrepancy | None:
    """The first offset in [start, end) where two replicas of a compacted partition differ
    in a way compaction cannot explain."""
    logs = ReplicaLog(a), ReplicaLog(b)
    try:
        x, y = (_Side(lin, log, start, end) for lin, log in zip((a, b), logs, strict=True))
        found = [d for d in (_batches(x, y, start, end), _records(x, y), _markers(x, y)) if d]
        return min(found, key=lambda d: d.offset) if found else None
    finally:
        for log in logs:
            log.close()


def _batches(x: _Side, y: _Side, start: int, end: int) -> Discrepancy | None:
    for side, other in ((x, y), (y, x)):
        for batch, problem in side.undecodable:
            return Discrepancy(
                max(start, batch.base_offset),
                f"broker {side.id}'s batch does not decode: {problem}",
            )
        for batch in side.lineage.batches:
            if batch.last_offset < start or batch.base_offset >= end:
                continue
            theirs = other.lineage.batch_containing(batch.base_offset)
            if theirs is None:
                continue  # removed on the other replica: its records say whether it may be
            if theirs.base_offset != batch.base_offset or _identity(theirs) != _identity(batch):
                return Discrepancy(
                    max(start, min(batch.base_offset, theirs.base_offset)),
                    f"batch {batch.span} epoch {batch.leader_epoch} on broker {side.id}, "
                    f"{theirs.span} epoch {theirs.leader_epoch} on broker {other.id}",
                )
    return None


def _records(x: _Side, y: _Side) -> Discrepancy | None:
    for offset in sorted(x.records.keys() | y.records.keys()):
        mine, theirs = x.records.get(offset), y.records.get(offset)
        if mine is not None and theirs is not None:
            if mine[1] != theirs[1]:
                return Discrepancy(offset, f"the record at {offset} differs between broker {x.id} "
                                   f"and broker {y.id}")  # fmt: skip
            continue
        holder, lacking = (x, y) if mine is not None else (y, x)
        batch, record = mine or theirs  # type: ignore[misc]
        if _why_absent(offset, batch, record, holder, lacking) is None:
            return Discrepancy(
                offset,
                f"broker {holder.id} holds a record at {offset} that broker {lacking.id} lacks, "
                "and compaction does not explain it",
            )
    return None


def _markers(x: _Side, y: _Side) -> Discrepancy | None:
    """A transaction committed on one replica and aborted on the other."""
    for side, other in ((x, y), (y, x)):
        for offset, (producer, kind) in sorted(side.markers.items()):
            if kind == COMMIT and other.aborted_at(offset):
                return Discrepancy(
                    offset,
                    f"producer {producer}'s transaction ending at {offset} is committed on "
                    f"broker {side.id} and aborted on broker {other.id}",
                )
    return None


def first_record_difference(a: Lineage, b: Lineage, offset: int) -> int:
    """Where inside two versions of one batch (same boundaries and epoch, different CRCs)
    the records first differ: the offset a Kafka engineer looks at. `offset` itself when
    either does not decode."""
    logs = ReplicaLog(a), ReplicaLog(b)
    try:
        ba, bb = a.batch_containing(offset), b.batch_containing(offset)
        if ba is None or bb is None:
            return offset
        ra, rb = logs[0].batch(ba), logs[1].batch(bb)
        if isinstance(ra, str) or isinstance(rb, str):
            return offset
        for o in sorted(ra.keys() | rb.keys()):
            if o >= offset and ra.get(o) != rb.get(o):
                return o
        return offset
    finally:
        for log in logs:
            log.close()
