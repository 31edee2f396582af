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

The segment scan (`iter_batch_rows`) is the hot path: one precompiled `struct` unpack and
one C CRC call per v2 batch, plain tuples out, everything unusual handled off the fast path.
That fast path also exists in Rust (native/, see "The native walk" below), which the scan
uses when it is built; the Python loop stays the reference, and handles every entry the fast
path declines in both cases.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import lz4.frame
import snappy
import zstandard
from crc32c import crc32c

from checkers.codec import read_uvarint, read_varint
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

# Decompressed size beyond which we refuse to go on: a guard against corrupt or hostile
# input, far above any batch a broker accepts with default settings.
MAX_DECOMPRESSED = 256 * 1024 * 1024

COMPRESSION_NAMES = ("none", "gzip", "snappy", "lz4", "zstd", "unknown-5", "unknown-6", "unknown-7")

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


def iter_batch_rows(
    buf: Any,
    *,
    path: str,
    segment: str,
    state: ScanState,
    final: bool = True,
    start: int = 0,
    end: int | None = None,
) -> Iterator[tuple]:
    """Yield one tuple per batch in `buf` (fields in `BATCH_FIELDS` order).

    `buf` is any buffer (bytes, mmap, memoryview). Problems go to `state.errors`; nothing
    is raised. `final` says this is the last segment of its log, where an incomplete last
    batch is a torn tail (a crash mid-write) rather than corruption.

    The fast path runs in Rust (`iter_batch_rows_native`) when the extension is there and
    LOGFORK_NATIVE is not 0, in pure Python (`iter_batch_rows_py`) otherwise; both yield
    the same rows and leave the same state.
    """
    mv = memoryview(buf)
    if end is None:
        end = len(mv)
    if _native_fits(mv, segment, state, start, end):
        scan = iter_batch_rows_native
    else:
        scan = iter_batch_rows_py
    return scan(mv, path=path, segment=segment, state=state, final=final, start=start, end=end)


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
            state.last_offset = last
            row, nxt = _slow_entry(
                mv, pos, end, path=path, segment=segment, state=state, final=final
            )
            if row is not None:
                last = max(last, row[1])
                yield row
            if nxt is None:
                break
            pos = nxt
    finally:
        state.last_offset = last
        state.valid_bytes = pos


# --------------------------------------------------------------------------------------
# The native walk (native/: a Rust extension, built by maturin, module logfork_native)


def _load_native() -> Any:
    """The extension module, or None when it is not built or LOGFORK_NATIVE=0."""
    if os.environ.get("LOGFORK_NATIVE", "1") == "0":
        return None
    try:
        import logfork_native
    except ImportError:
        return None
    return logfork_native


native = _load_native()
"""`logfork_native` when the scan uses it, else None (then everything is pure Python)."""


@contextlib.contextmanager
def pure_python() -> Iterator[None]:
    """Scan with the pure-Python reader meanwhile (benchmarks and tests compare the two)."""
    global native
    saved, native = native, None
    try:
        yield
    finally:
        native = saved


# Batches per call into Rust: enough that a call's cost vanishes, few enough that a
# consumer who stops early has not paid for a whole segment.
NATIVE_CHUNK = 1024


def _native_fits(mv: memoryview, segment: Any, state: ScanState, start: int, end: int) -> bool:
    """Whether the native walk takes this scan; the rest (odd buffers and arguments, which
    the Python loop reads in its own way or fails on) stays with the reference."""
    return (
        native is not None
        and mv.ndim == 1
        and mv.itemsize == 1
        and mv.c_contiguous
        and type(segment) is str
        and 0 <= start <= end <= mv.nbytes
    )


