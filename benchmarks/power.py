"""Benchmark: brokers on crash-simulating filesystems (fixtures.disks) against a plain bind
mount, in one run: acks=all produce throughput, and a scenario's wall time.

    python -m benchmarks.power [--kafka-version 3.9.2] [--runs 2] [--records 20000]

Each round starts a 3-broker ZooKeeper-mode cluster twice, once with every broker's log
dir on `logfork-crashfs` and once on the plain bind mount (in turn, plain first, so that
neither always runs on a warmer machine), and times one producer's acks=all writes of
`--records` values of `--size` bytes to a topic of replication factor 3; then the `smoke`
scenario (2,000 acks=all writes, a leader SIGKILLed and restarted) runs on each. The figures
are medians over the rounds: both throughputs and their ratio, and the scenario's wall time
(boot to teardown) on each with the ratio the issue sets a bar for (1.3). Nothing here fails
on time.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path

from confluent_kafka import Producer

from basics.releases import NEWEST_3_9
from fixtures.cluster import Cluster, ClusterSpec
from runrecord.power import CUT, UNSYNCED
from suites.registry import get
from suites.scenario import run

TOPIC = "bench"


def produce_rate(kafka: str, model: str, records: int, size: int, out: Path) -> float:
    """Records per second one producer's acks=all writes reach, on a fresh cluster."""
    spec = ClusterSpec(kafka, "zk", brokers=3, power_model=model)
    cluster = Cluster(spec, run_dir=out / f"produce-{model}-{time.time_ns()}")
    with cluster:
        cluster.create_topic(TOPIC, [[1, 2, 3]], {"min.insync.replicas": 2})
        producer = Producer({**cluster.client_config(), "acks": "all", "linger.ms": 5})
        value = b"x" * size
        producer.produce(TOPIC, value=value)  # the connection and metadata, untimed
        producer.flush(60)
        started = time.monotonic()
        for _ in range(records):
            while True:
                try:
                    producer.produce(TOPIC, value=value)
                    break
                except BufferError:
                    producer.poll(0.05)
        left = producer.flush(300)
        seconds = time.monotonic() - started
    if left:
        raise RuntimeError(f"{left} write(s) not acknowledged on the {model} mount")
    return records / seconds


def scenario_seconds(kafka: str, model: str, out: Path) -> float:
    """`smoke`'s wall time, boot to teardown, with its log dirs on the given mount."""
    smoke = dataclasses.replace(get("smoke"), power_models=(CUT, UNSYNCED))
    verdict = run(smoke, kafka, "zk", out=out, power_model=model)
    if verdict.outcome.value != "consistent":
        raise RuntimeError(f"smoke on the {model} mount: {verdict.headline()}")
    return sum(verdict.phases.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.power",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--kafka-version", default=NEWEST_3_9)
    parser.add_argument("--runs", type=int, default=2, help="rounds (default 2)")
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--size", type=int, default=1024, help="bytes per value (1024)")
    parser.add_argument("--out", default="runs/bench-power", metavar="DIR")
    args = parser.parse_args(argv)
    out = Path(args.out)
    rates: dict[str, list[float]] = {CUT: [], UNSYNCED: []}
    walls: dict[str, list[float]] = {CUT: [], UNSYNCED: []}
    names = {CUT: "plain bind mount", UNSYNCED: "crash-simulating filesystem"}
    for i in range(args.runs):
        for model in (CUT, UNSYNCED):
            rates[model].append(produce_rate(args.kafka_version, model, args.records,
                                             args.size, out))  # fmt: skip
            walls[model].append(scenario_seconds(args.kafka_version, model, out))
            print(
                f"round {i + 1}, {names[model]}: {rates[model][-1]:.0f} writes/s, smoke "
                f"{walls[model][-1]:.1f} s",
                flush=True,
            )
    plain, fs = (statistics.median(rates[m]) for m in (CUT, UNSYNCED))
    mb = args.size / 1e6
    print(f"acks=all produce, plain bind mount: {plain:.0f} writes/s ({plain * mb:.1f} MB/s)")
    print(f"acks=all produce, crash-simulating filesystem: {fs:.0f} writes/s ({fs * mb:.1f} MB/s)")
    print(f"produce throughput ratio (plain / crash-simulating): {plain / fs:.2f}")
    a, b = (statistics.median(walls[m]) for m in (CUT, UNSYNCED))
    print(
        f"scenario smoke: {a:.1f} s on the plain mount, {b:.1f} s on the crash-simulating "
        f"filesystem: ratio {b / a:.2f} (goal: within 1.3)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
