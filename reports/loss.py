"""Acknowledged-write loss: does the leader's log hold every write the cluster acknowledged,
at the offset it acknowledged? Runs in the executor that judges the partition.

A write is checked by decoding the record at its acknowledged offset from the reference
replica's segment (the leader, or the replica `checkers.verdict.pick_leader` chooses) and
comparing its value (and key, when the history has one). Offsets below the reference's
log start were deleted by retention and are counted apart, never as lost.
"""

from __future__ import annotations

import contextlib
import mmap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from checkers.errors import LogReadError
from checkers.lineage import Lineage
from checkers.records import Record, read_records

MAX_LISTED = 100  # lost writes listed in a report; the count is always exact
# Settings under which an acknowledged write promises to survive a leader's failure; an
# acks=1 write may be lost when its leader fails before a follower copies it.
DURABLE_ACKS = ("all", "-1")
PREVIEW = 60  # characters of a record shown beside a lost write


class RecordReader:
    """Records at offsets of one partition's replicas, each batch decoded once."""

    def __init__(self) -> None:
        self._maps: dict[str, mmap.mmap | None] = {}
        self._batches: dict[tuple[str, str, int], dict[int, Record] | str] = {}

    def at(self, lineage: Lineage, offset: int) -> Record | str | None:
        """The record at `offset`; None when no batch holds it; a string when the batch
        that holds it could not be decoded."""
        batch = lineage.batch_containing(offset)
        if batch is None or lineage.path is None:
            return None
        key = (lineage.path, batch.segment, batch.position)
        found = self._batches.get(key)
        if found is None:
            found = self._decode(Path(lineage.path) / batch.segment, batch.position)
            self._batches[key] = found
        if isinstance(found, str):
            return found
        return found.get(offset)

    def _decode(self, path: Path, position: int) -> dict[int, Record] | str:
        name = str(path)
        if name not in self._maps:
            try:
                with open(path, "rb") as fh:
                    self._maps[name] = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError) as exc:
                self._maps[name] = None
                return f"cannot read {name}: {exc}"
        buf = self._maps[name]
        if buf is None:
            return f"cannot read {name}"
        try:
            return {r.offset: r for r in read_records(buf, position, path=name)}
        except LogReadError as exc:
            return str(exc)

    def close(self) -> None:
        for buf in self._maps.values():
            if buf is not None:
                with contextlib.suppress(BufferError):
                    buf.close()
        self._maps.clear()


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


def check_acknowledged(
    lineages: Sequence[Lineage], reference: Lineage | None, sends: Iterable[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """Loss of the acknowledged `sends` (dicts of producer-history fields) of one partition."""
    ordered = sorted(sends, key=lambda s: (s["offset"], s.get("acked") or 0.0))
    if not ordered:
        return None
    result: dict[str, Any] = {
        "acked": len(ordered),
        "present": 0,
        "lost_count": 0,
        "below_log_start": 0,
        "unverifiable": 0,
        "reference": None if reference is None else reference.broker_id,
        "lost": [],
        "by_acks": {},
        "durable_lost": 0,
    }
    by_acks: dict[str, dict[str, int]] = result["by_acks"]
    for send in ordered:
        by_acks.setdefault(str(send.get("acks")), {"acked": 0, "lost": 0})["acked"] += 1

    def count_lost(send: Mapping[str, Any]) -> None:
        result["lost_count"] += 1
        by_acks[str(send.get("acks"))]["lost"] += 1
        if str(send.get("acks")) in DURABLE_ACKS:
            result["durable_lost"] += 1

    if reference is None:
        for send in ordered:
            count_lost(send)
        result["lost"] = [
            _lost(s, "no replica of this partition was found on disk", [])
            for s in ordered[:MAX_LISTED]
        ]
        return result
    reader = RecordReader()
    try:
        for send in ordered:
            offset = int(send["offset"])
            if offset < (reference.log_start_offset or 0):
                result["below_log_start"] += 1
                continue
            record = reader.at(reference, offset)
            if matches(record, send):
                result["present"] += 1
                continue
            if isinstance(record, str):
                result["unverifiable"] += 1
                continue
            count_lost(send)
            if len(result["lost"]) >= MAX_LISTED:
                continue
            if record is None:
                why = (
                    f"replica {reference.broker_id} has no record at offset {offset} "
                    f"(its log ends at {reference.leo})"
                )
            else:
                why = (
                    f"replica {reference.broker_id} holds another record there: "
                    f"value {_preview(record.value)!r}"
                )
            held = [
                lin.broker_id
                for lin in lineages
                if lin is not reference and matches(reader.at(lin, offset), send)
            ]
            result["lost"].append(_lost(send, why, sorted(held)))
    finally:
        reader.close()
    return result


def _lost(send: Mapping[str, Any], why: str, held_by: list[int]) -> dict[str, Any]:
    return {
        "offset": int(send["offset"]),
        "key": send.get("key"),
        "value": send.get("value"),
        "acks": send.get("acks"),
        "acked": send.get("acked"),
        "why": why,
        "held_by": held_by,
    }
