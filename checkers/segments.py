"""A partition directory's segments, and the scan across them.

A partition dir holds ``<20-digit base offset>.log`` segments plus their ``.index``,
``.timeindex``, ``.txnindex`` and ``.snapshot`` companions (not read here: the indexes are
preallocated and rebuilt by Kafka at will). Files ending in ``.deleted``, ``.cleaned`` or
``.swap`` belong to an unfinished deletion, cleaning or segment swap. Kafka's log recovery
(LogLoader, KAFKA-6264) deletes the first two, and completes a swap: a ``<base>.log.swap``
replaces every segment whose base offset lies in [its base, its next offset), unless a
``.cleaned`` file at or below its base marks it as part of an unfinished split. We read the
log as Kafka will load it: such a swap is live data, the segments it replaces are not, and
every one of these files is reported.

Every file is opened read-only and memory-mapped. Nothing here raises on bad input: errors
are collected with the file and byte position.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from checkers import walk
from checkers.errors import LogReadError, OffsetOrderError, TornTail, UnreadableFile
from checkers.gcpause import gc_paused
from checkers.records import Batch, ScanState, make_batch
from checkers.walk import iter_batch_chunks, iter_batch_rows

SEGMENT_RE = re.compile(r"^(\d{20})\.log$")
TXN_INDEX_RE = re.compile(r"^(\d{20})\.txnindex$")
SWAP_RE = re.compile(r"^(\d{20})\.log\.swap$")
OFFSET_NAME_RE = re.compile(r"^(\d{20})\.")
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
    # An interrupted swap Kafka completes when it loads the log: the .log.swap files read as
    # live segments, and the .log segments they replace (not read).
    swapped_in: list[Path] = field(default_factory=list)
    swapped_out: list[Path] = field(default_factory=list)


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
    swapped_in: list[Path] = field(default_factory=list)
    swapped_out: list[Path] = field(default_factory=list)


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
    _complete_swaps(listing)
    listing.segments.sort(key=lambda s: s.base_offset)
    listing.transient.sort()
    listing.txn_indexes.sort()
    return listing


def _name_offset(path: Path) -> int | None:
    match = OFFSET_NAME_RE.match(path.name)
    return int(match.group(1)) if match else None


def _next_offset(segment: SegmentFile) -> int:
    """One past the last offset of a segment (its base if it holds no batch)."""
    last = None
    for row in iter_segment_rows(segment, state=ScanState()):
        last = row[1]
    return segment.base_offset if last is None else last + 1


def _complete_swaps(listing: PartitionListing) -> None:
    """Take an interrupted swap as Kafka's LogLoader completes it (see the module doc)."""
    swaps = [p for p in listing.transient if SWAP_RE.match(p.name)]
    if not swaps:
        return
    cleaned = [_name_offset(p) for p in listing.transient if p.name.endswith(".cleaned")]
    min_cleaned = min((o for o in cleaned if o is not None), default=None)
    live: list[SegmentFile] = []
    for path in swaps:
        base = int(SWAP_RE.match(path.name).group(1))  # type: ignore[union-attr]
        if min_cleaned is not None and base >= min_cleaned:
            continue  # part of an unfinished split: Kafka deletes it (KAFKA-6264)
        try:
            live.append(SegmentFile(path, base, path.stat().st_size))
        except OSError as exc:
            listing.errors.append(UnreadableFile(str(path), None, f"cannot stat: {exc}"))
    if not live:
        return
    low = min(s.base_offset for s in live)
    high = max(_next_offset(s) for s in live)
    # The rename also replaces a segment at the swap's own base, even an empty swap's.
    bases = {s.base_offset for s in live}

    def replaced(s: SegmentFile) -> bool:
        return low <= s.base_offset < high or s.base_offset in bases

    listing.swapped_out = [s.path for s in listing.segments if replaced(s)]
    listing.segments = [s for s in listing.segments if not replaced(s)] + live
    listing.swapped_in = sorted(s.path for s in live)
    listing.transient = [p for p in listing.transient if p not in listing.swapped_in]


