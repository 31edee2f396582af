"""One batch at a time: a batch parsed on its own, and the records inside it, decompressed.
For the metadata log, the history checker, the comparison of compacted partitions and the
tests; the segment scan reads headers only (`checkers.records`, `checkers.walk`).
"""

from __future__ import annotations

import struct
from typing import Any

from checkers.codec import read_varint
from checkers.compression import decompress
from checkers.errors import (
    CorruptBatch,
    CrcMismatch,
    ImpossibleLength,
    TruncatedBatch,
    TruncatedHeader,
    UnknownMagic,
)
from checkers.records import (
    _ATTR_COMPRESSION,
    _ATTR_TIMESTAMP_TYPE,
    _HEAD,
    _I32,
    _LEGACY,
    _V2,
    HEADER_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MIN_LENGTH,
    V2_HEADER_SIZE,
    Batch,
    Record,
    ScanState,
    _legacy_fields,
    _legacy_inner,
    iter_batch_rows_py,
    make_batch,
)


def parse_batch(buf: Any, position: int = 0, *, path: str = "", segment: str = "") -> Batch:
    """Parse the one entry at `position`; raise a `LogReadError` if it is not a good batch."""
    mv = memoryview(buf)
    state = ScanState(last_offset=-(1 << 63))
    end = len(mv)
    if end - position >= LOG_OVERHEAD:
        (length,) = _I32.unpack_from(mv, position + 8)
        if length >= 0:
            end = min(end, position + LOG_OVERHEAD + length)
    for row in iter_batch_rows_py(
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