def iter_batch_rows_native(
    buf: Any,
    *,
    path: str,
    segment: str,
    state: ScanState,
    final: bool = True,
    start: int = 0,
    end: int | None = None,
) -> Iterator[tuple]:
    """`iter_batch_rows` with its fast path in Rust: `native.walk_rows` takes the batches
    the Python loop's fast path takes and stops where it would decline one; that entry goes
    to `_slow_entry` as in the Python loop. Needs `native`."""
    mv = memoryview(buf)
    if end is None:
        end = len(mv)
    walk = native.walk_rows
    names = COMPRESSION_NAMES
    chunk = NATIVE_CHUNK
    pos = start
    last = state.last_offset
    try:
        while pos < end:
            rows, nxt, after = walk(mv, pos, end, last, segment, names, chunk)
            if rows:
                try:
                    for row in rows:
                        yield row
                except BaseException:
                    # Closed mid-chunk: leave the state as the Python loop leaves it, at
                    # the row being yielded.
                    pos, last = row[16], row[1]
                    raise
                pos, last = nxt, after
                if len(rows) == chunk:
                    continue
            if pos >= end:
                break
            state.last_offset = last
            row, nxt = _slow_entry(
                mv, pos, end, path=path, segment=segment, state=state, final=final
            )
            if row is not None:
                last = max(last, row[1])
                yield row
            if nxt is None:
                break
            pos = nxt
    finally:
        state.last_offset = last
        state.valid_bytes = pos


def iter_batch_chunks(
    buf: Any,
    *,
    path: str,
    segment: str,
    state: ScanState,
    final: bool = True,
    start: int = 0,
    end: int | None = None,
) -> Iterator[list[Batch]]:
    """The batches of `iter_batch_rows` as `Batch` objects, in lists, for callers that keep
    them all: the native walk makes them without a row tuple or a Python call per batch.

    Each list holds either fast-path batches (no error on the way) or the one batch of an
    entry `_slow_entry` handled, after the errors it found; so a caller that checks the
    first list's first batch appends its finding where a row-by-row caller would. Without
    `native` (or for a buffer it does not take), one list per batch of the Python loop.
    """
    mv = memoryview(buf)
    if end is None:
        end = len(mv)
    if not _native_fits(mv, segment, state, start, end):
        make = make_batch
        rows = iter_batch_rows_py(
            mv, path=path, segment=segment, state=state, final=final, start=start, end=end
        )
        try:
            for row in rows:
                yield [make(*row)]
        finally:
            rows.close()
        return
    walk = native.walk_batches
    names = COMPRESSION_NAMES
    chunk = NATIVE_CHUNK
    pos = start
    last = state.last_offset
    try:
        while pos < end:
            batches, nxt, after = walk(
                mv, pos, end, last, segment, names, Batch, BATCH_FIELDS, chunk
            )
            if batches:
                # The Python loop's state while it yields a list's last batch.
                pos, last = batches[-1].position, after
                yield batches
                pos = nxt
                if len(batches) == chunk:
                    continue
            if pos >= end:
                break
            state.last_offset = last
            row, nxt = _slow_entry(
                mv, pos, end, path=path, segment=segment, state=state, final=final
            )
            if row is not None:
                last = max(last, row[1])
                yield [make_batch(*row)]
            if nxt is None:
                break
            pos = nxt
    finally:
        state.last_offset = last
        state.valid_bytes = pos


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


# --------------------------------------------------------------------------------------
# One batch at a time (tests, tools, the metadata log)


def parse_batch(buf: Any, position: int = 0, *, path: str = "", segment: str = "") -> Batch:
    """Parse the one entry at `position`; raise a `LogReadError` if it is not a good batch."""
    mv = memoryview(buf)
    state = ScanState(last_offset=-(1 << 63))
    end = len(mv)
    if end - position >= LOG_OVERHEAD:
        (length,) = _I32.unpack_from(mv, position + 8)
        if length >= 0:
            end = min(end, position + LOG_OVERHEAD + length)
    for row in iter_batch_rows(
        mv, path=path, segment=segment, state=state, final=False, start=position, end=end
    ):
        for error in state.errors:
            if isinstance(error, CrcMismatch):
                raise error
        return make_batch(*row)
    if state.errors:
        raise state.errors[0]
    raise TruncatedHeader(path, position, "no complete batch here")