def _map_segment(segment: SegmentFile, state: ScanState) -> mmap.mmap | None:
    """The segment mapped read-only, or None (empty, or unreadable: an error is noted)."""
    if segment.size == 0:
        return None
    try:
        with open(segment.path, "rb") as fh:
            return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        state.errors.append(UnreadableFile(str(segment.path), None, f"cannot open or map: {exc}"))
        return None


def _check_first(
    segment: SegmentFile, base: int, last: int, position: int, state: ScanState
) -> None:
    if base < segment.base_offset:
        state.errors.append(
            OffsetOrderError(
                str(segment.path),
                position,
                f"first batch [{base}, {last}] starts below the "
                f"segment's base offset {segment.base_offset}",
            )
        )


def iter_segment_rows(
    segment: SegmentFile, *, state: ScanState, final: bool = True
) -> Iterator[tuple]:
    """Yield the batch rows (see `records.BATCH_FIELDS`) of one segment file."""
    mapped = _map_segment(segment, state)
    if mapped is None:
        return
    rows = iter_batch_rows(
        mapped, path=str(segment.path), segment=segment.name, state=state, final=final
    )
    first = True
    try:
        for row in rows:
            if first:
                first = False
                _check_first(segment, row[0], row[1], row[16], state)
            yield row
    finally:
        rows.close()
        del rows
        # A consumer still holding a view keeps the map open until it lets go.
        with contextlib.suppress(BufferError):
            mapped.close()


def iter_segment_batches(
    segment: SegmentFile, *, state: ScanState, final: bool = True
) -> Iterator[list[Batch]]:
    """The batches of one segment file as `Batch` objects, in lists (see
    `records.iter_batch_chunks`); the same batches and findings as `iter_segment_rows`."""
    mapped = _map_segment(segment, state)
    if mapped is None:
        return
    chunks = iter_batch_chunks(
        mapped, path=str(segment.path), segment=segment.name, state=state, final=final
    )
    first = True
    try:
        for chunk in chunks:
            if first:
                first = False
                b = chunk[0]
                _check_first(segment, b.base_offset, b.last_offset, b.position, state)
            yield chunk
    finally:
        chunks.close()
        del chunks
        with contextlib.suppress(BufferError):
            mapped.close()


def _tail_index(listing: PartitionListing) -> int:
    """The tail of the log is the last non-empty segment (a freshly rolled one is empty)."""
    return max((i for i, s in enumerate(listing.segments) if s.size), default=-1)


def iter_partition_rows(listing: PartitionListing, state: ScanState) -> Iterator[tuple]:
    """Rows of every segment in offset order; offsets must keep rising across segments."""
    last_index = _tail_index(listing)
    for i, segment in enumerate(listing.segments):
        yield from iter_segment_rows(segment, state=state, final=i == last_index)


def iter_partition_batches(listing: PartitionListing, state: ScanState) -> Iterator[list[Batch]]:
    """`iter_partition_rows` as lists of `Batch` objects (see `iter_segment_batches`)."""
    last_index = _tail_index(listing)
    for i, segment in enumerate(listing.segments):
        yield from iter_segment_batches(segment, state=state, final=i == last_index)


def scan_partition(partition_dir: Path | str) -> PartitionScan:
    listing = list_segments(partition_dir)
    scan = PartitionScan(
        Path(partition_dir),
        segments=listing.segments,
        transient=listing.transient,
        txn_indexes=listing.txn_indexes,
        errors=list(listing.errors),
        swapped_in=listing.swapped_in,
        swapped_out=listing.swapped_out,
    )
    state = ScanState()
    with gc_paused():
        if walk.native is not None:
            # The native walk makes the Batch objects itself: no row tuple, no Python call
            # per batch (that costs more than the whole walk).
            batches: list[Batch] = []
            for chunk in iter_partition_batches(listing, state):
                batches += chunk
            scan.batches = batches
        else:
            make = make_batch
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
