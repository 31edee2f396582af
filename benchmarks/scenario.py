"""Benchmark: the wall time of kip-279-s1-equal against the waits the protocol imposes.

    python -m benchmarks.scenario [--kafka-version 3.9.2] [--runs 3]

The scenario's wall time is split into boot, faults, convergence, check, teardown and report
(on the engine `logfork run` uses, local unless --report-engine spark). The
protocol itself makes it wait for B's ZooKeeper session to expire (B's
zookeeper.session.timeout.ms, plus up to one ZooKeeper tick: the server checks sessions once
per tick) and for one replica fetch round once healed (replica.fetch.wait.max.ms). The ratio
of the scenario's own phases (faults, convergence and check) to those waits is the figure
to keep low; the ratio with boot and report included is printed beside it.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from basics.releases import NEWEST_3_9
from fixtures.config import zookeeper_config
from suites.registry import get
from suites.scenario import run

SCENARIO = "kip-279-s1-equal"
FETCH_WAIT_MS = 500  # replica.fetch.wait.max.ms, Kafka's default


def imposed_seconds(kafka: str) -> float:
    spec = get(SCENARIO).cluster(kafka, "zk")
    session = spec.node_config["b2"]["zookeeper.session.timeout.ms"]
    tick = zookeeper_config()["tickTime"]
    return (session + tick + FETCH_WAIT_MS) / 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scenario",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--kafka-version", default=NEWEST_3_9)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", default="runs/bench", metavar="DIR")
    parser.add_argument(
        "--report-engine",
        choices=("local", "spark"),
        default="local",
        help="the engine the report runs on, as `logfork run --report-engine` (default local)",
    )
    args = parser.parse_args(argv)
    from reports.cli import report_run

    imposed = imposed_seconds(args.kafka_version)
    rows = []
    for i in range(args.runs):
        verdict = run(get(SCENARIO), args.kafka_version, "zk", out=Path(args.out))
        started = time.monotonic()
        report_run(Path(verdict.run_dir), Path(args.out) / "report", engine=args.report_engine)
        phases = {**verdict.phases, "report": time.monotonic() - started}
        own = sum(phases.get(k, 0.0) for k in ("faults", "convergence", "check"))
        rows.append((phases, own))
        print(
            f"run {i + 1}: {verdict.outcome.value}; "
            + ", ".join(f"{k} {v:.1f}s" for k, v in phases.items())
            + f"; scenario phases {own:.1f}s",
            flush=True,
        )
    own = statistics.median(r[1] for r in rows)
    total = statistics.median(sum(r[0].values()) for r in rows)
    print(
        f"protocol waits: {imposed:.1f}s (B's session timeout, one ZooKeeper tick, one fetch round)"
    )
    print(
        f"scenario: {own:.1f}s over {imposed:.1f}s of protocol waits, ratio "
        f"{own / imposed:.2f} (boot and report excluded; {total:.1f}s in all, ratio "
        f"{total / imposed:.2f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
