"""What the transaction coordinator decided, read from its own log (`__transaction_state`).

Each record is keyed by transactional id (TransactionLogKey: int16 version 0, then a
string) and holds the transaction's state (TransactionLogValue; version 1 is flexible,
KIP-915). A transaction ends in two records: PrepareCommit or PrepareAbort, which lists the
partitions it wrote to, then, once every partition's leader has appended the marker,
CompleteCommit or CompleteAbort (two-phase commit, KIP-98). The markers carry the producer
id and epoch of the Prepare record: in transactions v2 that epoch is the one bumped when the
transaction ended (KIP-890), so each transaction has its own.

A decision here is a transaction whose Prepare record was followed by its Complete record.
Its markers were all written by then, so a partition it lists holds the same kind of
marker. `checkers.transactions` compares them.

What makes a decision safe to compare: in transactions v1 a producer keeps its epoch across
transactions, so (producer id, epoch) names one transaction on a partition only when the
coordinator's log is whole (never cleaned: compaction keeps only a transactional id's last
record) and lists exactly one transaction of that producer and epoch on the partition.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from checkers.codec import DecodeError, Reader
from checkers.lineage import Lineage
from checkers.recordlog import ReplicaLog

TXN_STATE_TOPIC = "__transaction_state"
# TransactionState ids (transaction-coordinator's TransactionState.java).
PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT = 2, 3, 4, 5
ENDS = {PREPARE_COMMIT: "COMMIT", PREPARE_ABORT: "ABORT"}
COMPLETES = {COMPLETE_COMMIT: "COMMIT", COMPLETE_ABORT: "ABORT"}
# ClientTransactionVersion (tag 2 of TransactionLogValue v1): 2 is transactions v2.
TV2 = 2

TopicPartition = tuple[str, int]
ProducerEpoch = tuple[int, int]


@dataclass(frozen=True)
class TxnState:
    """One TransactionLogValue, as far as decisions need it."""

    producer_id: int
    producer_epoch: int
    status: int
    partitions: tuple[TopicPartition, ...]
    client_version: int


@dataclass(frozen=True)
class Decision:
    """A transaction the coordinator completed: its marker kind on every partition listed."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    kind: str  # "COMMIT" or "ABORT"
    offset: int  # the Complete record's offset in the coordinator's log

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> Decision:
        return cls(**d)  # type: ignore[arg-type]


# One data partition's decisions safe to compare, by (producer id, marker epoch); and every
# partition's.
PartitionDecisions = dict[ProducerEpoch, Decision]
Decisions = dict[TopicPartition, PartitionDecisions]


def decode_key(key: bytes) -> str | None:
    """The transactional id, or None for a key of another version."""
    reader = Reader(key)
    if reader.int16() != 0:
        return None
    return reader.string()


def decode_value(value: bytes) -> TxnState:
    reader = Reader(value)
    version = reader.int16()
    if version not in (0, 1):
        raise DecodeError(f"TransactionLogValue version {version}")
    flexible = version >= 1
    pid, epoch = reader.int64(), reader.int16()
    reader.int32()  # TransactionTimeoutMs
    status = reader.int8()
    partitions: list[TopicPartition] = []
    count = reader.compact_length() if flexible else reader.int32()
    for _ in range(count if count is not None and count > 0 else 0):
        topic = (reader.compact_string() if flexible else reader.string()) or ""
        ids = (reader.compact_int32s() if flexible else reader.int32s()) or ()
        partitions.extend((topic, p) for p in ids)
        if flexible:
            reader.tagged_fields()
    reader.int64()  # TransactionLastUpdateTimestampMs
    reader.int64()  # TransactionStartTimestampMs
    client_version = 0
    if flexible:
        raw = reader.tagged_fields().get(2)
        if raw is not None and len(raw) == 2:
            client_version = int.from_bytes(raw, "big", signed=True)
    return TxnState(pid, epoch, status, tuple(partitions), client_version)


def _longest(lineages: Sequence[Lineage]) -> Lineage | None:
    """The copy that has seen the most: the highest log end (the lowest broker on a tie)."""
    return min(lineages, key=lambda lin: (-lin.leo, lin.broker_id), default=None)


def decisions_of(lineages: Sequence[Lineage]) -> Decisions:
    """The decisions one `__transaction_state` partition's longest replica records."""
    lineage = _longest(lineages)
    if lineage is None:
        return {}
    whole = lineage.cleaned_to is None and not lineage.log_start_offset
    prepared: dict[str, tuple[TxnState, str]] = {}
    decided: list[tuple[TxnState, Decision]] = []
    # How many transactions (decided or not) of one producer and epoch list a partition.
    listed: dict[tuple[TopicPartition, ProducerEpoch], int] = defaultdict(int)
    log = ReplicaLog(lineage)
    try:
        for record in log.records():
            try:
                txn_id = None if record.key is None else decode_key(record.key)
                if txn_id is None:
                    continue
                if record.value is None:  # a tombstone: the transactional id expired
                    prepared.pop(txn_id, None)
                    continue
                state = decode_value(record.value)
            except DecodeError:
                continue  # a record this reader cannot follow decides nothing
            if state.status in ENDS:
                prepared[txn_id] = (state, ENDS[state.status])
                for tp in state.partitions:
                    listed[(tp, (state.producer_id, state.producer_epoch))] += 1
                continue
            kind = COMPLETES.get(state.status)
            before = prepared.pop(txn_id, None)
            if kind is None or before is None:
                continue
            prep, prep_kind = before
            same = (prep.producer_id, prep.producer_epoch) == (
                state.producer_id,
                state.producer_epoch,
            )
            if same and prep_kind == kind:
                decision = Decision(
                    txn_id, prep.producer_id, prep.producer_epoch, kind, record.offset
                )
                decided.append((prep, decision))
    finally:
        log.close()
    out: Decisions = defaultdict(dict)
    for prep, decision in decided:
        pe = (decision.producer_id, decision.producer_epoch)
        for tp in prep.partitions:
            if prep.client_version >= TV2 or (whole and listed[(tp, pe)] == 1):
                out[tp][pe] = decision
    return dict(out)


def merge(parts: Sequence[Decisions]) -> Decisions:
    """Decisions of several coordinator partitions (each transactional id lives in one)."""
    out: Decisions = defaultdict(dict)
    for part in parts:
        for tp, by_pe in part.items():
            out[tp].update(by_pe)
    return dict(out)
