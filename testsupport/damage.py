"""Damage tools for crafted inputs: corrupt a byte, cut a file short, break one batch.

Only ever used on files a test wrote itself.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from pathlib import Path

from checkers.contents import read_records
from checkers.encode import CODECS, encode_records_batch
from checkers.records import LOG_OVERHEAD, Record

_V2_HEADER = struct.Struct(">qiibIhiqqqhii")


def flip_byte(path: Path | str, position: int, mask: int = 0xFF) -> None:
    """XOR one byte of a file (for crafting corrupt inputs; never used on real data)."""
    p = Path(path)
    data = bytearray(p.read_bytes())
    data[position] ^= mask
    p.write_bytes(bytes(data))


def cut_file(path: Path | str, drop: int) -> None:
    """Remove the last `drop` bytes of a file, as a crash mid-write leaves it."""
    p = Path(path)
    data = p.read_bytes()
    p.write_bytes(data[: len(data) - drop])


def damage_batch(path: Path | str, index: int, how: str) -> int:
    """Break the `index`-th entry of a segment file in place; returns its byte position.

    how: "crc" (a byte under the checksum changes), "length" (a length no batch can have),
    "magic" (an unknown magic byte), "torn" (the file ends halfway through this entry, as a
    crash mid-write leaves it; everything after it goes too).
    """
    p = Path(path)
    data = bytearray(p.read_bytes())
    position = batch_positions(bytes(data))[index]
    (length,) = struct.unpack_from(">i", data, position + 8)
    if how == "crc":
        data[position + LOG_OVERHEAD + length - 1] ^= 0xFF
    elif how == "length":
        data[position + 8 : position + 12] = struct.pack(">i", 3)
    elif how == "magic":
        data[position + 16] = 9
    elif how == "torn":
        del data[position + (LOG_OVERHEAD + length) // 2 :]
    else:
        raise ValueError(f"unknown damage {how!r}")
    p.write_bytes(bytes(data))
    return position


def batch_positions(data: bytes) -> list[int]:
    """Byte positions of the entries in a well-formed segment."""
    out, pos = [], 0
    while pos + LOG_OVERHEAD <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        out.append(pos)
        pos += LOG_OVERHEAD + length
    return out


def _rewrite_batch(
    path: Path | str, offset: int, change: Callable[[list[Record]], list[Record]]
) -> int:
    """Re-encode the batch holding `offset` in a segment with its records changed, keeping
    every header field and a valid CRC, so that only a comparison with another replica can
    see it; returns the batch's byte position."""
    p = Path(path)
    data = p.read_bytes()
    for position in batch_positions(data):
        (base, length, epoch, magic, _crc, attrs, lod, base_ts, _max_ts, pid, pepoch, bseq, _n) = (
            _V2_HEADER.unpack_from(data, position)
        )
        if magic != 2 or not base <= offset <= base + lod:
            continue
        end = position + LOG_OVERHEAD + length
        records = change(read_records(data, position, path=str(p)))
        codec = {v: k for k, v in CODECS.items()}[attrs & 0x07]
        horizon = base_ts if attrs & 0x40 else None
        batch = encode_records_batch(
            base,
            records,
            last_offset=base + lod,
            leader_epoch=epoch,
            compression=codec,
            producer_id=pid,
            producer_epoch=pepoch,
            base_sequence=bseq,
            is_transactional=bool(attrs & 0x10),
            is_control=bool(attrs & 0x20),
            log_append_time=bool(attrs & 0x08),
            base_timestamp=None if horizon is not None else base_ts,
            delete_horizon=horizon,
        )
        p.write_bytes(data[:position] + batch + data[end:])
        return position
    raise ValueError(f"no v2 batch of {p} holds offset {offset}")


def change_record_value(path: Path | str, offset: int, value: bytes) -> int:
    """Give the record at `offset` another value (its batch's CRC recomputed)."""
    return _rewrite_batch(
        path,
        offset,
        lambda records: [
            dataclasses.replace(r, value=value) if r.offset == offset else r for r in records
        ],
    )


def drop_record(path: Path | str, offset: int) -> int:
    """Remove the record at `offset` from its batch, as a cleaner would (last offset kept),
    though no cleaner did."""
    return _rewrite_batch(path, offset, lambda records: [r for r in records if r.offset != offset])
