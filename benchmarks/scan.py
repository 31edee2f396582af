"""Benchmark: the checker's segment scan against Kafka's own DumpLogSegments.

    python -m benchmarks.scan [--kafka-version 3.9.2]
    python -m benchmarks.scan --crafted [--mb 128]

Both read the same real segments (about 1 GB of one-record batches and about 1 GB of 16 KB
batches, written by a real broker; see benchmarks.segments) in the same run, and both parse
every batch header and verify its CRC. logfork is timed with each of its readers, pure
Python and the native walk (native/, when built), in two ways: `rows`, iterating the batch
rows (checkers.segments.iter_partition_rows), and `batches`, the partition scan the audit
runs (checkers.segments.scan_partition: every batch kept as a `Batch`). Prints MB/s,
batches/s and the ratios per batch size, then the summary line for the worse of the two.

--crafted needs no Kafka and no Docker: it writes `--mb` MB of each shape with
checkers.craft into a temporary directory (tiny one-record batches of about 75 bytes, and
16 KB batches) and times logfork's readers alone. Figures only: nothing here passes or fails.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from basics.errors import LogforkError
from basics.releases import NEWEST_3_9
from benchmarks.segments import SHAPES, ensure_segments
from checkers import walk
from checkers.encode import encode_v2_batch
from checkers.records import BATCH_FIELDS, ScanState
from checkers.segments import iter_partition_rows, list_segments, scan_partition
from fixtures.tools import ToolClasspath, dump_log_segments

CRC_VALID = BATCH_FIELDS.index("crc_valid")


@dataclass
class Figures:
    seconds: float
    batches: int
    size: int

    @property
    def mb_per_s(self) -> float:
        return self.size / 1e6 / self.seconds

    @property
    def batches_per_s(self) -> float:
        return self.batches / self.seconds


def logfork_rows(partition_dir: Path) -> Figures:
    """Every batch row of the partition, looked at once (its CRC flag) and dropped."""
    listing = list_segments(partition_dir)
    state = ScanState()
    started = time.perf_counter()
    batches = invalid = 0
    for row in iter_partition_rows(listing, state):
        batches += 1
        invalid += not row[CRC_VALID]
    seconds = time.perf_counter() - started
    if state.errors or invalid:
        raise SystemExit(f"logfork found {invalid} bad CRCs and errors {state.errors[:3]}")
    return Figures(seconds, batches, sum(s.size for s in listing.segments))


def logfork_batches(partition_dir: Path) -> Figures:
    """The partition scan the audit runs: every batch kept as a `Batch` in a list."""
    started = time.perf_counter()
    scan = scan_partition(partition_dir)
    seconds = time.perf_counter() - started
    invalid = sum(not b.crc_valid for b in scan.batches)
    if scan.errors or invalid or scan.torn_tail:
        raise SystemExit(f"logfork found {invalid} bad CRCs and errors {scan.errors[:3]}")
    return Figures(seconds, len(scan.batches), sum(s.size for s in scan.segments))


@contextlib.contextmanager
def reader(name: str) -> Iterator[None]:
    if name == "native":
        yield
    else:
        with walk.pure_python():
            yield


def readers() -> list[str]:
    return ["python", "native"] if walk.native is not None else ["python"]


def time_logfork(partition_dir: Path, repeat: int = 1) -> dict[str, Figures]:
    """Figures per reader and way ("python rows", "native batches", ...), best of `repeat`."""
    out: dict[str, Figures] = {}
    ways: dict[str, Callable[[Path], Figures]] = {"rows": logfork_rows, "batches": logfork_batches}
    for name in readers():
        for way, run in ways.items():
            with reader(name):
                runs = [run(partition_dir) for _ in range(repeat)]
            out[f"{name} {way}"] = min(runs, key=lambda f: f.seconds)
    return out


def print_figures(label: str, f: Figures) -> None:
    print(
        f"  {label:16} {f.seconds:7.2f} s {f.mb_per_s:8.1f} MB/s "
        f"{f.batches_per_s / 1e3:9.1f}k batches/s"
    )


def kafka_scan(partition_dir: Path, tool: ToolClasspath) -> Figures:
    """Kafka's tool over every segment, its output counted by grep (C, cheap) rather than
    read by Python, so that the figure is the tool's own."""
    listing = list_segments(partition_dir)
    started = time.perf_counter()
    batches = 0
    for segment in listing.segments:
        cmd = (
            f"java -Xmx1g -cp '{tool.host_classpath}' {tool.main} --files "
            f"'{segment.path}' | grep -c '^baseOffset:'"
        )
        out = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True)
        if out.returncode not in (0, 1):
            raise SystemExit(f"DumpLogSegments failed: {out.stderr[-500:]}")
        batches += int(out.stdout.strip() or 0)
    seconds = time.perf_counter() - started
    return Figures(seconds, batches, sum(s.size for s in listing.segments))


