"""Batch headers, CRCs, v0/v1 wrappers and torn tails, from crafted bytes."""

from __future__ import annotations

import struct
import zlib

import pandas as pd
import pyarrow as pa
import pytest
from crc32c import crc32c

from checkers.compression import decompress, xxh32
from checkers.contents import parse_batch, read_records
from checkers.encode import encode_record
from checkers.errors import (
    CorruptBatch,
    CrcMismatch,
    ImpossibleLength,
    LogReadError,
    OffsetOrderError,
    TruncatedBatch,
    TruncatedHeader,
    UnknownMagic,
)
from checkers.records import (
    BATCH_FIELDS,
    Batch,
    ScanState,
    make_batch,
)
from checkers.walk import iter_batch_rows
from testsupport import craft


def scan(data: bytes, final: bool = True) -> tuple[list[Batch], ScanState]:
    state = ScanState()
    rows = iter_batch_rows(
        data,
        path="/x/t-0/00000000000000000000.log",
        segment="00000000000000000000.log",
        state=state,
        final=final,
    )
    return [make_batch(*r) for r in rows], state


# --------------------------------------------------------------------------------------
# v2


def test_v2_header_fields() -> None:
    data = craft.encode_v2_batch(
        100,
        [b"a", b"b", b"c"],
        leader_epoch=7,
        producer_id=42,
        producer_epoch=3,
        base_sequence=9,
        is_transactional=True,
        compression="zstd",
    )
    b = parse_batch(data, segment="s.log")
    assert (b.base_offset, b.last_offset, b.leader_epoch, b.magic) == (100, 102, 7, 2)
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (42, 3, 9)
    assert (b.record_count, b.compression, b.is_transactional, b.is_control) == (
        3,
        "zstd",
        True,
        False,
    )
    assert b.size == len(data) and b.position == 0 and b.segment == "s.log"
    assert b.crc == struct.unpack_from(">I", data, 17)[0] and b.crc_valid
    assert b.crc == crc32c(data[21:])
    assert b.max_timestamp == craft.BASE_TIMESTAMP + 100 + 2


def test_leader_epoch_is_outside_the_crc() -> None:
    data = bytearray(craft.encode_v2_batch(0, [b"x"], leader_epoch=1))
    data[12:16] = struct.pack(">i", 99)  # a broker stamps the epoch without touching the CRC
    b = parse_batch(bytes(data))
    assert b.leader_epoch == 99 and b.crc_valid


def test_crc_mismatch_names_file_and_byte() -> None:
    good = craft.encode_v2_batch(0, [b"x"])
    bad = bytearray(craft.encode_v2_batch(1, [b"y"]))
    bad[-1] ^= 0x01
    batches, state = scan(good + bytes(bad) + craft.encode_v2_batch(2, [b"z"]))
    assert [b.crc_valid for b in batches] == [True, False, True]
    (error,) = state.errors
    assert isinstance(error, CrcMismatch) and error.offset == len(good)
    stored = struct.unpack_from(">I", bad, 17)[0]
    computed = crc32c(bytes(bad[21:]))
    assert str(error) == (
        f"/x/t-0/00000000000000000000.log at byte {len(good)}: CRC-32C mismatch "
        f"(stored 0x{stored:08x}, computed 0x{computed:08x})"
    )


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_v2_records_decode_for_every_codec(codec: str) -> None:
    values = [f"value-{i}".encode() for i in range(20)]
    data = craft.encode_v2_batch(500, values, compression=codec)
    b = parse_batch(data)
    assert b.compression == codec and (b.base_offset, b.last_offset) == (500, 519)
    records = read_records(data, 0)
    assert [r.offset for r in records] == list(range(500, 520))
    assert [r.value for r in records] == values


def test_control_batch_flags() -> None:
    data = craft.encode_control_batch(
        5, 1, b"\x00\x00\x00\x00\x00\x07", producer_id=8, is_transactional=True
    )
    b = parse_batch(data)
    assert b.is_control and b.is_transactional and b.producer_id == 8
    (record,) = read_records(data, 0)
    assert record.key == b"\x00\x00\x00\x01"


