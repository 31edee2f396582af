"""A partition directory's segments, and the scan across them.

A partition dir holds ``<20-digit base offset>.log`` segments plus their ``.index``,
``.timeindex``, ``.txnindex`` and ``.snapshot`` companions (not read here: the indexes are
preallocated and rebuilt by Kafka at will). Files ending in ``.deleted``, ``.cleaned`` or
``.swap`` belong to an unfinished deletion, cleaning or segment swap. Kafka's log recovery
(LogLoader, KAFKA-6264) deletes the first two and may complete a swap by renaming; we never
take any of them for live data, and report them.

Every file is opened read-only and memory-mapped. Nothing here raises on bad input: errors
are collected with the file and byte position.
"""

from __future__ import annotations

import contextlib
import gc
import mmap
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from checkers.errors import LogReadError, OffsetOrderError, TornTail, UnreadableFile
from checkers.records import Batch, ScanState, iter_batch_rows, make_batch

SEGMENT_RE = re.compile(r"^(\d{20})\.log$")
TXN_INDEX_RE = re.compile(r"^(\d{20})\.txnindex$")
TRANSIENT_SUFFIXES = (".deleted", ".cleaned", ".swap")


@dataclass(frozen=True)
class SegmentFile:
    path: Path
    base_offset: int
    size: int

    @property
    def name(self) -> str:
        return self.path.name


@dataclass
class PartitionListing:
    path: Path
    segments: list[SegmentFile] = field(default_factory=list)
    transient: list[Path] = field(default_factory=list)
    txn_indexes: list[Path] = field(default_factory=list)  # aborted transactions, per segment
    errors: list[LogReadError] = field(default_factory=list)


@dataclass
class PartitionScan:
    """Every batch of a partition replica, in offset order, and what went wrong reading it."""

    path: Path
    batches: list[Batch] = field(default_factory=list)
    segments: list[SegmentFile] = field(default_factory=list)
    transient: list[Path] = field(default_factory=list)
    txn_indexes: list[Path] = field(default_factory=list)
    errors: list[LogReadError] = field(default_factory=list)
    torn_tail: TornTail | None = None


def list_segments(partition_dir: Path | str) -> PartitionListing:
    pdir = Path(partition_dir)
    listing = PartitionListing(pdir)
    try:
        entries = list(os.scandir(pdir))
    except OSError as exc:
        listing.errors.append(UnreadableFile(str(pdir), None, f"cannot list directory: {exc}"))
        return listing
    for entry in entries:
        name = entry.name
        if name.endswith(TRANSIENT_SUFFIXES):
            listing.transient.append(Path(entry.path))
            continue
        match = SEGMENT_RE.match(name)
        if not match:
            if TXN_INDEX_RE.match(name):
                listing.txn_indexes.append(Path(entry.path))
            continue
        try:
            if not entry.is_file():
                listing.errors.append(UnreadableFile(entry.path, None, "segment is not a file"))
                continue
            size = entry.stat().st_size
        except OSError as exc:
            listing.errors.append(UnreadableFile(entry.path, None, f"cannot stat: {exc}"))
            continue
        listing.segments.append(SegmentFile(Path(entry.path), int(match.group(1)), size))
    listing.segments.sort(key=lambda s: s.base_offset)
    listing.transient.sort()
    listing.txn_indexes.sort()
    return listing


def iter_segment_rows(
    segment: SegmentFile, *, state: ScanState, final: bool = True
) -> Iterator[tuple]:
    """Yield the batch rows (see `records.BATCH_FIELDS`) of one segment file."""
    path = str(segment.path)
    if segment.size == 0:
        return
    try:
        with open(segment.path, "rb") as fh:
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        state.errors.append(UnreadableFile(path, None, f"cannot open or map: {exc}"))
        return
    rows = iter_batch_rows(mapped, path=path, segment=segment.name, state=state, final=final)
    first = True
    try:
        for row in rows:
            if first:
                first = False
                if row[0] < segment.base_offset:
                    state.errors.append(
                        OffsetOrderError(
                            path,
                            row[16],
                            f"first batch [{row[0]}, {row[1]}] starts below the "
                            f"segment's base offset {segment.base_offset}",
                        )
                    )
            yield row
    finally:
        rows.close()
        del rows
        # A consumer still holding a view keeps the map open until it lets go.
        with contextlib.suppress(BufferError):
            mapped.close()


def iter_partition_rows(listing: PartitionListing, state: ScanState) -> Iterator[tuple]:
    """Rows of every segment in offset order; offsets must keep rising across segments."""
    # The tail of the log is the last non-empty segment (a freshly rolled one is empty).
    sizes = [s.size for s in listing.segments]
    last_index = max((i for i, size in enumerate(sizes) if size), default=-1)
    for i, segment in enumerate(listing.segments):
        yield from iter_segment_rows(segment, state=state, final=i == last_index)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Hold off the cyclic garbage collector while building millions of acyclic batches:
    its repeated passes over the growing list nearly double the cost of a scan."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def scan_partition(partition_dir: Path | str) -> PartitionScan:
    listing = list_segments(partition_dir)
    scan = PartitionScan(
        Path(partition_dir),
        segments=listing.segments,
        transient=listing.transient,
        txn_indexes=listing.txn_indexes,
        errors=list(listing.errors),
    )
    state = ScanState()
    make = make_batch
    with _gc_paused():
        scan.batches = [make(*row) for row in iter_partition_rows(listing, state)]
    scan.errors.extend(state.errors)
    scan.torn_tail = state.torn_tail
    return scan


def segment_bytes(partition_dir: Path | str) -> int:
    """Bytes of a partition dir's segment files (a directory listing; no file is opened)."""
    total = 0
    try:
        with os.scandir(partition_dir) as listing:
            for entry in listing:
                if entry.name.endswith(".log"):
                    with contextlib.suppress(OSError):
                        total += entry.stat().st_size
    except OSError:
        return 0
    return total
