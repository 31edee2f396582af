"""Damage tools for crafted inputs: corrupt a byte, cut a file short, break one batch.

Only ever used on files a test wrote itself.
"""

from __future__ import annotations

import struct
from pathlib import Path

from checkers.records import LOG_OVERHEAD


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
