"""producer.jsonl: every send of the workload, with its acks setting and its acknowledged
offset or error. The history the acknowledged-write checks judge against."""

from __future__ import annotations

from dataclasses import dataclass

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
