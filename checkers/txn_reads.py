"""What consumers read, judged against the transactional producers' history: the
client-side half of the transaction checks (the disk half is `checkers.transactions`).

The checks are those Jepsen's Elle runs on Kafka's transactions (KIP-98's promises to a
read_committed consumer), made exact by offsets:

- aborted read: a record of an aborted transaction was read;
- lost write: a record of a committed transaction, below the offset the consumer reached
  (its last stable offset then), was never read;
- torn transaction: a transaction partly visible, some of its records read and others, below
  where the consumer reached, not (across its partitions too); a transaction whose end the
  producer never learned (`IN_DOUBT`) must still be all or nothing;
- read past the stable end: a record read at or above the last stable offset the reader was
  given, which the broker never hands to read_committed consumers;
- out of order: one partition's records read in other than increasing offsets.

A read_uncommitted consumer reads to the high watermark, aborted records too: it must read
every acknowledged transactional write below its end, whatever its transaction's outcome
(lost write), nothing at or past the high watermark, and in offset order.

A pure function of plain data: the sends (`runrecord.history.Send`s or their dicts) and the
reads, per partition, with the end each reader reached.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from runrecord.history import ABORTED, COMMITTED, READ_COMMITTED, ReadPass, ReadRecord
from runrecord.outcome import (
    ABORTED_READ,
    OUT_OF_ORDER,
    PAST_HIGH_WATERMARK,
    PAST_STABLE,
    TORN_TRANSACTION,
)

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class PartitionRead:
    """One consumer's pass over a partition, from its start to `end`: the partition's last
    stable offset (read_committed) or high watermark (read_uncommitted) asked for once the
    pass is over. Neither ever goes back, so a record at or past it was never there to be
    read; one asked for before the pass may be passed by a marker landing meanwhile."""

    records: Sequence[ReadRecord]
    end: int
    isolation: str = READ_COMMITTED

    @classmethod
    def of(cls, read: ReadPass) -> PartitionRead:
        return cls(read.records, read.end, read.isolation)


@dataclass(frozen=True)
class Anomaly:
    kind: str  # one of KINDS
    topic: str
    partition: int
    offset: int
    transaction: str | None  # the transaction's label in the history, where one applies
    detail: str
    isolation: str = READ_COMMITTED  # the reader's


LOST_WRITE = "lost-write"
TORN = TORN_TRANSACTION
KINDS = (ABORTED_READ, LOST_WRITE, TORN, PAST_STABLE, PAST_HIGH_WATERMARK, OUT_OF_ORDER)


@dataclass
class TxnReadCheck:
    anomalies: list[Anomaly] = field(default_factory=list)
    transactions: int = 0  # transactions judged
    read: int = 0  # records read

    @property
    def clean(self) -> bool:
        return not self.anomalies

    def of(self, kind: str) -> list[Anomaly]:
        return [a for a in self.anomalies if a.kind == kind]

    def to_dict(self) -> dict[str, Any]:
        return {
            "transactions": self.transactions,
            "read": self.read,
            "anomalies": [vars(a) for a in self.anomalies],
        }


def check_read_passes(sends: Iterable[Any], passes: Iterable[ReadPass]) -> TxnReadCheck:
    """Judge passes of both isolation levels (the last of each per partition)."""
    sends = list(sends)
    by_level: dict[str, dict[TopicPartition, PartitionRead]] = defaultdict(dict)
    for p in passes:
        by_level[p.isolation][(p.topic, p.partition)] = PartitionRead.of(p)
    check = TxnReadCheck()
    for _, reads in sorted(by_level.items()):
        one = check_txn_reads(sends, reads)
        check.anomalies += one.anomalies
        check.read += one.read
        check.transactions = max(check.transactions, one.transactions)
    return check


def _plain(send: Any) -> Mapping[str, Any]:
    return send if isinstance(send, Mapping) else vars(send)


def check_txn_reads(
    sends: Iterable[Any], reads: Mapping[TopicPartition, PartitionRead]
) -> TxnReadCheck:
    """Judge the reads of every partition in `reads` against the acknowledged transactional
    sends to it (sends without a `txn` label are not judged; partitions nobody read are not
    either)."""
    levels = {r.isolation for r in reads.values()}
    if len(levels) > 1:
        raise ValueError(f"reads of one isolation level at a time, not {sorted(levels)}")
    level = levels.pop() if levels else READ_COMMITTED
    past = PAST_STABLE if level == READ_COMMITTED else PAST_HIGH_WATERMARK
    check = TxnReadCheck(read=sum(len(r.records) for r in reads.values()))
    at: dict[TopicPartition, dict[int, ReadRecord]] = {}
    for tp, read in sorted(reads.items()):
        at[tp] = {r.offset: r for r in read.records}
        offsets = [r.offset for r in read.records]
        for before, after in pairwise(offsets):
            if after <= before:
                check.anomalies.append(
                    Anomaly(OUT_OF_ORDER, *tp, after, None, f"read after offset {before}", level)
                )
        for r in read.records:
            if r.offset >= read.end:
                check.anomalies.append(
                    Anomaly(past, *tp, r.offset, None, f"the reader's end was {read.end}", level)
                )
    by_txn: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for send in map(_plain, sends):
        tp = (send["topic"], send.get("partition"))
        if send.get("txn") and send.get("offset") is not None and tp in reads:
            by_txn[send["txn"]].append(send)
    check.transactions = len(by_txn)
    for txn, txn_sends in sorted(by_txn.items()):
        check.anomalies += _judge_transaction(txn, txn_sends, reads, at, level)
    return check


def _judge_transaction(
    txn: str,
    sends: list[Mapping[str, Any]],
    reads: Mapping[TopicPartition, PartitionRead],
    at: Mapping[TopicPartition, Mapping[int, ReadRecord]],
    level: str,
) -> list[Anomaly]:
    outcome = sends[0].get("transaction")
    seen, unseen = [], []
    for send in sorted(sends, key=lambda s: (s["topic"], s["partition"], s["offset"])):
        tp, offset = (send["topic"], send["partition"]), int(send["offset"])
        record = at[tp].get(offset)
        if record is not None and record.value == send.get("value"):
            seen.append(send)
        elif offset < reads[tp].end:
            unseen.append(send)  # below where the reader got to, and not read
    out = []
    if level != READ_COMMITTED:
        # Aborted or not, an acknowledged write stays in the log under its marker.
        why = f"acknowledged ({outcome or 'its end unknown'}), below the reader's end"
        return [_anomaly(LOST_WRITE, send, txn, why, level) for send in unseen]
    if outcome == ABORTED:
        for send in seen:
            out.append(_anomaly(ABORTED_READ, send, txn, "its transaction was aborted", level))
        return out
    if outcome == COMMITTED:
        for send in unseen:
            out.append(_anomaly(LOST_WRITE, send, txn, "committed, below the reader's end", level))
    if seen and unseen:
        first = unseen[0]
        out.append(
            _anomaly(
                TORN,
                first,
                txn,
                f"{len(seen)} of its records read, {len(unseen)} below the reader's end not "
                f"({outcome or 'its end unknown'})",
                level,
            )
        )
    return out


def _anomaly(kind: str, send: Mapping[str, Any], txn: str, detail: str, level: str) -> Anomaly:
    return Anomaly(kind, send["topic"], send["partition"], int(send["offset"]), txn, detail, level)
