"""Kafka's primitive encodings, both ways: the one codec the segment reader, the metadata-log
reader, the wire client and the test builders share.

- Records (v2 batches) use zigzag varints and varlongs (ByteUtils.readVarint/readVarlong).
- Flexible message versions (KIP-482) use unsigned varints for lengths: a compact array or
  string stores its length + 1 (0 is null), and every struct ends with tagged fields
  (a count, then tag, size and bytes per field).
- Older, non-flexible versions use int16-prefixed strings and int32-prefixed arrays.
- A Kafka Uuid travels as 16 bytes and prints as URL-safe base64 without padding.

Decoding never trusts a length: every read is bounds-checked and a bad one raises
`DecodeError` (a ValueError), which each reader turns into its own typed error.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Mapping, Sequence
from typing import Any

_B = struct.Struct(">b")
_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")


class DecodeError(ValueError):
    """Bytes that do not decode as the encoding says they should."""


# --------------------------------------------------------------------------------------
# Varints


def read_uvarint(data: Any, cursor: int, max_bytes: int = 10) -> tuple[int, int]:
    """An unsigned varint at `cursor`: (value, cursor after it). `max_bytes` is 5 for the
    unsigned int32 lengths of flexible versions, 10 for 64-bit values."""
    value, shift, end = 0, 0, len(data)
    while True:
        if cursor >= end:
            raise DecodeError("varint runs past the end")
        b = data[cursor]
        cursor += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, cursor
        shift += 7
        if shift >= 7 * max_bytes:
            raise DecodeError(f"varint is longer than {max_bytes} bytes")


def read_varint(data: Any, cursor: int) -> tuple[int, int]:
    """A zigzag-encoded varint or varlong, as in Kafka's ByteUtils (v2 records)."""
    raw, cursor = read_uvarint(data, cursor)
    return (raw >> 1) ^ -(raw & 1), cursor


def uvarint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def varint(n: int) -> bytes:
    """Zigzag varint/varlong, as in v2 records."""
    return uvarint((n << 1) ^ (n >> 63))


# --------------------------------------------------------------------------------------
# Uuids


def uuid_text(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def uuid_bytes(kafka_id: str) -> bytes:
    return base64.urlsafe_b64decode(kafka_id + "=" * (-len(kafka_id) % 4))


# --------------------------------------------------------------------------------------
# Writing


def string(s: str | None) -> bytes:
    """A non-flexible (int16-prefixed) string; None is null."""
    if s is None:
        return _H.pack(-1)
    raw = s.encode()
    return _H.pack(len(raw)) + raw


def compact_string(s: str | None) -> bytes:
    if s is None:
        return uvarint(0)
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


def compact_int32s(values: Sequence[int] | None) -> bytes:
    if values is None:
        return uvarint(0)
    return uvarint(len(values) + 1) + b"".join(_I.pack(v) for v in values)


def compact_uuids(values: Sequence[str]) -> bytes:
    return uvarint(len(values) + 1) + b"".join(uuid_bytes(v) for v in values)


def tagged(fields: Mapping[int, bytes]) -> bytes:
    """A tagged-field section: fields in tag order, as Kafka writes them."""
    out = uvarint(len(fields))
    for tag in sorted(fields):
        out += uvarint(tag) + uvarint(len(fields[tag])) + fields[tag]
    return out


# --------------------------------------------------------------------------------------
# Reading


class Reader:
    """Bounds-checked reads of Kafka's message encodings over one buffer."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise DecodeError(f"needs {n} bytes at {self.pos}, has {self.remaining}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def int8(self) -> int:
        return _B.unpack(self.take(1))[0]

    def int16(self) -> int:
        return _H.unpack(self.take(2))[0]

    def uint16(self) -> int:
        return int.from_bytes(self.take(2), "big")

    def int32(self) -> int:
        return _I.unpack(self.take(4))[0]

    def int64(self) -> int:
        return _Q.unpack(self.take(8))[0]

    def uuid(self) -> str:
        return uuid_text(self.take(16))

    def uvarint(self) -> int:
        """An unsigned varint for an int32 (lengths, counts, tags): at most 5 bytes."""
        value, self.pos = read_uvarint(self.data, self.pos, max_bytes=5)
        return value

    def compact_length(self) -> int | None:
        n = self.uvarint()
        if n == 0:
            return None
        if n - 1 > self.remaining:
            raise DecodeError(f"compact length {n - 1} exceeds the remaining bytes")
        return n - 1

    def compact_int32s(self) -> tuple[int, ...] | None:
        n = self.compact_length()
        return None if n is None else tuple(self.int32() for _ in range(n))

    def compact_uuids(self) -> tuple[str, ...] | None:
        n = self.compact_length()
        return None if n is None else tuple(self.uuid() for _ in range(n))

    def compact_string(self) -> str | None:
        n = self.compact_length()
        return None if n is None else self.take(n).decode("utf-8", "replace")

    def int32s(self) -> tuple[int, ...] | None:
        """A non-flexible array of int32 (int32 count, -1 null)."""
        n = self.int32()
        if n == -1:
            return None
        if n < 0 or 4 * n > self.remaining:
            raise DecodeError(f"array length {n} exceeds the remaining bytes")
        return tuple(self.int32() for _ in range(n))

    def string(self) -> str | None:
        """A non-flexible string (int16 length, -1 null)."""
        n = self.int16()
        return None if n == -1 else self.take(n).decode("utf-8", "replace")

    def tagged_fields(self) -> dict[int, bytes]:
        fields: dict[int, bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            fields[tag] = self.take(self.uvarint())
        return fields

    def end(self) -> None:
        if self.remaining:
            raise DecodeError(f"{self.remaining} bytes left over")
