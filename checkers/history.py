"""The history checker: did the partition's final log keep every write the cluster
acknowledged, once, and in the order it was acknowledged?

A history is the producer's record of its sends (`runrecord.history.Send`: acks setting,
acknowledged offset or error). A log is the partition's final state: the records a consumer
read back, or one replica's segments decoded from disk (`checkers.recordlog.ReplicaLog`).
Each scenario and the report judge acknowledged-write loss here and nowhere else.

- lost: the record at the acknowledged offset is missing or is another record. An
  acks=all write promises to survive a leader's failure (`runrecord.history.DURABLE_ACKS`);
  an acks=1 write may be lost when its leader fails before a follower copies it.
- below log start: retention or DeleteRecords deleted the offset (the caller says up to
  where: `deleted_below`); counted apart, never as lost. A log start past an acknowledged
  write that nothing deleted on purpose is a loss.
- compacted: the record is gone from an offset the log cleaner rewrote, and a later write
  of its key (a newer value or a tombstone, in the log or acknowledged in the history)
  superseded it, or it is a tombstone the cleaner removed past its delete horizon:
  compaction removed it on purpose (LogCleaner); counted apart, never as lost.
- aborted: the write belonged to a transaction its producer aborted: it was never meant to
  be read (KIP-98); counted apart, never as lost.
- unverifiable: the batch holding the offset could not be decoded: the check cannot say
  whether the write survived, so a run with any is not judged (`HistoryCheck.unjudged`).
- duplicated: an acknowledged value found at more than one offset.
- out of order: acknowledged values whose places in the log do not follow the order they
  were acknowledged in.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from checkers.records import Record
from runrecord.history import ABORTED, DURABLE_ACKS

MAX_LISTED = 100  # writes listed by name in a result; every count stays exact
PREVIEW = 60  # characters of a record shown beside a lost write


class PartitionLog(Protocol):
    """A partition's final log, as the checker reads it."""

    name: str  # who holds it: "replica 2", "the consumer's read"
    log_start: int
    log_end: int
    cleaned_below: int  # below it the log cleaner may have rewritten the log (0: never)

    def at(self, offset: int) -> Record | str | None:
        """The record at `offset`; None when there is none; a string saying why the batch
        holding it could not be decoded."""

    def records(self) -> Iterator[Record]:
        """Every record, in offset order (undecodable batches skipped)."""


@dataclass
class ReadLog:
    """Records a consumer read back, from the log start to the high watermark."""

    items: Sequence[Record]
    name: str = "the consumer's read"
    # The partition's log start as its leader answered it; None: where the read began. (A
    # given 0 is a log start like any other: a read that begins past it lost what it skipped.)
    log_start: int | None = None
    log_end: int = 0
    cleaned_below: int = 0

    def __post_init__(self) -> None:
        self._by_offset = {r.offset: r for r in self.items}
        if self.log_start is None:
            self.log_start = self.items[0].offset if self.items else 0
        if self.items:
            self.log_end = max(self.log_end, self.items[-1].offset + 1)

    def at(self, offset: int) -> Record | str | None:
        return self._by_offset.get(offset)

    def records(self) -> Iterator[Record]:
        return iter(self.items)


@dataclass
class LostWrite:
    offset: int
    key: str | None
    value: str | None
    acks: str
    acked: float | None
    why: str
    held_by: list[int] = field(default_factory=list)  # other replicas that still hold it


