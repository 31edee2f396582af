"""Synthetic broker log dirs for the audit benchmarks: many partitions, every replica a copy
of the same batches, a few partitions planted with a divergence on the last broker.

Written fast enough for tens of millions of batches: a v2 batch's CRC covers its bytes from
the attributes on, and its base offset and partition leader epoch lie outside (KIP-101), so
one encoded batch body serves every offset and epoch; only the 17-byte prefix changes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from checkers.encode import encode_v2_batch

_PREFIX = struct.Struct(">qiib")  # base offset, length, partition leader epoch, magic


@dataclass(frozen=True)
class Fleet:
    dirs: list[Path]
    partitions: int
    batches: int  # per replica
    planted: dict[tuple[str, int], int]  # partition -> the offset its divergence starts at

    @property
    def total_batches(self) -> int:
        return len(self.dirs) * self.partitions * self.batches


def _body(records: int, tag: bytes) -> tuple[int, bytes]:
    """(length, bytes from the CRC on) of a batch of `records` one-record-sized values."""
    batch = encode_v2_batch(0, [b"v%d-" % i + tag for i in range(records)])
    length = struct.unpack_from(">i", batch, 8)[0]
    return length, batch[17:]


def _segment(batches: int, records: int, epochs: int, planted_at: int | None) -> bytes:
    same = _body(records, b"same")
    other = _body(records, b"other")  # another length too: each keeps its own
    parts = []
    for i in range(batches):
        base = i * records
        epoch = 1 + epochs * i // batches
        length, body = other if planted_at is not None and base >= planted_at else same
        parts.append(_PREFIX.pack(base, length, epoch, 2) + body)
    return b"".join(parts)


def _checkpoint(entries: Sequence[str]) -> str:
    return "\n".join(["0", str(len(entries)), *entries]) + "\n"


def write_fleet(
    root: Path,
    *,
    partitions: int,
    brokers: int = 3,
    batches: int = 100,
    records: int = 1,
    topics: int = 20,
    planted: Sequence[int] = (7,),
) -> Fleet:
    """`brokers` log dirs under `root` holding `partitions` partitions each; the partitions
    numbered in `planted` differ on the last broker from their middle batch on."""
    per_topic = max(1, -(-partitions // topics))
    names = [(f"topic{n // per_topic:03d}", n % per_topic) for n in range(partitions)]
    middle = batches // 2 * records
    plants = {names[n]: middle for n in planted if n < partitions}
    good = _segment(batches, records, 3, None)
    bad = _segment(batches, records, 3, middle) if plants else good
    end = batches * records
    dirs = []
    for broker in range(1, brokers + 1):
        log_dir = root / f"broker-{broker}"
        log_dir.mkdir(parents=True, exist_ok=True)
        (log_dir / "meta.properties").write_text(f"version=0\nbroker.id={broker}\n")
        for tp in names:
            pdir = log_dir / f"{tp[0]}-{tp[1]}"
            pdir.mkdir(exist_ok=True)
            data = bad if broker == brokers and tp in plants else good
            (pdir / f"{0:020d}.log").write_bytes(data)
        hws = [f"{t} {p} {end}" for t, p in names]
        (log_dir / "replication-offset-checkpoint").write_text(_checkpoint(hws))
        dirs.append(log_dir)
    return Fleet(dirs, partitions, batches, plants)