def read_records(buf: Any, position: int, *, path: str = "") -> list[Record]:
    """Decode the records of the batch at `position` (decompressing as needed).

    Raises `CorruptBatch` (or another `LogReadError`) when the contents do not decode.
    """
    mv = memoryview(buf)
    if len(mv) - position < HEADER_UP_TO_MAGIC:
        raise TruncatedHeader(path, position, "header cut short")
    _base, length, _epoch, magic = _HEAD.unpack_from(mv, position)
    if magic not in MIN_LENGTH:
        raise UnknownMagic(path, position, f"magic byte {magic}")
    if length < MIN_LENGTH[magic]:
        raise ImpossibleLength(path, position, f"length {length}")
    end = position + LOG_OVERHEAD + length
    if end > len(mv):
        raise TruncatedBatch(path, position, "batch runs past the end of the buffer")
    try:
        if magic == 2:
            return _v2_records(mv, position, end)
        offset, _length, _crc, magic, attrs = _LEGACY.unpack_from(mv, position)
        ts, key, value = _legacy_fields(mv, position + LOG_OVERHEAD, end, magic)
        codec = attrs & _ATTR_COMPRESSION
        if codec == 0:
            return [Record(offset, ts, key, value)]
        return _legacy_inner(value, codec, magic, offset, ts)
    except (ValueError, IndexError, struct.error) as exc:
        raise CorruptBatch(path, position, f"records do not decode: {exc}") from None


def _v2_records(mv: memoryview, pos: int, end: int) -> list[Record]:
    (
        base,
        _length,
        _epoch,
        _magic,
        _crc,
        attrs,
        _lod,
        base_ts,
        max_ts,
        _pid,
        _pepoch,
        _bseq,
        count,
    ) = _V2.unpack_from(mv, pos)
    codec = attrs & _ATTR_COMPRESSION
    data: Any = mv[pos + V2_HEADER_SIZE : end]
    if codec:
        data = memoryview(decompress(codec, bytes(data), 2))
    log_append_time = attrs & _ATTR_TIMESTAMP_TYPE != 0
    records: list[Record] = []
    cursor, limit = 0, len(data)
    if count < 0:
        raise ValueError(f"negative record count {count}")
    for _ in range(count):
        size, cursor = read_varint(data, cursor)
        stop = cursor + size
        if size < 0 or stop > limit:
            raise ValueError(f"record of {size} bytes runs past the batch")
        cursor += 1  # attributes: unused
        ts_delta, cursor = read_varint(data, cursor)
        offset_delta, cursor = read_varint(data, cursor)
        key, cursor = _varint_bytes(data, cursor, stop)
        value, cursor = _varint_bytes(data, cursor, stop)
        n_headers, cursor = read_varint(data, cursor)
        if n_headers < 0 or n_headers > stop - cursor:
            raise ValueError(f"impossible header count {n_headers}")
        headers = []
        for _ in range(n_headers):
            hkey, cursor = _varint_bytes(data, cursor, stop)
            hval, cursor = _varint_bytes(data, cursor, stop)
            headers.append(((hkey or b"").decode("utf-8", "replace"), hval))
        if cursor != stop:
            raise ValueError(f"record ends {stop - cursor} bytes away from its declared size")
        ts = max_ts if log_append_time else base_ts + ts_delta
        records.append(Record(base + offset_delta, ts, key, value, tuple(headers)))
    if cursor != limit:
        raise ValueError(f"{limit - cursor} bytes left over after {count} records")
    return records


def _varint_bytes(data: Any, cursor: int, stop: int) -> tuple[bytes | None, int]:
    n, cursor = read_varint(data, cursor)
    if n == -1:
        return None, cursor
    if n < 0 or cursor + n > stop:
        raise ValueError(f"impossible length {n}")
    return bytes(data[cursor : cursor + n]), cursor + n


# --------------------------------------------------------------------------------------
# Compression

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_CODEC_ERRORS = (
    zlib.error,
    snappy.UncompressError,
    RuntimeError,
    zstandard.ZstdError,
    MemoryError,
    OverflowError,
)
_LZ4_MAGIC = 0x184D2204


def output_limit(compressed: int) -> int:
    """How far a compressed input may expand. Bounded by the input's own size, so that a
    corrupt size field or a decompression bomb cannot make the reader allocate far more
    memory than it read: Kafka's batches are at most message.max.bytes (1 MB by default)
    compressed, and real data does not expand a thousandfold."""
    return min(MAX_DECOMPRESSED, max(1 << 20, 1024 * compressed))


_CHUNK = 1 << 16


