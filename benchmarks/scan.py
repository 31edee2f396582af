"""Benchmark: the checker's segment scan against Kafka's own DumpLogSegments.

    python -m benchmarks.scan [--kafka-version 3.9.2]

Both read the same real segments (about 1 GB of one-record batches and about 1 GB of 16 KB
batches, written by a real broker; see benchmarks.segments) in the same run, and both parse
every batch header and verify its CRC. Prints MB/s, batches/s and the ratio per batch size,
then the summary line for the worse of the two. Figures only: nothing here passes or fails.
"""

from __future__ import annotations

import argparse
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.segments import SHAPES, ensure_segments
from checkers.records import ScanState
from checkers.segments import iter_partition_rows, list_segments
from fixtures.errors import LogforkError
from fixtures.releases import NEWEST_3_9
from fixtures.tools import ToolClasspath, dump_log_segments

CRC_VALID = 3  # index of crc_valid in a batch row (checkers.records.BATCH_FIELDS)


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


def logfork_scan(partition_dir: Path) -> Figures:
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scan",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--kafka-version", default=NEWEST_3_9)
    args = parser.parse_args(argv)
    try:
        tool = dump_log_segments(args.kafka_version)
    except LogforkError as exc:  # e.g. kafka-tools not published for this release
        raise SystemExit(f"benchmarks.scan: {exc}") from None
    dirs = ensure_segments(args.kafka_version)
    worst: tuple[float, str, Figures, Figures] | None = None
    for name in SHAPES:
        ours = logfork_scan(dirs[name])
        theirs = kafka_scan(dirs[name], tool)
        ratio = ours.mb_per_s / theirs.mb_per_s
        print(
            f"{name}: {ours.size / 1e6:.0f} MB, {ours.batches} batches "
            f"(DumpLogSegments counted {theirs.batches})"
        )
        for label, f in (("logfork", ours), ("DumpLogSegments", theirs)):
            print(
                f"  {label:16} {f.seconds:7.1f} s {f.mb_per_s:8.1f} MB/s "
                f"{f.batches_per_s / 1e3:9.1f}k batches/s"
            )
        print(f"  ratio {ratio:.1f}")
        if worst is None or ratio < worst[0]:
            worst = (ratio, name, ours, theirs)
    assert worst is not None
    ratio, _, ours, theirs = worst
    print(
        f"scan: logfork {ours.mb_per_s:.1f} MB/s, DumpLogSegments {theirs.mb_per_s:.1f} MB/s, "
        f"ratio {ratio:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