def crafted_segments(root: Path, target: int) -> dict[str, Path]:
    """Partition directories of about `target` bytes per shape, written with checkers.encode:
    one-record batches of about 75 bytes, and 16 KB batches (16 records of 1000 bytes),
    in segments of at most 64 MB as a broker rolls them (log.segment.bytes)."""
    roll = 64 << 20
    shapes: dict[str, Callable[[int], bytes]] = {
        "one-record": lambda off: encode_v2_batch(off, [b"v%d" % off], leader_epoch=1),
        "16k": lambda off: encode_v2_batch(
            off, [b"%07d" % (off + i) + b"x" * 993 for i in range(16)], leader_epoch=1
        ),
    }
    dirs = {}
    for name, encode in shapes.items():
        pdir = root / f"bench-{name}-0"
        pdir.mkdir(parents=True)
        offset = written = 0
        while written < target:
            parts, size, base = [], 0, offset
            while size < roll and written + size < target:
                batch = encode(offset)
                parts.append(batch)
                size += len(batch)
                offset += 1 if name == "one-record" else 16
            (pdir / f"{base:020d}.log").write_bytes(b"".join(parts))
            written += size
        dirs[name] = pdir
    return dirs


def crafted(mb: int, repeat: int) -> int:
    with tempfile.TemporaryDirectory(prefix="logfork-bench-") as tmp:
        started = time.perf_counter()
        dirs = crafted_segments(Path(tmp), mb << 20)
        print(f"wrote {2 * mb} MB of crafted segments in {time.perf_counter() - started:.0f} s")
        for name, pdir in dirs.items():
            figures = time_logfork(pdir, repeat)
            any_f = next(iter(figures.values()))
            print(f"{name}: {any_f.size / 1e6:.0f} MB, {any_f.batches} batches (best of {repeat})")
            for label, f in figures.items():
                print_figures(label, f)
            if "native batches" in figures:
                speedups = (
                    f"{figures[f'native {way}'].mb_per_s / figures[f'python {way}'].mb_per_s:.1f}"
                    for way in ("rows", "batches")
                )
                print("  native/python  rows {} batches {}".format(*speedups))
    print("DumpLogSegments: not run (it needs a real Kafka; run without --crafted)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scan",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--kafka-version", default=NEWEST_3_9)
    parser.add_argument("--crafted", action="store_true", help="crafted segments, no Kafka")
    parser.add_argument("--mb", type=int, default=128, help="MB per shape with --crafted")
    parser.add_argument("--repeat", type=int, default=3, help="best of N, each reader")
    args = parser.parse_args(argv)
    if args.crafted:
        return crafted(args.mb, args.repeat)
    try:
        tool = dump_log_segments(args.kafka_version)
    except LogforkError as exc:  # e.g. kafka-tools not published for this release
        raise SystemExit(f"benchmarks.scan: {exc}") from None
    dirs = ensure_segments(args.kafka_version)
    worst: tuple[float, str, dict[str, Figures], Figures] | None = None
    for name in SHAPES:
        # Best of --repeat on both sides: one pass over 1 GB of 16 KB batches takes a
        # fifth of a second, which a busy neighbour can double.
        ours = time_logfork(dirs[name], args.repeat)
        theirs = min(
            (kafka_scan(dirs[name], tool) for _ in range(args.repeat)), key=lambda f: f.seconds
        )
        # The figure that counts: the scan the audit runs, with the reader it would use.
        way = "native batches" if "native batches" in ours else "python batches"
        best = ours[way]
        ratio = best.mb_per_s / theirs.mb_per_s
        print(
            f"{name}: {best.size / 1e6:.0f} MB, {best.batches} batches "
            f"(DumpLogSegments counted {theirs.batches})"
        )
        for label, f in ours.items():
            print_figures(label, f)
        print_figures("DumpLogSegments", theirs)
        print(
            "  ratio to DumpLogSegments: "
            + ", ".join(f"{label} {f.mb_per_s / theirs.mb_per_s:.1f}" for label, f in ours.items())
        )
        if worst is None or ratio < worst[0]:
            worst = (ratio, way, ours, theirs)
    assert worst is not None
    ratio, way, ours, theirs = worst
    print(
        "scan: logfork "
        + ", ".join(f"{label} {f.mb_per_s:.1f} MB/s" for label, f in ours.items())
        + f"; DumpLogSegments {theirs.mb_per_s:.1f} MB/s, ratio {ratio:.1f} ({way})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