@dataclass
class HistoryCheck:
    acked: int = 0
    present: int = 0
    lost_count: int = 0
    durable_lost: int = 0
    below_log_start: int = 0
    compacted: int = 0  # removed by the log cleaner, superseded by a later record of its key
    aborted: int = 0  # writes of aborted transactions, missing as they should be
    unverifiable: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    reference: str | None = None  # which log was checked
    by_acks: dict[str, dict[str, int]] = field(default_factory=dict)  # acks -> acked, lost
    lost: list[LostWrite] = field(default_factory=list)  # the first MAX_LISTED
    duplicates: list[str] = field(default_factory=list)  # the first MAX_LISTED values
    order_breaks: list[tuple[str, str]] = field(default_factory=list)  # (earlier, later)

    @property
    def clean(self) -> bool:
        """No acknowledged write lost, duplicated or reordered."""
        return not (self.lost_count or self.duplicated or self.out_of_order)

    @property
    def unjudged(self) -> str:
        """Why the check could not judge every acknowledged write ("" when it could): a
        write in a batch that does not decode may or may not have survived."""
        if not self.unverifiable:
            return ""
        return (
            f"{self.unverifiable} acknowledged write(s) of {self.reference} lie in batches "
            "that could not be decoded"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "acked": self.acked,
            "present": self.present,
            "lost_count": self.lost_count,
            "durable_lost": self.durable_lost,
            "below_log_start": self.below_log_start,
            "compacted": self.compacted,
            "aborted": self.aborted,
            "unverifiable": self.unverifiable,
            "unjudged": self.unjudged,
            "duplicated": self.duplicated,
            "out_of_order": self.out_of_order,
            "reference": self.reference,
            "by_acks": {k: dict(v) for k, v in sorted(self.by_acks.items())},
            "lost": [vars(w) | {"held_by": list(w.held_by)} for w in self.lost],
            "duplicates": list(self.duplicates),
            "order_breaks": [list(p) for p in self.order_breaks],
        }

    def line(self) -> str:
        return loss_line(self.to_dict())


def loss_line(loss: Mapping[str, Any]) -> str:
    """ "10 of 41 acknowledged write(s) lost (acks=1: 10 of 30)", durable loss first, then
    what is not loss: compacted away, aborted, duplicated and reordered writes. Takes a
    `HistoryCheck.to_dict()`, as a report reads it back."""
    parts = [
        f"acks={acks}: {c['lost']} of {c['acked']}"
        for acks, c in sorted((loss.get("by_acks") or {}).items())
        if c["lost"]
    ]
    text = f"{loss['lost_count']} of {loss['acked']} acknowledged write(s) lost"
    if parts:
        text += f" ({'; '.join(parts)})"
    if loss.get("durable_lost"):
        text += ": acks=all writes lost, which Kafka promises never to lose"
    elif loss.get("lost_count"):
        text += ", none with acks=all"
    gone = [
        f"{loss[key]} {what}"
        for key, what in (
            ("compacted", "compacted away (a later record of the key superseded them)"),
            ("aborted", "in aborted transactions"),
        )
        if loss.get(key)
    ]
    if gone:
        text += f"; not lost: {', '.join(gone)}"
    if loss.get("duplicated"):
        text += f"; {loss['duplicated']} duplicated"
    if loss.get("out_of_order"):
        text += f"; {loss['out_of_order']} out of order"
    return text


def _text(blob: bytes | None) -> str | None:
    return None if blob is None else blob.decode("utf-8", "replace")


def _preview(blob: bytes | None) -> str:
    text = _text(blob)
    if text is None:
        return "null"
    return text if len(text) <= PREVIEW else text[:PREVIEW] + "…"


def matches(record: Record | str | None, send: Mapping[str, Any]) -> bool:
    if not isinstance(record, Record):
        return False
    if send.get("key") is not None and _text(record.key) != send["key"]:
        return False
    return _text(record.value) == send.get("value")


