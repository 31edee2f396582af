"""The segment walk: the batch headers of a buffer, with the fast path in native code when
it is there (native/: a Rust extension built by maturin, module `logfork_native`) and in
Python otherwise (`checkers.records.iter_batch_rows_py`, the reference).

Both take exactly the batches the Python loop's fast path takes (complete, well-formed v2
batches with a good CRC, in order) and hand every other entry to `records.slow_step`,
so that they yield the same rows, the same typed errors at the same byte positions and
leave the same `ScanState`; checkers/tests/test_native.py holds them to that.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from checkers.compression import COMPRESSION_NAMES
from checkers.records import (
    BATCH_FIELDS,
    Batch,
    ScanState,
    iter_batch_rows_py,
    make_batch,
    slow_step,
)


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
    to `slow_step` as in the Python loop. Needs `native`."""
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
    entry `slow_step` handled, after the errors it found; so a caller that checks the
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
            row, nxt, last = slow_step(
                mv, pos, end, last, path=path, segment=segment, state=state, final=final
            )
            if row is not None:
                yield [make_batch(*row)]
            if nxt is None:
                break
            pos = nxt
    finally:
        state.last_offset = last
        state.valid_bytes = pos