def test_record_headers_and_keys() -> None:
    body = encode_record(0, b"v", b"k", headers=[("h1", b"x"), ("h2", None)])
    data = craft.encode_v2_batch(0, [b"unused"], record_bytes=body)
    (rec,) = read_records(data, 0)
    assert (rec.key, rec.value, rec.headers) == (b"k", b"v", (("h1", b"x"), ("h2", None)))


# --------------------------------------------------------------------------------------
# v0 and v1


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_legacy_messages(magic: int) -> None:
    data = b"".join(craft.encode_legacy_message(o, f"m{o}".encode(), magic=magic) for o in range(3))
    batches, state = scan(data)
    assert not state.errors
    assert [(b.base_offset, b.last_offset, b.leader_epoch, b.magic) for b in batches] == [
        (0, 0, -1, magic),
        (1, 1, -1, magic),
        (2, 2, -1, magic),
    ]
    assert all(b.crc == zlib.crc32(data[b.position + 16 : b.position + b.size]) for b in batches)
    assert batches[0].max_timestamp == (-1 if magic == 0 else craft.BASE_TIMESTAMP)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
def test_compressed_wrapper_offset_is_the_last_inner_offset(magic: int, codec: str) -> None:
    data = craft.encode_legacy_wrapper([10, 11, 12, 13], codec, magic=magic)
    (wrapper_offset,) = struct.unpack_from(">q", data, 0)
    assert wrapper_offset == 13
    b = parse_batch(data)
    assert (b.base_offset, b.last_offset, b.record_count, b.compression) == (10, 13, 4, codec)
    assert [r.offset for r in read_records(data, 0)] == [10, 11, 12, 13]


def test_magic0_lz4_uses_the_broken_header_checksum_and_still_reads() -> None:
    # KAFKA-3160: the descriptor checksum of a magic 0 frame covers the frame magic too.
    data = craft.encode_legacy_wrapper([0, 1], "lz4", magic=0)
    frame = data[12 + 4 + 1 + 1 + 4 + 4 :]  # offset+length, crc, magic, attrs, key -1, value len
    assert frame[6] == (xxh32(frame[0:6]) >> 8) & 0xFF
    assert frame[6] != (xxh32(frame[4:6]) >> 8) & 0xFF
    assert parse_batch(data).base_offset == 0
    with pytest.raises(ValueError):  # the same frame under magic 1 is rejected
        decompress(3, frame, 1)


def test_v1_wrapper_with_offset_zero_keeps_relative_offsets() -> None:
    # Some old clients send wrappers with offset 0; Kafka takes inner offsets as they are.
    data = craft.encode_legacy_wrapper([0, 1, 2], "gzip", magic=1)
    assert parse_batch(data).base_offset == 0


def test_snappy_without_xerial_framing() -> None:
    import snappy

    assert decompress(2, snappy.compress(b"raw block" * 10), 2) == b"raw block" * 10


def test_xxh32_known_values() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


# --------------------------------------------------------------------------------------
# Bad frames and torn tails


def test_truncated_header_at_the_end_is_a_torn_tail() -> None:
    good = craft.encode_v2_batch(0, [b"x"])
    batches, state = scan(good + craft.encode_v2_batch(1, [b"y"])[:10])
    assert len(batches) == 1 and not state.errors
    assert state.torn_tail is not None and state.torn_tail.position == len(good)
    assert state.torn_tail.length == 10 and "header cut short" in state.torn_tail.reason
    assert state.valid_bytes == len(good)


def test_truncated_batch_at_the_end_is_a_torn_tail() -> None:
    good = craft.encode_v2_batch(0, [b"x"])
    partial = craft.encode_v2_batch(1, [b"y" * 100])[:70]
    batches, state = scan(good + partial)
    assert len(batches) == 1 and not state.errors
    assert state.torn_tail is not None and state.torn_tail.length == 70


def test_last_batch_with_bad_crc_is_a_torn_tail() -> None:
    good = craft.encode_v2_batch(0, [b"x"])
    last = bytearray(craft.encode_v2_batch(1, [b"y" * 50]))
    last[-20:] = bytes(20)  # the final pages never reached the disk
    batches, state = scan(good + bytes(last))
    assert len(batches) == 1 and not state.errors
    assert state.torn_tail is not None and "fails its checksum" in state.torn_tail.reason


