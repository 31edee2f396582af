"""Encoders for v2 record batches: the inverse of `checkers.records`, for what the product
itself writes (the wire client's produce request) and for crafting inputs.

Compression follows Kafka's own writers: snappy through snappy-java's framing, LZ4 as
KafkaLZ4 frames (with KAFKA-3160's descriptor checksum for magic 0), zstd without a content
size.
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Sequence

import lz4.frame
import snappy
import zstandard
from crc32c import crc32c

from checkers.codec import varint
from checkers.compression import xxh32
from checkers.records import Record

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
BASE_TIMESTAMP = 1_700_000_000_000


# --------------------------------------------------------------------------------------
# v2 record batches


def encode_record(
    offset_delta: int,
    value: bytes | None,
    key: bytes | None = None,
    timestamp_delta: int = 0,
    headers: Sequence[tuple[str, bytes | None]] = (),
) -> bytes:
    body = bytearray(b"\x00")
    body += varint(timestamp_delta) + varint(offset_delta)
    for blob in (key, value):
        body += varint(-1) if blob is None else varint(len(blob)) + blob
    body += varint(len(headers))
    for hkey, hval in headers:
        raw = hkey.encode()
        body += varint(len(raw)) + raw
        body += varint(-1) if hval is None else varint(len(hval)) + hval
    return varint(len(body)) + bytes(body)


def compress(codec: str, data: bytes, magic: int = 2) -> bytes:
    """Compress as Kafka's producers and brokers do (snappy-java framing, KafkaLZ4 frames)."""
    if codec == "none":
        return data
    if codec == "gzip":
        return gzip.compress(data, mtime=0)
    if codec == "snappy":
        block = snappy.compress(data)
        return b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block
    if codec == "lz4":
        frame = bytearray(
            lz4.frame.compress(
                data,
                block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                block_linked=False,
                content_checksum=False,
                store_size=False,
            )
        )
        if magic == 0:
            # KAFKA-3160: magic 0 frames hash the frame magic into the descriptor checksum.
            frame[6] = (xxh32(bytes(frame[0:6])) >> 8) & 0xFF
        return bytes(frame)
    if codec == "zstd":
        return zstandard.ZstdCompressor(write_content_size=False).compress(data)
    raise ValueError(f"unknown codec {codec!r}")


def encode_v2_batch(
    base_offset: int,
    records: Sequence[bytes | tuple[bytes | None, bytes | None] | None] | None = None,
    *,
    last_offset: int | None = None,
    leader_epoch: int = 0,
    compression: str = "none",
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    log_append_time: bool = False,
    base_timestamp: int | None = None,
    record_bytes: bytes | None = None,
) -> bytes:
    """One v2 batch. `records` are values or (key, value) pairs at consecutive offsets.

    With `last_offset` and no `records`, the batch holds one small record per offset.
    `record_bytes` replaces the encoded records section outright (for crafting oddities).
    """
    if records is None:
        last = base_offset if last_offset is None else last_offset
        records = [f"v{off}-e{leader_epoch}".encode() for off in range(base_offset, last + 1)]
    ts = BASE_TIMESTAMP + base_offset if base_timestamp is None else base_timestamp
    kept = []
    for i, rec in enumerate(records):
        key, value = rec if isinstance(rec, tuple) else (None, rec)
        kept.append(Record(base_offset + i, ts + i, key, value))
    return encode_records_batch(
        base_offset,
        kept,
        last_offset=base_offset + len(kept) - 1 if last_offset is None else last_offset,
        leader_epoch=leader_epoch,
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=is_transactional,
        is_control=is_control,
        log_append_time=log_append_time,
        base_timestamp=ts,
        record_bytes=record_bytes,
    )


def encode_records_batch(
    base_offset: int,
    records: Sequence[Record],
    *,
    last_offset: int,
    leader_epoch: int = 0,
    compression: str = "none",
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    log_append_time: bool = False,
    base_timestamp: int | None = None,
    delete_horizon: int | None = None,
    record_bytes: bytes | None = None,
) -> bytes:
    """A v2 batch holding `records` at their own offsets and timestamps: offsets may skip and
    the last offset may lie past the last record, as in a batch the log cleaner rewrote
    (MemoryRecords.filterTo keeps lastOffsetDelta). `delete_horizon` stamps the batch as
    the cleaner does from 3.1 (KIP-534: attribute bit 0x40, the horizon in the base
    timestamp field, record timestamps relative to it)."""
    stamps = [r.timestamp for r in records]
    if delete_horizon is not None:
        ts = delete_horizon
    elif base_timestamp is not None:
        ts = base_timestamp
    else:
        ts = stamps[0] if stamps else BASE_TIMESTAMP + base_offset
    if record_bytes is None:
        encoded = bytearray()
        for r in records:
            encoded += encode_record(
                r.offset - base_offset, r.value, r.key, r.timestamp - ts, list(r.headers)
            )
        record_bytes = compress(compression, bytes(encoded))
    attrs = CODECS[compression]
    attrs |= 0x08 if log_append_time else 0
    attrs |= 0x10 if is_transactional else 0
    attrs |= 0x20 if is_control else 0
    attrs |= 0x40 if delete_horizon is not None else 0
    max_ts = max(stamps) if stamps else ts
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            attrs,
            last_offset - base_offset,
            ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
        + record_bytes
    )
    length = 4 + 1 + 4 + len(after_crc)  # leader epoch, magic, crc, rest
    header = struct.pack(">qiibI", base_offset, length, leader_epoch, 2, crc32c(after_crc))
    return header + after_crc
