"""Benchmark: the audit's Spark pipeline on synthetic broker log dirs, local[1] against
local[2].

    python -m benchmarks.audit         2,000 partitions x 3 replicas x 100 batches
    python -m benchmarks.audit --partitions 200 --masters 'local[1]' 'local[2]' 'local[4]'

Each master gets a fresh process (one SparkSession per process): it starts Spark, runs the
pipeline once cold, then `--repeat` times warm. The speed-up is the local[1] time over each
other master's, best warm run against best warm run. Figures only: nothing here fails on
time; the run fails only if the masters disagree on a verdict.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def measure(dirs: list[str], master: str, repeat: int, tables: Path) -> dict[str, Any]:
    """In this process: start the session, then time the pipeline."""
    from reports.pipeline import run_pipeline
    from reports.sources import audit_source
    from reports.spark import get_session

    started = time.monotonic()
    get_session(master)
    session_seconds = time.monotonic() - started
    runs = []
    verdicts = None
    for _ in range(repeat + 1):
        mark = time.monotonic()
        source = audit_source(dirs)
        result = run_pipeline([source], master=master, tables_dir=tables)
        runs.append({"seconds": time.monotonic() - mark, **result.timings})
        run = result.runs[0]
        summary = [
            (p.topic, p.partition, p.status, p.verdict.diverged_at if p.verdict else None)
            for p in run.partitions
        ]
        if verdicts is not None and summary != verdicts:
            raise SystemExit(f"{master}: results differ between repeats")
        verdicts = summary
    assert verdicts is not None
    return {
        "master": master,
        "session_seconds": session_seconds,
        "cold": runs[0],
        "warm": runs[1:],
        "best_warm": min(r["seconds"] for r in runs[1:]) if repeat else runs[0]["seconds"],
        "partitions": len(verdicts),
        "diverged": [v for v in verdicts if v[2] == "diverged"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.audit", description=__doc__)
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--batches", type=int, default=100, help="batches per replica")
    parser.add_argument("--repeat", type=int, default=2, help="warm runs after the cold one")
    parser.add_argument("--masters", nargs="+", default=["local[1]", "local[2]"])
    parser.add_argument("--keep", metavar="DIR", help="craft the log dirs here and keep them")
    parser.add_argument("--worker", metavar="MASTER", help=argparse.SUPPRESS)
    parser.add_argument("--dirs", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        with tempfile.TemporaryDirectory(prefix="logfork-bench-tables-") as tmp:
            print(json.dumps(measure(args.dirs, args.worker, args.repeat, Path(tmp))))
        return 0

    from benchmarks.fleet_data import write_fleet

    with tempfile.TemporaryDirectory(prefix="logfork-bench-") as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        mark = time.monotonic()
        dirs = write_fleet(
            root, partitions=args.partitions, brokers=args.replicas, batches=args.batches
        ).dirs
        print(
            f"crafted {args.partitions} partitions x {args.replicas} replicas x "
            f"{args.batches} batches in {time.monotonic() - mark:.1f}s",
            file=sys.stderr,
        )
        results = []
        for master in args.masters:
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.audit",
                    "--worker",
                    master,
                    "--repeat",
                    str(args.repeat),
                    "--dirs",
                    *map(str, dirs),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                print(proc.stderr[-3000:], file=sys.stderr)
                return 1
            results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    base = results[0]
    total = args.partitions * args.replicas * args.batches
    for r in results:
        speedup = base["best_warm"] / r["best_warm"]
        print(
            f"{r['master']:10} session {r['session_seconds']:5.1f}s  "
            f"cold {r['cold']['seconds']:6.2f}s  best warm {r['best_warm']:6.2f}s  "
            f"{total / r['best_warm'] / 1e3:7.1f}k batches/s  "
            f"speed-up vs {base['master']} {speedup:4.2f}x  "
            f"({r['partitions']} partitions, {len(r['diverged'])} diverged)"
        )
        for w in r["warm"]:
            steps = ", ".join(f"{k} {v:.2f}s" for k, v in w.items() if k != "seconds")
            print(f"{'':10} warm run {w['seconds']:.2f}s: {steps}")
    same = all(r["diverged"] == base["diverged"] for r in results)
    print("same verdicts under every master" if same else "VERDICTS DIFFER BETWEEN MASTERS")
    last = results[-1]
    print(
        f"audit: {base['master']} {total / base['best_warm'] / 1e3:.1f}k batches/s, "
        f"{last['master']} {total / last['best_warm'] / 1e3:.1f}k batches/s, "
        f"speed-up {base['best_warm'] / last['best_warm']:.2f}"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
