"""The native walk (native/, module logfork_native) against the pure-Python reader.

Both readers scan the same bytes and must agree on everything: the rows (values and their
types), the errors (type, path, byte offset, reason), the torn tail and the rest of the
ScanState, also when a consumer stops early. Inputs: the segments the other tests craft
(test_records' byte strings, test_segments' partition layouts, test_fuzz's and
test_metadata_log's seeds, the crafted run directories of testsupport.runs), the files real
brokers wrote (data/real), and mutations of all of them as in test_fuzz.

The extension is built from source by `.ci/run` (`pip install ./native`). Without it these
tests fail under CI=true and are skipped elsewhere.
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import os
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.fleet_data import write_fleet
from checkers import walk
from checkers.contents import parse_batch
from checkers.encode import encode_record
from checkers.records import BATCH_FIELDS, Batch, ScanState, iter_batch_rows_py
from checkers.segments import iter_partition_rows, list_segments, scan_partition
from checkers.tests.test_fuzz import EXAMPLES, METADATA_SEEDS, REAL, SEGMENT_SEEDS, mutated
from checkers.tests.test_metadata_log import build_history
from checkers.walk import iter_batch_chunks, iter_batch_rows, iter_batch_rows_native
from fixtures.ci import require
from testsupport import craft, damage
from testsupport import runs as crafted

try:
    import logfork_native
except ImportError:
    logfork_native = None

PATH = "/x/t-0/00000000000000000000.log"
SEGMENT = "00000000000000000000.log"


@pytest.fixture(autouse=True)
def _need_native() -> None:
    if logfork_native is not None:
        return
    message = (
        "the native extension logfork_native is not installed: build it with "
        "`.venv/bin/pip install ./native` (cargo from rustup on PATH); .ci/run does"
    )
    require(message)


@contextlib.contextmanager
def native_on(chunk: int | None = None) -> Iterator[None]:
    """The native walk in use (even under LOGFORK_NATIVE=0), `chunk` batches per call."""
    saved = walk.native, walk.NATIVE_CHUNK
    walk.native = logfork_native
    walk.NATIVE_CHUNK = chunk or saved[1]
    try:
        yield
    finally:
        walk.native, walk.NATIVE_CHUNK = saved


def typed(values: tuple) -> tuple:
    """Values with their types: True == 1 in Python, but a row must hold the same objects."""
    return tuple((type(v).__name__, v) for v in values)


def batch_values(batch: Batch) -> tuple:
    assert type(batch) is Batch
    return typed(tuple(getattr(batch, name) for name in BATCH_FIELDS))


def state_view(state: ScanState) -> tuple:
    errors = [(type(e).__name__, e.path, e.offset, e.reason) for e in state.errors]
    return errors, state.torn_tail, state.valid_bytes, typed((state.last_offset,))


def scan_with(
    reader: Callable[..., Iterator[tuple]],
    data: Any,
    *,
    final: bool = True,
    start: int = 0,
    end: int | None = None,
    last: int = -1,
    take: int | None = None,
) -> tuple[list[tuple], tuple]:
    state = ScanState(last_offset=last)
    rows = reader(data, path=PATH, segment=SEGMENT, state=state, final=final, start=start, end=end)
    out = [typed(r) for r in itertools.islice(rows, take)]
    rows.close()
    return out, state_view(state)


def chunks_with(
    data: Any,
    *,
    final: bool = True,
    start: int = 0,
    end: int | None = None,
    last: int = -1,
    take_lists: int | None = None,
) -> tuple[list[tuple], tuple, int]:
    """`iter_batch_chunks`, flattened, and how many lists; checks that no error was found
    inside a list."""
    state = ScanState(last_offset=last)
    chunks = iter_batch_chunks(
        data, path=PATH, segment=SEGMENT, state=state, final=final, start=start, end=end
    )
    out: list[tuple] = []
    seen_errors = lists = 0
    for chunk in itertools.islice(chunks, take_lists):
        lists += 1
        assert chunk, "an empty list"
        # Errors found since the last list come from entries before this list's first batch
        # (or from that batch itself), never from inside the list.
        new_errors = state.errors[seen_errors:]
        assert all(e.offset <= chunk[0].position for e in new_errors), new_errors
        seen_errors = len(state.errors)
        out += [batch_values(b) for b in chunk]
    chunks.close()
    return out, state_view(state), lists


def assert_same(data: Any, *, chunk: int | None = None, **kwargs: Any) -> None:
    """Both readers, and the native Batch lists, agree on `data`."""
    expected = scan_with(iter_batch_rows_py, data, **kwargs)
    with native_on(chunk):
        assert scan_with(iter_batch_rows_native, data, **kwargs) == expected
        assert scan_with(iter_batch_rows, data, **kwargs) == expected
        take = kwargs.pop("take", None)
        rows, state, lists = chunks_with(data, **kwargs)
        if take is None:
            assert (rows, state) == expected
            return
        # A consumer that stops after some lists leaves the state that rows leave after
        # the last batch of those lists.
        for taken in sorted(
            {0, 1, 2, lists // 2, lists - 1, lists} & set(range(min(take, lists) + 1))
        ):
            rows, state, _ = chunks_with(data, take_lists=taken, **kwargs)
            assert (rows, state) == scan_with(iter_batch_rows_py, data, take=len(rows), **kwargs)


# --------------------------------------------------------------------------------------
# The corpus: every segment the other tests craft, and the real ones


def _v2(base: int, *values: bytes, **kwargs: Any) -> bytes:
    return craft.encode_v2_batch(base, list(values) or [b"x"], **kwargs)


def _flip(data: bytes, index: int, mask: int = 0xFF) -> bytes:
    out = bytearray(data)
    out[index] ^= mask
    return bytes(out)


def _with(data: bytes, at: int, raw: bytes) -> bytes:
    return data[:at] + raw + data[at + len(raw) :]


def record_cases() -> dict[str, bytes]:
    """test_records' byte strings, and the oddities around the fast path's conditions."""
    good = _v2(0)
    bad_last = bytearray(_v2(1, b"y" * 50))
    bad_last[-20:] = bytes(20)
    cases = {
        "header-fields": craft.encode_v2_batch(
            100,
            [b"a", b"b", b"c"],
            leader_epoch=7,
            producer_id=42,
            producer_epoch=3,
            base_sequence=9,
            is_transactional=True,
            compression="zstd",
        ),
        "epoch-stamped": _with(_v2(0, leader_epoch=1), 12, struct.pack(">i", 99)),
        "crc-mismatch-middle": good + _flip(_v2(1, b"y"), -1, 0x01) + _v2(2, b"z"),
        "control": craft.encode_control_batch(
            5, 1, b"\x00\x00\x00\x00\x00\x07", producer_id=8, is_transactional=True
        ),
        "record-headers": craft.encode_v2_batch(
            0,
            [b"unused"],
            record_bytes=encode_record(0, b"v", b"k", headers=[("h1", b"x"), ("h2", None)]),
        ),
        "v1-wrapper-offset-0": craft.encode_legacy_wrapper([0, 1, 2], "gzip", magic=1),
        "truncated-header": good + _v2(1, b"y")[:10],
        "truncated-batch": good + _v2(1, b"y" * 100)[:70],
        "last-crc-torn": good + bytes(bad_last),
        "zero-tail": good + bytes(4096),
        "short-tail": good + _v2(1, b"y")[:30],
        "five-zeros": good + bytes(5),
        "impossible-length": good + _with(_v2(1, b"y"), 8, struct.pack(">i", 20)) + good,
        "negative-length": _with(_v2(1, b"y"), 8, struct.pack(">i", -5)),
        "unknown-magic": _with(_v2(0, b"y"), 16, b"\x07"),
        "offsets-backwards": _v2(10, b"a") + _v2(5, b"b"),
        "equal-base": _v2(10, b"a") + _v2(10, b"b") + _v2(11, b"c"),
        "overlapping": craft.encode_v2_batch(0, last_offset=9) + _v2(5) + _v2(10),
        "corrupt-gzip-valid-crc": _v2(0, compression="gzip", record_bytes=b"not gzip at all"),
        "legacy-garbage": craft.encode_legacy_message(3, b"garbage", magic=1, codec=1),
        "mixed-formats": craft.encode_batches([(0, 4, 1), (5, 9, 2, "", "lz4")])
        + craft.encode_legacy_message(10, b"v", magic=1)
        + _v2(11),
        "length-48": _with(_v2(0), 8, struct.pack(">i", 48)),
        "length-past-end": _with(_v2(0), 8, struct.pack(">i", 2**31 - 1)),
        "negative-last-offset-delta": _with(_v2(0), 23, struct.pack(">i", -1)),
        "header-only-batch": _with(_v2(7)[:61], 8, struct.pack(">i", 49)),
        "negative-offsets": _v2(-10) + _v2(-5) + _v2(0),
        # baseOffset + lastOffsetDelta past int64: Python's ints grow, the walk must follow.
        "offset-overflow": craft.encode_v2_batch(2**63 - 5, last_offset=2**63 + 5, base_timestamp=0)
        + _v2(2**63 - 1, base_timestamp=0),
        "highest-offset": _v2(2**63 - 1, base_timestamp=0) + _v2(0),
        "empty": b"",
    }
    for magic in (0, 1):
        cases[f"legacy-v{magic}"] = b"".join(
            craft.encode_legacy_message(o, f"m{o}".encode(), magic=magic) for o in range(3)
        )
        for codec in ("gzip", "snappy", "lz4"):
            cases[f"wrapper-v{magic}-{codec}"] = craft.encode_legacy_wrapper(
                [10, 11, 12, 13], codec, magic=magic
            )
    for codec in craft.CODECS:
        values = [f"value-{i}".encode() for i in range(20)]
        cases[f"v2-{codec}"] = craft.encode_v2_batch(500, values, compression=codec)
    cases["many-tiny"] = b"".join(_v2(i, b"v%d" % i) for i in range(3000))
    cases["many-tiny-bad-crc-inside"] = _flip(cases["many-tiny"], 75 * 1500 + 70)
    cases["many-tiny-torn"] = cases["many-tiny"][:-9]
    return cases


CASES = record_cases()
SEEDS = {f"fuzz-seed-{i}": seed for i, seed in enumerate(SEGMENT_SEEDS)} | {
    f"metadata-seed-{i}": seed for i, seed in enumerate(METADATA_SEEDS)
}
SEEDS["metadata-history"] = bytes(build_history().data)
REAL_FILES = sorted(REAL.glob("kafka-*.log"))
ALL = CASES | SEEDS | {f"real-{p.name}": p.read_bytes() for p in REAL_FILES}


@pytest.mark.parametrize("final", [True, False])
@pytest.mark.parametrize("name", sorted(ALL))
def test_same_rows_errors_and_state(name: str, final: bool) -> None:
    assert_same(ALL[name], final=final)


@pytest.mark.parametrize("chunk", [1, 2, 3, 7])
@pytest.mark.parametrize("name", ["many-tiny", "many-tiny-bad-crc-inside", "mixed-formats"])
def test_chunk_boundaries_change_nothing(name: str, chunk: int) -> None:
    assert_same(ALL[name], chunk=chunk)
    assert_same(ALL[name], chunk=chunk, final=False)


@pytest.mark.parametrize("take", [0, 1, 2, 1499, 1500, 1501, 2999])
def test_a_consumer_that_stops_early_leaves_the_same_state(take: int) -> None:
    for name in ("many-tiny", "many-tiny-bad-crc-inside"):
        assert_same(ALL[name], take=take)
        assert_same(ALL[name], take=take, chunk=7)


@pytest.mark.parametrize("last", [-(2**63), -1, 0, 1499, 2**63 - 1, 2**64, -(2**200), 2**200])
def test_sub_ranges_and_starting_offsets(last: int) -> None:
    data = ALL["many-tiny-bad-crc-inside"]
    for start, end in [(0, None), (75, 750), (75 * 1499, None), (10, 800), (0, 0), (300, 300)]:
        assert_same(data, start=start, end=end, last=last)
        assert_same(data, start=start, end=end, last=last, final=False)


def _big_batches() -> list[bytes]:
    """40 batches of about 200 KB: 8 MB in one call, so that the walk checks half of the
    CRCs on a second thread (native/src/lib.rs, PARALLEL_BYTES)."""
    return [_v2(i * 10, b"%06d" % i + b"x" * 200_000) for i in range(40)]


def _big_case(bad_crc: tuple[int, ...] = (), backwards_at: int | None = None) -> bytes:
    batches = _big_batches()
    for i in bad_crc:
        batches[i] = _flip(batches[i], len(batches[i]) // 2)
    if backwards_at is not None:
        batches[backwards_at] = _with(batches[backwards_at], 0, struct.pack(">q", 5))
    return b"".join(batches)


# name: (the bytes, the index of the batch a single call must stop at)
BIG_CASES = {
    "clean": (_big_case(), 40),
    "bad-crc-first": (_big_case((0,)), 0),
    "bad-crc-early-half": (_big_case((3,)), 3),
    "bad-crc-late-half": (_big_case((30,)), 30),
    "bad-crc-last": (_big_case((39,)), 39),
    "bad-crc-both-halves": (_big_case((7, 33)), 7),
    "crc-before-header": (_big_case((4,), backwards_at=25), 4),
    "header-before-crc": (_big_case((30,), backwards_at=6), 6),
}


@pytest.mark.parametrize("name", sorted(BIG_CASES))
def test_big_calls_checked_on_two_threads_read_the_same(name: str) -> None:
    data, stop = BIG_CASES[name]
    # The readers would agree even if a call stopped too early (the Python loop takes the
    # entry and calls back), so the call itself must stop at the first bad batch.
    size = len(data) // 40
    rows, pos, last = logfork_native.walk_rows(
        data, 0, len(data), -1, SEGMENT, walk.COMPRESSION_NAMES, 1024
    )
    assert (len(rows), pos) == (stop, stop * size)
    assert last == (10 * (stop - 1) if stop else -1)
    assert_same(data)
    assert_same(data, final=False)
    assert_same(data, chunk=25)
    assert_same(data, take=20)
    assert_same(data, start=len(data) // 3, end=len(data) - 1000)


def test_every_kind_of_buffer() -> None:
    data = ALL["mixed-formats"] + ALL["many-tiny"][:7500]
    expected = scan_with(iter_batch_rows_py, data)
    with native_on():
        assert scan_with(iter_batch_rows, bytearray(data)) == expected
        assert scan_with(iter_batch_rows, memoryview(data)) == expected
        assert scan_with(iter_batch_rows, memoryview(data).cast("c")) == expected


def test_a_mapped_file(tmp_path: Path) -> None:
    path = tmp_path / SEGMENT
    path.write_bytes(ALL["many-tiny-torn"])
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        expected = scan_with(iter_batch_rows_py, mapped)
        with native_on():
            assert scan_with(iter_batch_rows_native, mapped) == expected
            assert chunks_with(mapped)[:2] == expected


def test_parse_batch_is_the_same() -> None:
    for name in ("header-fields", "control", "legacy-v1", "wrapper-v1-lz4", "offset-overflow"):
        data = ALL[name]
        with walk.pure_python():
            expected = batch_values(parse_batch(data, segment="s.log"))
        with native_on():
            assert batch_values(parse_batch(data, segment="s.log")) == expected


def test_the_scan_uses_the_walk_it_is_given() -> None:
    with native_on():
        rows = iter_batch_rows(b"", path=PATH, segment=SEGMENT, state=ScanState())
        assert rows.gi_code is iter_batch_rows_native.__code__
    with walk.pure_python():
        rows = iter_batch_rows(b"", path=PATH, segment=SEGMENT, state=ScanState())
        assert rows.gi_code is iter_batch_rows_py.__code__


def test_logfork_native_0_forces_pure_python() -> None:
    code = "from checkers import walk; print(walk.native is None)"
    for value, expected in (("0", "True"), ("1", "False")):
        env = {**os.environ, "LOGFORK_NATIVE": value}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == expected


def test_native_crc32c() -> None:
    assert logfork_native.crc32c(b"123456789") == 0xE3069283
    blob = os.urandom(100_000)
    for size in (0, 1, 7, 8, 9, 63, 64, 65, 1000, 100_000):
        assert logfork_native.crc32c(blob[:size]) == crc32c(blob[:size])


# --------------------------------------------------------------------------------------
# Whole partitions, as the audit scans them


SPECS = [(0, 4, 1), (5, 9, 1), (10, 14, 2), (15, 19, 2), (20, 24, 3)]


def partition_layouts(root: Path) -> list[Path]:
    """test_segments' partition directories, healthy and damaged, and testsupport.runs'."""
    dirs: list[Path] = []

    def new(name: str) -> Path:
        dirs.append(root / name / "t-0")
        return dirs[-1]

    craft.write_segments(new("rolled"), SPECS, roll_at=[10, 20])
    pdir = new("preallocated")
    craft.write_segments(pdir, SPECS, roll_at=[20], preallocate=1 << 16)
    (pdir / craft.segment_name(25)).write_bytes(b"")
    first, last = craft.write_segments(new("cut"), SPECS, roll_at=[10])
    damage.cut_file(first, 7)
    damage.cut_file(last, 7)
    (seg,) = craft.write_segments(new("flipped"), SPECS)
    damage.flip_byte(seg, damage.batch_positions(seg.read_bytes())[2] + 70)
    for how, index in (("crc", 1), ("length", 1), ("magic", 1), ("torn", 4), ("crc", 4)):
        (seg,) = craft.write_segments(new(f"damaged-{how}-{index}"), SPECS)
        damage.damage_batch(seg, index, how)
    pdir = new("below-base")
    pdir.mkdir(parents=True)
    (pdir / craft.segment_name(10)).write_bytes(craft.encode_batches([(5, 9, 0), (10, 12, 0)]))
    pdir = new("below-base-legacy-first")
    pdir.mkdir(parents=True)
    legacy = craft.encode_legacy_message(5, b"v", magic=1)
    (pdir / craft.segment_name(10)).write_bytes(legacy + craft.encode_batches([(6, 9, 0)]))
    pdir = new("falling-across-segments")
    pdir.mkdir(parents=True)
    (pdir / craft.segment_name(0)).write_bytes(craft.encode_batches([(0, 9, 0)]))
    (pdir / craft.segment_name(5)).write_bytes(craft.encode_batches([(5, 12, 0)]))
    craft.write_segments(
        new("many"), [(i, i, 1 + i // 1000) for i in range(2500)], roll_at=[1000, 2000]
    )
    for run in (
        crafted.kip279_s1_equal(root / "kip279"),
        crafted.consistent_run(root / "consistent"),
    ):
        dirs += sorted(p.parent for p in run.glob("nodes/*/data/*/*.log"))
    dirs += sorted(
        {
            p.parent
            for log_dir in write_fleet(root / "many-partitions", partitions=40).dirs
            for p in log_dir.glob("*/*.log")
        }
    )
    return sorted(set(dirs))


def scan_view(pdir: Path) -> tuple:
    scan = scan_partition(pdir)
    errors = [(type(e).__name__, e.path, e.offset, e.reason) for e in scan.errors]
    batches = [batch_values(b) for b in scan.batches]
    return batches, errors, scan.torn_tail, scan.segments, scan.transient


def rows_view(pdir: Path) -> tuple:
    state = ScanState()
    rows = [typed(r) for r in iter_partition_rows(list_segments(pdir), state)]
    return rows, state_view(state)


def test_partition_scans_are_the_same(tmp_path: Path) -> None:
    dirs = partition_layouts(tmp_path)
    assert len(dirs) > 60
    for pdir in dirs:
        with walk.pure_python():
            expected, expected_rows = scan_view(pdir), rows_view(pdir)
        with native_on(chunk=3):
            assert scan_view(pdir) == expected, pdir
            assert rows_view(pdir) == expected_rows, pdir
        with native_on():
            assert scan_view(pdir) == expected, pdir


def test_native_batches_are_ordinary_batches(tmp_path: Path) -> None:
    pdir = tmp_path / "t-0"
    craft.write_segments(pdir, SPECS)
    with native_on():
        batches = scan_partition(pdir).batches
    with walk.pure_python():
        expected = scan_partition(pdir).batches
    assert batches == expected and [hash(b) for b in batches] == [hash(b) for b in expected]
    assert [b.to_row() for b in batches] == [b.to_row() for b in expected]
    with pytest.raises(AttributeError):
        batches[0].crc = 1  # type: ignore[misc]


# --------------------------------------------------------------------------------------
# Mutations, as in test_fuzz

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FUZZ_SEEDS = [*SEGMENT_SEEDS, *METADATA_SEEDS, CASES["mixed-formats"], CASES["many-tiny"][:30000]]


@FUZZ
@given(
    st.sampled_from(FUZZ_SEEDS).flatmap(mutated),
    st.booleans(),
    st.sampled_from([None, 1, 2, 5]),
    st.sampled_from([-1, -(2**63), 0, 20, 2**63 - 1]),
)
def test_mutated_segments_read_the_same(
    data: bytes, final: bool, chunk: int | None, last: int
) -> None:
    assert_same(data, final=final, chunk=chunk, last=last)


@FUZZ
@given(st.sampled_from(FUZZ_SEEDS).flatmap(mutated), st.data())
def test_mutated_sub_ranges_and_early_stops_read_the_same(data: bytes, draw: st.DataObject) -> None:
    start = draw.draw(st.integers(0, len(data)))
    end = draw.draw(st.integers(start, len(data)))
    take = draw.draw(st.one_of(st.none(), st.integers(0, 40)))
    chunk = draw.draw(st.sampled_from([None, 1, 3]))
    assert_same(data, start=start, end=end, take=take, chunk=chunk, final=draw.draw(st.booleans()))
