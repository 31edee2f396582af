"""Decompression of batch contents as Kafka's producers and brokers compress them, bounded
so that a corrupt or hostile input cannot make the reader allocate far more than it read.

- snappy through snappy-java's framing (SnappyOutputStream), or a raw block;
- LZ4 as KafkaLZ4 frames, with the descriptor checksum magic 0 messages get wrong
  (KAFKA-3160);
- zstd frames without a content size; gzip.
"""

from __future__ import annotations

import struct
import zlib

import lz4.frame
import snappy
import zstandard

from checkers.codec import read_uvarint

# Decompressed size beyond which we refuse to go on: a guard against corrupt or hostile
# input, far above any batch a broker accepts with default settings.
MAX_DECOMPRESSED = 256 * 1024 * 1024
COMPRESSION_NAMES = ("none", "gzip", "snappy", "lz4", "zstd", "unknown-5", "unknown-6", "unknown-7")
_I32 = struct.Struct(">i")
_U32LE = struct.Struct("<I")

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