def decompress(codec: int, data: bytes, magic: int) -> bytes:
    """Decompress a batch's records (v2) or a wrapper's value (v0/v1). Raises ValueError."""
    limit = output_limit(len(data))
    try:
        if codec == 1:
            return _gunzip(data, limit)
        if codec == 2:
            return _unsnappy(data, limit)
        if codec == 3:
            return _unlz4(data, magic, limit)
        if codec == 4:
            if magic < 2:
                raise ValueError("zstd is not allowed below magic 2")
            return _unzstd(data, limit)
    except _CODEC_ERRORS as exc:  # each codec raises its own type on corrupt input
        raise ValueError(f"{COMPRESSION_NAMES[codec]}: {exc}") from None
    raise ValueError(f"unknown compression codec {codec}")


def _gunzip(data: bytes, limit: int) -> bytes:
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = d.decompress(data, limit + 1)
    if len(out) > limit:
        raise ValueError("gzip data expands beyond the size limit")
    if not d.eof:
        raise ValueError("gzip stream is truncated")
    return out


def _unsnappy(data: bytes, limit: int) -> bytes:
    # Kafka writes snappy through snappy-java's SnappyOutputStream: a 16-byte header, then
    # blocks of [int32 length][raw snappy]. Data without that header is read as one raw
    # block, as snappy-java's SnappyInputStream does.
    if not data.startswith(_XERIAL_MAGIC):
        return _snappy_block(data, limit)
    pos, out, total = 16, [], 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise ValueError("xerial snappy block length cut short")
        (n,) = _I32.unpack_from(data, pos)
        pos += 4
        if n < 0 or pos + n > len(data):
            raise ValueError(f"impossible xerial snappy block length {n}")
        block = _snappy_block(data[pos : pos + n], limit - total)
        total += len(block)
        if total > limit:
            raise ValueError("snappy data expands beyond the size limit")
        out.append(block)
        pos += n
    return b"".join(out)


def _snappy_block(data: bytes, limit: int) -> bytes:
    declared, _ = read_uvarint(data, 0)  # raw snappy starts with the uncompressed length
    if declared > limit:
        raise ValueError(f"snappy block declares {declared} bytes")
    return bytes(snappy.decompress(data))


def _unlz4(data: bytes, magic: int, limit: int) -> bytes:
    if len(data) < 7 or _U32LE.unpack_from(data, 0)[0] != _LZ4_MAGIC:
        raise ValueError("not an LZ4 frame")
    flg = data[4]
    descriptor_end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(data) <= descriptor_end:
        raise ValueError("LZ4 frame descriptor cut short")
    if magic == 0:
        # KAFKA-3160: Kafka before 0.10 hashed the frame magic into the descriptor checksum,
        # and still does for magic 0 messages. Put the standard checksum in its place.
        fixed = (xxh32(data[4:descriptor_end]) >> 8) & 0xFF
        data = data[:descriptor_end] + bytes((fixed,)) + data[descriptor_end + 1 :]
    # In chunks: a frame's declared content size is not trusted for an allocation.
    decompressor = lz4.frame.LZ4FrameDecompressor()
    out, pending = bytearray(), data
    while True:
        out += decompressor.decompress(pending, max_length=_CHUNK)
        pending = b""
        if len(out) > limit:
            raise ValueError("lz4 data expands beyond the size limit")
        if decompressor.eof:
            return bytes(out)
        if decompressor.needs_input:
            raise ValueError("lz4 frame is truncated")


def _unzstd(data: bytes, limit: int) -> bytes:
    # Kafka's zstd frames carry no content size, so read the stream to its end, in chunks
    # (a single read of the limit would allocate the whole limit up front).
    reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
    out = bytearray()
    while chunk := reader.read(_CHUNK):
        out += chunk
        if len(out) > limit:
            raise ValueError("zstd data expands beyond the size limit")
    return bytes(out)


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32, used only for the 2 to 15 bytes of an LZ4 frame descriptor."""
    n, i = len(data), 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while i <= n - 16:
            for lane in range(4):
                word = _U32LE.unpack_from(data, i)[0]
                v[lane] = (_rotl((v[lane] + word * _P2) & _M32, 13) * _P1) & _M32
                i += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        h = (_rotl((h + _U32LE.unpack_from(data, i)[0] * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h
