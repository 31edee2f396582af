"""Benchmark: from what input size `logfork audit` is faster on Spark (local[*]) than on the
local engine, start-up included: the measurement behind `suites.audit_cli.AUTO_SPARK_BYTES`.

    python -m benchmarks.crossover --partitions 500 2000 5000

For each size a crafted fleet (`benchmarks.fleet_data`, one-record batches, the costliest
shape per byte) is audited by both engines, each in a fresh process as the command line
runs it (Spark's session start counted). A line `seconds = fixed + bytes / rate` is fitted
to each engine's times, and the crossover is where the lines meet. Figures only.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from benchmarks.fleet import run_engine
from benchmarks.fleet_data import write_fleet
from checkers.audit.plan import plan_audit

SPARK = "local[*]"


def fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares (intercept, slope) of y over x."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points) or 1.0
    slope = sum((x - mx) * (y - my) for x, y in points) / var
    return my - slope * mx, slope


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.crossover", description=__doc__)
    parser.add_argument("--partitions", type=int, nargs="+", default=[500, 2000, 5000])
    parser.add_argument("--batches", type=int, default=1000, help="batches per replica")
    args = parser.parse_args(argv)
    times: dict[str, list[tuple[float, float]]] = {"local": [], SPARK: []}
    for partitions in args.partitions:
        with tempfile.TemporaryDirectory(prefix="logfork-crossover-") as tmp:
            dirs = [str(d) for d in write_fleet(Path(tmp), partitions=partitions,
                                                batches=args.batches).dirs]  # fmt: skip
            size = sum(t.size for t in plan_audit(dirs).tasks)
            line = [f"{partitions} partitions, {size / 2**20:.0f} MiB:"]
            for engine in times:
                r = run_engine(engine, dirs, None)
                seconds = r["session_seconds"] + r["seconds"]
                times[engine].append((size, seconds))
                line.append(f"{engine} {seconds:.1f}s")
            print(" ".join(line), flush=True)
    (a_local, b_local), (a_spark, b_spark) = fit(times["local"]), fit(times[SPARK])
    print(
        f"local: {a_local:.1f}s + {1 / b_local / 2**20:.0f} MiB/s; "
        f"{SPARK}: {a_spark:.1f}s + {1 / b_spark / 2**20:.0f} MiB/s"
    )
    if b_spark >= b_local:
        print("Spark never catches up on this machine")
        return 0
    cross = (a_spark - a_local) / (b_local - b_spark)
    print(f"crossover: {cross / 2**30:.2f} GiB of segments")
    return 0


if __name__ == "__main__":
    sys.exit(main())