def test_zero_filled_tail() -> None:
    good = craft.encode_v2_batch(0, [b"x"])
    batches, state = scan(good + bytes(4096))
    assert len(batches) == 1 and not state.errors
    assert state.torn_tail is not None and "zero-filled" in state.torn_tail.reason


def test_incomplete_batch_in_a_non_final_segment_is_an_error() -> None:
    good = craft.encode_v2_batch(0, [b"x"])
    batches, state = scan(good + craft.encode_v2_batch(1, [b"y"])[:30], final=False)
    assert len(batches) == 1 and state.torn_tail is None
    (error,) = state.errors
    assert isinstance(error, TruncatedBatch) and error.offset == len(good)
    batches, state = scan(good + b"\x00" * 5, final=False)
    assert isinstance(state.errors[0], TruncatedHeader)


def test_impossible_length_stops_the_segment() -> None:
    good = craft.encode_v2_batch(0, [b"x"])
    bad = bytearray(craft.encode_v2_batch(1, [b"y"]))
    bad[8:12] = struct.pack(">i", 20)  # below the 49 bytes a v2 batch needs
    batches, state = scan(good + bytes(bad) + good)
    assert len(batches) == 1
    (error,) = state.errors
    assert isinstance(error, ImpossibleLength) and error.offset == len(good)
    bad[8:12] = struct.pack(">i", -5)
    _, state = scan(bytes(bad))
    assert isinstance(state.errors[0], ImpossibleLength)


def test_unknown_magic() -> None:
    bad = bytearray(craft.encode_v2_batch(0, [b"y"]))
    bad[16] = 7
    batches, state = scan(bytes(bad))
    assert not batches and isinstance(state.errors[0], UnknownMagic)


def test_offsets_going_backwards() -> None:
    data = craft.encode_v2_batch(10, [b"a"]) + craft.encode_v2_batch(5, [b"b"])
    batches, state = scan(data)
    assert [b.base_offset for b in batches] == [10, 5]
    assert isinstance(state.errors[0], OffsetOrderError)


def test_corrupt_compressed_payload_with_valid_crc() -> None:
    data = craft.encode_v2_batch(0, [b"x"], compression="gzip", record_bytes=b"not gzip at all")
    assert parse_batch(data).crc_valid
    with pytest.raises(CorruptBatch):
        read_records(data, 0)
    legacy = craft.encode_legacy_message(3, b"garbage", magic=1, codec=1)
    batches, state = scan(legacy)
    assert batches[0].base_offset == 3 and isinstance(state.errors[0], CorruptBatch)


def test_parse_batch_raises_typed_errors() -> None:
    data = bytearray(craft.encode_v2_batch(0, [b"x"]))
    data[-1] ^= 1
    with pytest.raises(CrcMismatch):
        parse_batch(bytes(data))
    with pytest.raises(LogReadError):
        parse_batch(bytes(data[:8]))


# --------------------------------------------------------------------------------------
# Rows for pandas and Arrow


def test_batch_round_trips_through_pandas_and_arrow() -> None:
    data = craft.encode_batches([(0, 4, 1), (5, 9, 2, "", "lz4")]) + craft.encode_legacy_message(
        10, b"v", magic=1
    )
    batches, _ = scan(data)
    frame = pd.DataFrame([b.to_row() for b in batches], columns=list(BATCH_FIELDS))
    assert [Batch.from_row(row) for _, row in frame.iterrows()] == batches
    table = pa.Table.from_pandas(frame)
    back = table.to_pandas()
    restored = [Batch.from_row(row) for _, row in back.iterrows()]
    assert restored == batches
    assert all(type(b.base_offset) is int for b in restored)
    assert all(type(b.crc_valid) is bool for b in restored)


def test_batch_is_frozen_and_slotted() -> None:
    b = parse_batch(craft.encode_v2_batch(0, [b"x"]))
    with pytest.raises(AttributeError):
        b.crc = 1  # type: ignore[misc]
    assert not hasattr(b, "__dict__")
    assert b == Batch(*(getattr(b, f) for f in BATCH_FIELDS))
    assert hash(b) == hash(Batch(*(getattr(b, f) for f in BATCH_FIELDS)))
