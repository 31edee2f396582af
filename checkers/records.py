"""Batch headers of Kafka log segments: magic v2 record batches and v0/v1 message sets.

Layouts (all integers big-endian; see Kafka's DefaultRecordBatch, LegacyRecord and
AbstractLegacyRecordBatch):

- Every log entry starts ``offset:int64 length:int32``; the entry is ``12 + length`` bytes
  and its magic byte is at entry byte 16.
- v2 batch header, 61 bytes: baseOffset i64, length i32, partitionLeaderEpoch i32, magic i8,
  crc u32, attributes i16, lastOffsetDelta i32, baseTimestamp i64, maxTimestamp i64,
  producerId i64, producerEpoch i16, baseSequence i32, recordsCount i32. CRC-32C covers
  entry byte 21 to the end; the leader epoch is outside it (KIP-101) so a broker can
  stamp it without recomputing the CRC.
- v0/v1 message: crc u32, magic i8, attributes i8, [timestamp i64 in v1], key (i32 length,
  -1 = null), value (i32 length). CRC-32 from the magic byte to the end. A compressed
  message's value holds a whole inner message set, and the wrapper carries the offset of
  the LAST inner message (KIP-31 made v1 inner offsets relative to the wrapper).

The segment scan (`iter_batch_rows_py`) is the hot path: one precompiled `struct` unpack and
one C CRC call per v2 batch, plain tuples out, everything unusual handled off the fast path.
That fast path also exists in Rust (`checkers.walk`), which the scan uses when it is built;
the Python loop stays the reference, and handles every entry the fast path declines in both
cases.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from crc32c import crc32c

from checkers.compression import COMPRESSION_NAMES, decompress
from checkers.errors import (
    CorruptBatch,
    CrcMismatch,
    ImpossibleLength,
    LogReadError,
    OffsetOrderError,
    TornTail,
    TruncatedBatch,
    TruncatedHeader,
    UnknownMagic,
)

LOG_OVERHEAD = 12  # offset:int64 + length:int32
HEADER_UP_TO_MAGIC = 17
V2_HEADER_SIZE = 61
V2_CRC_START = 21  # CRC-32C covers from the attributes to the end of the batch
LEGACY_CRC_START = 16  # CRC-32 covers from the magic byte to the end of the message
MIN_LENGTH = {0: 14, 1: 22, 2: V2_HEADER_SIZE - LOG_OVERHEAD}  # Kafka's RECORD_OVERHEAD_V0/V1


_HEAD = struct.Struct(">qiib")
_V2 = struct.Struct(">qiibIhiqqqhii")
_LEGACY = struct.Struct(">qiIbb")  # offset, length, crc, magic, attributes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32LE = struct.Struct("<I")

_ATTR_COMPRESSION = 0x07
_ATTR_TIMESTAMP_TYPE = 0x08
_ATTR_TRANSACTIONAL = 0x10
_ATTR_CONTROL = 0x20


@dataclass(frozen=True, slots=True)
class Batch:
    """One on-disk log entry: a v2 record batch or a v0/v1 message (or compressed wrapper).

    Fields are primitives only, so a pandas or Arrow row round-trips it (`to_row`, `from_row`).
    """

    base_offset: int
    last_offset: int
    leader_epoch: int  # -1 when the format has none (v0/v1)
    crc: int
    crc_valid: bool
    size: int  # bytes on disk, including the 12-byte offset+length prefix
    magic: int
    record_count: int
    compression: str
    is_control: bool
    is_transactional: bool
    producer_id: int
    producer_epoch: int
    base_sequence: int
    max_timestamp: int
    segment: str
    position: int

    @property
    def key(self) -> tuple[int, int, int, int]:
        """What makes two replicas' batches the same batch: boundaries, leader epoch, CRC."""
        return (self.base_offset, self.last_offset, self.leader_epoch, self.crc)

    @property
    def span(self) -> str:
        return f"[{self.base_offset}, {self.last_offset}]"

    def to_row(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in BATCH_FIELDS}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Batch:
        """Inverse of `to_row`; accepts a dict or a pandas Series (numpy scalars are converted)."""
        return cls(*(conv(row[name]) for name, conv in _ROW_TYPES))


BATCH_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Batch))
_ROW_TYPES = tuple(
    (f.name, {"int": int, "bool": bool, "str": str}[str(f.type)]) for f in fields(Batch)
)


