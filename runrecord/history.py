"""The history of a run's clients. producer.jsonl: every send of the workload, with its acks
setting and its acknowledged offset or error, which the acknowledged-write checks judge
against. reads.jsonl: every consumer's pass over a partition, each record it read in order
and the end it reached, which the read checks judge (`checkers.txn_reads`)."""

from __future__ import annotations

from dataclasses import dataclass, field

# acks settings under which an acknowledged write promises to survive a leader's failure
DURABLE_ACKS = ("all", "-1")
# How a transactional write's transaction ended; IN_DOUBT: its producer never learned (the
# commit or abort raised), so it must be all or nothing.
COMMITTED, ABORTED, IN_DOUBT = "committed", "aborted", "in-doubt"


@dataclass
class Send:
    topic: str
    key: str | None
    value: str | None  # None: a tombstone
    acks: str
    sent: float  # wall-clock time
    acked: float | None = None
    partition: int | None = None
    offset: int | None = None
    error: str | None = None
    broker: int | None = None  # the broker the producer sent to (its believed leader)
    transaction: str | None = None  # COMMITTED, ABORTED or IN_DOUBT: a transactional write
    txn: str | None = None  # which transaction: "<transactional.id>#<n>"

    @property
    def ok(self) -> bool:
        return self.error is None and self.offset is not None

    @property
    def durable(self) -> bool:
        return self.acks in DURABLE_ACKS


# A consumer's isolation level (KIP-98): read_committed stops at the last stable offset and
# skips aborted transactions' records; read_uncommitted reads to the high watermark.
READ_COMMITTED, READ_UNCOMMITTED = "read_committed", "read_uncommitted"


@dataclass(frozen=True)
class ReadRecord:
    offset: int
    key: str | None
    value: str | None


@dataclass
class ReadPass:
    """One consumer's pass over a partition from its start: the records it read, in the
    order it read them, and `end`, the partition's end for its isolation level (the last
    stable offset, or the high watermark) asked for once the pass was over. Neither end ever
    goes back, so a record at or past it was never there for the consumer to read."""

    topic: str
    partition: int
    isolation: str  # READ_COMMITTED or READ_UNCOMMITTED
    end: int
    started: float  # wall-clock time
    ended: float
    records: list[ReadRecord] = field(default_factory=list)
