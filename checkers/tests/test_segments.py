"""Partition directories: segment listing, the scan across segments, transient files."""

from __future__ import annotations

import os
from pathlib import Path

from checkers.errors import CrcMismatch, OffsetOrderError, TruncatedBatch, UnreadableFile
from checkers.segments import list_segments, scan_partition
from testsupport import craft, damage

SPECS = [(0, 4, 1), (5, 9, 1), (10, 14, 2), (15, 19, 2), (20, 24, 3)]


def test_multi_segment_scan_ignores_index_and_snapshot_files(tmp_path: Path) -> None:
    pdir = tmp_path / "t-0"
    craft.write_segments(pdir, SPECS, roll_at=[10, 20])
    (pdir / "00000000000000000010.snapshot").write_bytes(b"\x00" * 30)
    (pdir / "00000000000000000010.txnindex").write_bytes(b"")
    (pdir / "leader-epoch-checkpoint").write_text("0\n0\n")
    listing = list_segments(pdir)
    assert [s.base_offset for s in listing.segments] == [0, 10, 20]
    scan = scan_partition(pdir)
    assert not scan.errors and scan.torn_tail is None
    assert [(b.base_offset, b.last_offset, b.leader_epoch) for b in scan.batches] == SPECS
    assert [b.segment for b in scan.batches] == ["00000000000000000000.log"] * 2 + [
        "00000000000000000010.log"
    ] * 2 + ["00000000000000000020.log"]
    assert scan.batches[1].position == scan.batches[0].size
    assert scan.batches[2].position == 0


def test_transient_files_are_reported_not_read(tmp_path: Path) -> None:
    pdir = tmp_path / "t-0"
    craft.write_segments(pdir, SPECS[:2])
    (pdir / "00000000000000000000.log.deleted").write_bytes(craft.encode_batches([(0, 99, 9)]))
    (pdir / "00000000000000000005.log.cleaned").write_bytes(b"junk")
    (pdir / "00000000000000000005.log.swap").write_bytes(b"junk")
    scan = scan_partition(pdir)
    assert [b.last_offset for b in scan.batches] == [4, 9]
    assert [p.name for p in scan.transient] == [
        "00000000000000000000.log.deleted",
        "00000000000000000005.log.cleaned",
        "00000000000000000005.log.swap",
    ]
    assert not scan.errors


def test_an_interrupted_swap_is_read_as_kafka_completes_it(tmp_path: Path) -> None:
    # The cleaner renamed its output to .swap and dropped the first old segment (.deleted);
    # the second, at 10, still has its .log name. Kafka's LogLoader deletes both and renames
    # the swap, so the swap's batches are the replica's log below 20.
    pdir = tmp_path / "t-0"
    craft.write_segments(pdir, SPECS, roll_at=[10, 20])
    os.rename(pdir / "00000000000000000000.log", pdir / "00000000000000000000.log.deleted")
    swap = craft.encode_batches([(2, 4, 1), (9, 9, 1), (12, 14, 2), (19, 19, 2)])
    (pdir / "00000000000000000000.log.swap").write_bytes(swap)
    (pdir / "00000000000000000000.index.swap").write_bytes(b"")
    scan = scan_partition(pdir)
    assert not scan.errors
    assert [(b.base_offset, b.last_offset) for b in scan.batches] == [
        (2, 4),
        (9, 9),
        (12, 14),
        (19, 19),
        (20, 24),
    ]
    assert scan.batches[0].segment == "00000000000000000000.log.swap"
    assert [p.name for p in scan.swapped_in] == ["00000000000000000000.log.swap"]
    assert [p.name for p in scan.swapped_out] == ["00000000000000000010.log"]
    assert [p.name for p in scan.transient] == [
        "00000000000000000000.index.swap",
        "00000000000000000000.log.deleted",
    ]


def test_a_swap_of_an_unfinished_split_is_not_read(tmp_path: Path) -> None:
    # KAFKA-6264: a .swap at or above the lowest .cleaned file is an unfinished split, which
    # Kafka deletes.
    pdir = tmp_path / "t-0"
    craft.write_segments(pdir, SPECS, roll_at=[10, 20])
    (pdir / "00000000000000000010.log.cleaned").write_bytes(b"")
    (pdir / "00000000000000000010.log.swap").write_bytes(craft.encode_batches([(10, 99, 9)]))
    scan = scan_partition(pdir)
    assert [b.last_offset for b in scan.batches] == [4, 9, 14, 19, 24]
    assert not scan.swapped_in and not scan.swapped_out