def _fast_constructor(cls: type) -> Any:
    """Build frozen `cls` instances from field values at the cost of a plain slotted class.

    A frozen dataclass's __init__ sets each field through object.__setattr__, which costs
    about four times a plain attribute store; batches are built by the million. So we build
    a non-frozen twin with the same slots (same layout) and then retag it as `cls`, an
    assignment CPython allows between layout-compatible classes.
    """
    twin = dataclass(slots=True)(
        type(f"_{cls.__name__}Builder", (), {"__annotations__": dict(cls.__annotations__)})
    )
    if twin.__slots__ != cls.__slots__:  # type: ignore[attr-defined]
        raise TypeError("builder layout differs from the frozen class")

    def make(*values: Any) -> Any:
        obj = twin(*values)
        obj.__class__ = cls
        return obj

    return make


make_batch = _fast_constructor(Batch)
"""`make_batch(*row)` builds a `Batch` from a row tuple in `BATCH_FIELDS` order, fast."""


@dataclass(frozen=True, slots=True)
class Record:
    """One record (v2) or inner message (v0/v1), as far as the checker needs it."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass
class ScanState:
    """What a segment scan found besides its batches."""

    errors: list[LogReadError] = field(default_factory=list)
    torn_tail: TornTail | None = None
    valid_bytes: int = 0  # byte position just past the last complete batch
    last_offset: int = -1  # last offset of the last batch yielded


# --------------------------------------------------------------------------------------
# The scan


def iter_batch_rows_py(
    buf: Any,
    *,
    path: str,
    segment: str,
    state: ScanState,
    final: bool = True,
    start: int = 0,
    end: int | None = None,
) -> Iterator[tuple]:
    """`iter_batch_rows` in pure Python: the reference the native walk is tested against."""
    mv = memoryview(buf)
    if end is None:
        end = len(mv)
    pos = start
    # Locals, not globals, in the loop: this runs once per batch.
    unpack_v2 = _V2.unpack_from
    checksum = crc32c
    names = COMPRESSION_NAMES
    last = state.last_offset
    limit = end - V2_HEADER_SIZE
    try:
        while pos < end:
            if pos <= limit:
                (
                    base,
                    length,
                    epoch,
                    magic,
                    crc,
                    attrs,
                    lod,
                    _bts,
                    max_ts,
                    pid,
                    pepoch,
                    bseq,
                    count,
                ) = unpack_v2(buf, pos)
                nxt = pos + 12 + length
                # Fast path: a complete, well-formed v2 batch with a good CRC, in order.
                # (49 = 61-byte header less the 12-byte prefix; the CRC starts at byte 21;
                # attribute bits: 0x20 control, 0x10 transactional.)
                if (
                    magic == 2
                    and length >= 49
                    and nxt <= end
                    and lod >= 0
                    and base > last
                    and checksum(mv[pos + 21 : nxt]) == crc
                ):
                    last = base + lod
                    yield (
                        base,
                        last,
                        epoch,
                        crc,
                        True,
                        nxt - pos,
                        2,
                        count,
                        names[attrs & 7],
                        attrs & 0x20 != 0,
                        attrs & 0x10 != 0,
                        pid,
                        pepoch,
                        bseq,
                        max_ts,
                        segment,
                        pos,
                    )
                    pos = nxt
                    continue
            row, nxt, last = slow_step(
                mv, pos, end, last, path=path, segment=segment, state=state, final=final
            )
            if row is not None:
                yield row
            if nxt is None:
                break
            pos = nxt
    finally:
        state.last_offset = last
        state.valid_bytes = pos


def slow_step(
    mv: memoryview,
    pos: int,
    end: int,
    last: int,
    *,
    path: str,
    segment: str,
    state: ScanState,
    final: bool,
) -> tuple[tuple | None, int | None, int]:
    """One entry a fast path declined, for every walk: (its row or None, the next position
    or None at the end, the highest last offset so far)."""
    state.last_offset = last
    row, nxt = _slow_entry(mv, pos, end, path=path, segment=segment, state=state, final=final)
    return row, nxt, last if row is None else max(last, row[1])


def _slow_entry(
    mv: memoryview, pos: int, end: int, *, path: str, segment: str, state: ScanState, final: bool
) -> tuple[tuple | None, int | None]:
    """Handle one entry the fast path declined. Returns (row or None, next position or None)."""
    errors = state.errors
    remaining = end - pos
    if remaining < HEADER_UP_TO_MAGIC:
        _bad_tail(
            pos,
            end,
            path,
            state,
            final,
            f"header cut short: {remaining} bytes where at least {HEADER_UP_TO_MAGIC} are needed",
            TruncatedHeader,
        )
        return None, None
    base, length, _epoch, magic = _HEAD.unpack_from(mv, pos)
    if base == 0 and length == 0 and _all_zero(mv, pos, end):
        # A preallocated segment (log.preallocate) or an unwritten extent after a crash:
        # Kafka's recovery stops at the first zero-length entry and truncates there.
        _bad_tail(
            pos,
            end,
            path,
            state,
            final,
            "zero-filled tail (preallocated or never written)",
            TruncatedBatch,
        )
        return None, None
    if magic not in MIN_LENGTH:
        errors.append(
            UnknownMagic(
                path,
                pos,
                f"magic byte {magic} (expected 0, 1 or 2); "
                "the rest of this segment cannot be framed",
            )
        )
        return None, None
    if length < MIN_LENGTH[magic]:
        errors.append(
            ImpossibleLength(
                path,
                pos,
                f"length {length} is below the minimum "
                f"{MIN_LENGTH[magic]} for magic {magic}; the rest of this "
                "segment cannot be framed",
            )
        )
        return None, None
    nxt = pos + LOG_OVERHEAD + length
    if nxt > end:
        _bad_tail(
            pos,
            end,
            path,
            state,
            final,
            f"entry declares {LOG_OVERHEAD + length} bytes but only {remaining} remain",
            TruncatedBatch,
        )
        return None, None
    if magic == 2:
        row = _v2_row(mv, pos, nxt, path, segment, errors)
    else:
        row = _legacy_row(mv, pos, nxt, path, segment, errors)
    if row is None:
        return None, nxt
    if not row[4] and final and (nxt == end or _all_zero(mv, nxt, end)):
        # The last batch of the log is there in full length but not in content (its CRC
        # fails): a torn write, the file grew before all of its pages reached the disk.
        errors.pop()
        state.torn_tail = TornTail(
            path, pos, end - pos, f"last batch [{row[0]}, {row[1]}] fails its checksum"
        )
        return None, None
    if row[0] <= state.last_offset:
        errors.append(
            OffsetOrderError(
                path, pos, f"batch [{row[0]}, {row[1]}] does not follow offset {state.last_offset}"
            )
        )
    return row, nxt


def _bad_tail(
    pos: int,
    end: int,
    path: str,
    state: ScanState,
    final: bool,
    reason: str,
    error_type: type[LogReadError],
) -> None:
    if final:
        state.torn_tail = TornTail(path, pos, end - pos, reason)
    else:
        state.errors.append(error_type(path, pos, reason + " (not the last segment of the log)"))


_ZEROS = bytes(1 << 20)


def _all_zero(mv: memoryview, pos: int, end: int) -> bool:
    step = len(_ZEROS)
    while pos < end:
        n = min(step, end - pos)
        if mv[pos : pos + n] != _ZEROS[:n]:
            return False
        pos += n
    return True


def _v2_row(
    mv: memoryview, pos: int, nxt: int, path: str, segment: str, errors: list[LogReadError]
) -> tuple | None:
    (base, _length, epoch, _magic, crc, attrs, lod, _bts, max_ts, pid, pepoch, bseq, count) = (
        _V2.unpack_from(mv, pos)
    )
    computed = crc32c(mv[pos + V2_CRC_START : nxt])
    valid = computed == crc
    if not valid:
        errors.append(CrcMismatch(path, pos, "CRC-32C", crc, computed))
    if lod < 0:
        errors.append(CorruptBatch(path, pos, f"negative lastOffsetDelta {lod}"))
        return None
    return (
        base,
        base + lod,
        epoch,
        crc,
        valid,
        nxt - pos,
        2,
        count,
        COMPRESSION_NAMES[attrs & _ATTR_COMPRESSION],
        attrs & _ATTR_CONTROL != 0,
        attrs & _ATTR_TRANSACTIONAL != 0,
        pid,
        pepoch,
        bseq,
        max_ts,
        segment,
        pos,
    )


def _legacy_row(
    mv: memoryview, pos: int, nxt: int, path: str, segment: str, errors: list[LogReadError]
) -> tuple | None:
    offset, _length, crc, magic, attrs = _LEGACY.unpack_from(mv, pos)
    computed = zlib.crc32(mv[pos + LEGACY_CRC_START : nxt])
    valid = computed == crc
    if not valid:
        errors.append(CrcMismatch(path, pos, "CRC-32", crc, computed))
    codec = attrs & _ATTR_COMPRESSION
    try:
        timestamp, _key, value = _legacy_fields(mv, pos + LOG_OVERHEAD, nxt, magic)
    except ValueError as exc:
        errors.append(CorruptBatch(path, pos, f"v{magic} message: {exc}"))
        return None
    base, count = offset, 1
    if codec != 0 and valid:
        try:
            inner = _legacy_inner_offsets(value, codec, magic, offset)
            base, count = inner[0], len(inner)
        except ValueError as exc:
            errors.append(CorruptBatch(path, pos, f"compressed v{magic} wrapper: {exc}"))
    return (
        base,
        offset,
        -1,
        crc,
        valid,
        nxt - pos,
        magic,
        count,
        COMPRESSION_NAMES[codec],
        False,
        False,
        -1,
        -1,
        -1,
        timestamp,
        segment,
        pos,
    )


def _legacy_fields(
    mv: memoryview, msg: int, end: int, magic: int
) -> tuple[int, bytes | None, bytes | None]:
    """(timestamp, key, value) of the v0/v1 message starting at `msg` (its CRC field)."""
    cursor = msg + 6
    timestamp = -1
    if magic == 1:
        (timestamp,) = _I64.unpack_from(mv, cursor)
        cursor += 8
    key, cursor = _legacy_bytes(mv, cursor, end, "key")
    value, cursor = _legacy_bytes(mv, cursor, end, "value")
    if cursor != end:
        raise ValueError(f"{end - cursor} bytes left over after the value")
    return timestamp, key, value


def _legacy_bytes(mv: memoryview, cursor: int, end: int, what: str) -> tuple[bytes | None, int]:
    if cursor + 4 > end:
        raise ValueError(f"{what} length runs past the message")
    (n,) = _I32.unpack_from(mv, cursor)
    cursor += 4
    if n == -1:
        return None, cursor
    if n < 0 or cursor + n > end:
        raise ValueError(f"impossible {what} length {n}")
    return bytes(mv[cursor : cursor + n]), cursor + n


def _legacy_inner_offsets(value: bytes | None, codec: int, magic: int, wrapper: int) -> list[int]:
    return [r.offset for r in _legacy_inner(value, codec, magic, wrapper, -1)]


def _legacy_inner(
    value: bytes | None, codec: int, magic: int, wrapper: int, wrapper_ts: int
) -> list[Record]:
    if value is None:
        raise ValueError("compressed wrapper has a null value")
    data = decompress(codec, value, magic)
    inner: list[Record] = []
    mv = memoryview(data)
    pos, end = 0, len(data)
    while pos < end:
        if end - pos < LOG_OVERHEAD + MIN_LENGTH[0]:
            raise ValueError(f"inner message set ends with {end - pos} stray bytes")
        offset, length, _crc, inner_magic, inner_attrs = _LEGACY.unpack_from(mv, pos)
        nxt = pos + LOG_OVERHEAD + length
        if inner_magic not in (0, 1) or length < MIN_LENGTH[inner_magic] or nxt > end:
            raise ValueError(f"inner message at byte {pos} of the decompressed set is malformed")
        if inner_attrs & _ATTR_COMPRESSION:
            raise ValueError("inner messages must not be compressed")
        ts, key, val = _legacy_fields(mv, pos + LOG_OVERHEAD, nxt, inner_magic)
        inner.append(Record(offset, wrapper_ts if inner_magic == 1 else ts, key, val))
        pos = nxt
    if not inner:
        raise ValueError("compressed wrapper holds no messages")
    if magic == 1:
        # KIP-31: v1 inner offsets are relative; the wrapper holds the absolute last offset.
        # A wrapper offset of 0 comes from some old clients' produce requests and is taken
        # as-is, as Kafka's AbstractLegacyRecordBatch does.
        last_inner = inner[-1].offset
        if wrapper != 0 and wrapper < last_inner:
            raise ValueError(
                f"wrapper offset {wrapper} is below its last inner offset {last_inner}"
            )
        shift = 0 if wrapper == 0 else wrapper - last_inner
        inner = [Record(r.offset + shift, r.timestamp, r.key, r.value) for r in inner]
    return inner
