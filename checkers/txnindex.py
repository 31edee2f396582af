"""A segment's transaction index: the aborted transactions whose data lies in it.

``<base offset>.txnindex`` beside each segment (KIP-98) holds one 34-byte entry per aborted
transaction: version int16 (0), producerId int64, firstOffset int64, lastOffset int64 (the
offset of the ABORT marker) and lastStableOffset int64 (storage AbortedTxn, TOTAL_SIZE 34).
The file is created only when needed and grows exactly by entries (TransactionIndex: "not
resized ahead of time"), so a size that is not a multiple of 34 is damage, not padding.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from checkers.errors import BadTxnIndex, UnreadableFile

ENTRY = struct.Struct(">hqqqq")
SUFFIX = ".txnindex"


@dataclass(frozen=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int

    def covers(self, producer_id: int, offset: int) -> bool:
        return producer_id == self.producer_id and self.first_offset <= offset <= self.last_offset


def read_txn_index(path: Path | str) -> list[AbortedTxn]:
    """The entries of one .txnindex file; raises BadTxnIndex or UnreadableFile naming it."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise UnreadableFile(str(path), None, f"cannot read: {exc}") from None
    whole = len(data) - len(data) % ENTRY.size
    if whole != len(data):
        raise BadTxnIndex(
            str(path),
            whole,
            f"{len(data)} bytes is not a whole number of {ENTRY.size}-byte entries",
        )
    out = []
    for position in range(0, len(data), ENTRY.size):
        version, pid, first, last, stable = ENTRY.unpack_from(data, position)
        if version != 0:
            raise BadTxnIndex(str(path), position, f"entry version {version} (expected 0)")
        if first > last:
            raise BadTxnIndex(
                str(path), position, f"first offset {first} is above last offset {last}"
            )
        out.append(AbortedTxn(pid, first, last, stable))
    return out