def test_empty_active_segment_and_preallocated_tail(tmp_path: Path) -> None:
    pdir = tmp_path / "t-0"
    craft.write_segments(pdir, SPECS, roll_at=[20], preallocate=1 << 16)
    (pdir / "00000000000000000025.log").write_bytes(b"")  # freshly rolled
    scan = scan_partition(pdir)
    assert len(scan.batches) == 5 and not scan.errors
    # the zero fill sits in the last non-empty segment, so it is the log's tail
    assert scan.torn_tail is not None and "zero-filled" in scan.torn_tail.reason


def test_torn_tail_only_in_the_last_segment(tmp_path: Path) -> None:
    pdir = tmp_path / "t-0"
    first, last = craft.write_segments(pdir, SPECS, roll_at=[10])
    damage.cut_file(first, 7)
    damage.cut_file(last, 7)
    scan = scan_partition(pdir)
    assert [b.base_offset for b in scan.batches] == [0, 10, 15]
    assert scan.torn_tail is not None and scan.torn_tail.path == str(last)
    (error,) = scan.errors
    assert isinstance(error, TruncatedBatch) and error.path == str(first)


def test_bad_batch_in_the_middle_does_not_stop_the_scan(tmp_path: Path) -> None:
    pdir = tmp_path / "t-0"
    (seg,) = craft.write_segments(pdir, SPECS)
    positions = damage.batch_positions(seg.read_bytes())
    damage.flip_byte(seg, positions[2] + 70)
    scan = scan_partition(pdir)
    assert [b.crc_valid for b in scan.batches] == [True, True, False, True, True]
    (error,) = scan.errors
    assert isinstance(error, CrcMismatch) and error.offset == positions[2]


def test_first_batch_below_segment_base(tmp_path: Path) -> None:
    pdir = tmp_path / "t-0"
    pdir.mkdir()
    (pdir / craft.segment_name(10)).write_bytes(craft.encode_batches([(5, 9, 0)]))
    scan = scan_partition(pdir)
    assert isinstance(scan.errors[0], OffsetOrderError)


def test_offsets_must_rise_across_segments(tmp_path: Path) -> None:
    pdir = tmp_path / "t-0"
    pdir.mkdir()
    (pdir / craft.segment_name(0)).write_bytes(craft.encode_batches([(0, 9, 0)]))
    (pdir / craft.segment_name(5)).write_bytes(craft.encode_batches([(5, 12, 0)]))
    scan = scan_partition(pdir)
    assert any(isinstance(e, OffsetOrderError) for e in scan.errors)


def test_unreadable_segment(tmp_path: Path) -> None:
    pdir = tmp_path / "t-0"
    craft.write_segments(pdir, SPECS[:1])
    (pdir / craft.segment_name(5)).mkdir()  # a directory where a segment should be
    os.symlink(tmp_path / "missing", pdir / craft.segment_name(9))
    scan = scan_partition(pdir)
    assert len(scan.batches) == 1
    assert [type(e) for e in scan.errors] == [UnreadableFile, UnreadableFile]
    missing = scan_partition(tmp_path / "nope")
    assert isinstance(missing.errors[0], UnreadableFile)


def test_scan_leaves_files_untouched(tmp_path: Path) -> None:
    pdir = tmp_path / "t-0"
    craft.write_segments(pdir, SPECS, roll_at=[10], preallocate=4096)
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in pdir.iterdir()}
    os.chmod(pdir, 0o555)
    for p in pdir.iterdir():
        os.chmod(p, 0o444)
    try:
        scan_partition(pdir)
    finally:
        os.chmod(pdir, 0o755)
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in pdir.iterdir()}
    assert before == after


def test_crafted_damage_kinds(tmp_path: Path) -> None:
    from checkers.errors import ImpossibleLength, UnknownMagic

    expected = {"crc": CrcMismatch, "length": ImpossibleLength, "magic": UnknownMagic}
    for how, error_type in expected.items():
        pdir = tmp_path / how / "t-0"
        (seg,) = craft.write_segments(pdir, SPECS)
        position = damage.damage_batch(seg, 1, how)
        scan = scan_partition(pdir)
        assert isinstance(scan.errors[0], error_type) and scan.errors[0].offset == position
    pdir = tmp_path / "torn" / "t-0"
    (seg,) = craft.write_segments(pdir, SPECS)
    position = damage.damage_batch(seg, 4, "torn")
    scan = scan_partition(pdir)
    assert not scan.errors and scan.torn_tail is not None
    assert scan.torn_tail.position == position and len(scan.batches) == 4
