"""The schedule's transactional producer (KIP-98): its writes, commits and aborts."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from runrecord.schedule_fields import is_int
from runrecord.steps.base import (
    StepKind,
    check_count,
    check_flag,
    checked,
)

if TYPE_CHECKING:
    from runrecord.schedule_cluster import Cluster

# Partitions one transactional write may span: the schedule's and every background one
# (runrecord.schedule_cluster.MAX_BACKGROUND_PARTITIONS); the check below says the cluster has them.
MAX_TXN_PARTITIONS = 7


def _check_txn_partitions(value: Any) -> tuple[Any, str | None]:
    if is_int(value) and 1 <= value <= MAX_TXN_PARTITIONS:
        return (value if value > 1 else None), None  # 1 is the default: written as nothing
    return None, f"must be a number of partitions from 1 to {MAX_TXN_PARTITIONS}"


class Transactional(StepKind):
    """A step of the schedule's transactional producer."""

    @property
    def transactional(self) -> bool:
        return True


@dataclass(frozen=True)
class TxnWrite(Transactional):
    """Write `count` records in one batch to the partition's leader within the schedule's
    transaction, beginning one if none is open (beginning is the client's own business:
    nothing reaches a broker until the first write). acks=all, as every transactional
    write is (KIP-98). With `partitions` n, the same write goes to partitions 0 to n - 1
    (the background partitions, whose leaders differ), one batch each: the transaction
    then spans them, and its coordinator must mark every one."""

    KIND: ClassVar[str] = "txn-write"
    count: int = field(metadata=checked(check_count))
    partitions: int | None = field(default=None, metadata=checked(_check_txn_partitions))

    @property
    def spans(self) -> tuple[int, ...]:
        """The partitions it writes, the schedule's first."""
        return tuple(range(self.partitions or 1))

    def describe(self) -> str:
        spread = f" to each of partitions 0-{self.partitions - 1}" if self.partitions else ""
        return f"transactional write of {self.count}{spread}"

    def problems(self, cluster: Cluster | None) -> Iterator[tuple[str, str]]:
        topic = 1 + cluster.background_partitions if cluster is not None else None
        if self.partitions and topic is not None and self.partitions > topic:
            yield (
                "partitions",
                (f"the topic has {topic} partitions (cluster.background_partitions + 1)"),
            )


def _held(held: bool | None) -> str:
    return ", its first EndTxn held until a heal" if held else ""


@dataclass(frozen=True)
class TxnCommit(Transactional):
    """Commit the open transaction: its coordinator writes a COMMIT marker to the partition
    (an ABORT marker where one of its writes failed: the producer can only abort then).
    With `held`, the producer's first EndTxn is held on the wire; its retry ends the
    transaction, and the held one arrives late, at the next heal of every cut
    (KAFKA-17754)."""

    KIND: ClassVar[str] = "txn-commit"
    held: bool | None = field(default=None, metadata=checked(check_flag))

    def describe(self) -> str:
        return "commit the transaction" + _held(self.held)


@dataclass(frozen=True)
class TxnAbort(Transactional):
    """Abort the open transaction: its coordinator writes an ABORT marker to the partition.
    `held` as for a commit."""

    KIND: ClassVar[str] = "txn-abort"
    held: bool | None = field(default=None, metadata=checked(check_flag))

    def describe(self) -> str:
        return "abort the transaction" + _held(self.held)


TxnEnd = TxnCommit | TxnAbort