def check_history(
    sends: Iterable[Any],
    log: PartitionLog | None,
    *,
    others: Sequence[PartitionLog] = (),
    order: bool = True,
    deleted_below: int = 0,
) -> HistoryCheck:
    """Check the acknowledged `sends` (`runrecord.history.Send`s, or dicts of their fields)
    of one partition against its final `log`; `others` (the other replicas) say who still holds a
    lost write. With no log at all (no replica on disk), every write is lost. Below
    `deleted_below` retention or DeleteRecords removed records on purpose; a write below the
    log start and above it is lost."""
    plain = [s if isinstance(s, Mapping) else vars(s) for s in sends]  # dicts or `Send`s
    acked = [s for s in plain if s.get("offset") is not None and s.get("error") is None]
    acked.sort(key=lambda s: (int(s["offset"]), s.get("acked") or 0.0))
    check = HistoryCheck(acked=len(acked), reference=None if log is None else log.name)
    for send in acked:
        check.by_acks.setdefault(str(send.get("acks")), {"acked": 0, "lost": 0})["acked"] += 1

    def lose(send: Mapping[str, Any], why: str, held_by: list[int]) -> None:
        check.lost_count += 1
        check.by_acks[str(send.get("acks"))]["lost"] += 1
        if str(send.get("acks")) in DURABLE_ACKS:
            check.durable_lost += 1
        if len(check.lost) < MAX_LISTED:
            check.lost.append(
                LostWrite(
                    int(send["offset"]),
                    send.get("key"),
                    send.get("value"),
                    str(send.get("acks")),
                    send.get("acked"),
                    why,
                    held_by,
                )
            )

    if log is None:
        for send in acked:
            lose(send, "no replica of this partition was found on disk", [])
        return check
    superseded = _Superseded(log, acked)
    for send in acked:
        offset = int(send["offset"])
        if offset < log.log_start and offset < deleted_below:
            check.below_log_start += 1
            continue
        if offset < log.log_start:
            held = [_holder(o) for o in others if matches(o.at(offset), send)]
            why = (
                f"{log.name} starts at offset {log.log_start}, past it, and no retention or "
                "DeleteRecords removed it"
            )
            lose(send, why, sorted(h for h in held if h is not None))
            continue
        record = log.at(offset)
        if matches(record, send):
            check.present += 1
        elif isinstance(record, str):
            check.unverifiable += 1
        elif send.get("transaction") == ABORTED:
            check.aborted += 1
        elif offset < log.cleaned_below and (
            send.get("value") is None or superseded(send.get("key"), offset)
        ):
            check.compacted += 1
        else:
            why = (
                f"{log.name} has no record at offset {offset} (its log ends at {log.log_end})"
                if record is None
                else f"{log.name} holds another record there: value {_preview(record.value)!r}"
            )
            held = [_holder(o) for o in others if matches(o.at(offset), send)]
            lose(send, why, sorted(h for h in held if h is not None))
    if order:
        _duplicates_and_order(check, acked, log)
    return check


class _Superseded:
    """Whether a later write of a key than an offset exists: a record in the log, or an
    acknowledged write in the history (itself compacted away since, a tombstone say). The
    log is read once, when first asked."""

    def __init__(self, log: PartitionLog, acked: Sequence[Mapping[str, Any]]) -> None:
        self.log = log
        self.last: dict[str, int] = {}
        for send in acked:
            if send.get("key") is not None:
                key, offset = str(send["key"]), int(send["offset"])
                self.last[key] = max(offset, self.last.get(key, -1))
        self.read = False

    def __call__(self, key: str | None, offset: int) -> bool:
        if key is None:
            return False
        if self.last.get(key, -1) <= offset and not self.read:
            self.read = True
            for record in self.log.records():
                if record.key is not None:
                    name = record.key.decode("utf-8", "replace")
                    self.last[name] = max(record.offset, self.last.get(name, -1))
        return self.last.get(key, -1) > offset


def _holder(log: PartitionLog) -> int | None:
    lineage = getattr(log, "lineage", None)
    return None if lineage is None else lineage.broker_id


def _duplicates_and_order(
    check: HistoryCheck, acked: Sequence[Mapping[str, Any]], log: PartitionLog
) -> None:
    # Tombstones (null values) are not told apart by value: they count for neither.
    wanted = {s.get("value") for s in acked if s.get("value") is not None}
    seen: Counter[str] = Counter()
    positions: dict[str, int] = {}
    for i, record in enumerate(log.records()):
        value = _text(record.value)
        if value in wanted:
            seen[value] += 1
            positions.setdefault(value, i)
    doubled = sorted(v for v, n in seen.items() if n > 1)
    check.duplicated = len(doubled)
    check.duplicates = doubled[:MAX_LISTED]
    by_ack = sorted(
        (s for s in acked if s.get("value") in positions), key=lambda s: s.get("acked") or 0.0
    )
    for earlier, later in itertools.pairwise(by_ack):
        if positions[earlier["value"]] > positions[later["value"]]:
            check.out_of_order += 1
            if len(check.order_breaks) < MAX_LISTED:
                check.order_breaks.append((earlier["value"], later["value"]))
