"""Real segments for the benchmarks, written by a real broker and cached between runs.

A one-broker cluster of the given release writes about 1 GB into each of two topics: one
record per batch, and batches of about 16 KB. The broker is stopped cleanly and its
partition directories are copied into the cache (~/.cache/logfork/bench/<release>/).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Producer

from faults import process
from fixtures.cluster import Cluster, ClusterSpec
from fixtures.progress import Progress
from fixtures.releases import cache_dir


@dataclass(frozen=True)
class Shape:
    name: str
    value_bytes: int
    producer: dict


SHAPES = {
    # One record per produce request: every record is its own batch on disk.
    "one-record": Shape("one-record", 100, {"linger.ms": 0, "batch.num.messages": 1}),
    # librdkafka fills batches up to batch.size bytes while linger holds them back.
    "16k": Shape("16k", 1000, {"linger.ms": 20, "batch.size": 16384}),
}
TARGET_BYTES = 1 << 30


def bench_dir(release: str) -> Path:
    return cache_dir() / "bench" / release


def ensure_segments(release: str, target: int = TARGET_BYTES) -> dict[str, Path]:
    """Partition directories of about `target` bytes per shape; written once, then reused."""
    root = bench_dir(release)
    wanted = {name: root / name for name in SHAPES}
    if all((d / "complete").is_file() for d in wanted.values()):
        return wanted
    spec = ClusterSpec(
        release,
        "zk",
        brokers=1,
        broker_config={"log.segment.bytes": 1 << 30, "log.retention.ms": -1},
    )
    with Cluster(spec, run_dir=root / "cluster") as cluster:
        for name, shape in SHAPES.items():
            if (wanted[name] / "complete").is_file():
                continue
            cluster.create_topic(f"bench-{name}", [[1]])
            _fill(cluster, f"bench-{name}", shape, target)
        process.kill(cluster, cluster.broker(1), signal="SIGTERM")  # clean: complete files
        for name in SHAPES:
            if (wanted[name] / "complete").is_file():
                continue
            source = cluster.broker(1).data_dir / f"bench-{name}-0"
            shutil.rmtree(wanted[name], ignore_errors=True)
            shutil.copytree(
                source, wanted[name], ignore=shutil.ignore_patterns("*.index", "*.timeindex")
            )
            (wanted[name] / "complete").write_text("ok\n")
    shutil.rmtree(root / "cluster", ignore_errors=True)
    return wanted


def _fill(cluster: Cluster, topic: str, shape: Shape, target: int) -> None:
    producer = Producer(
        {
            **cluster.client_config(),
            "acks": "1",
            "compression.type": "none",
            "queue.buffering.max.messages": 200000,
            **shape.producer,
        }
    )
    value = b"x" * shape.value_bytes
    count = target // (shape.value_bytes + 70)
    with Progress(f"writing {topic}", total=count // 100000) as progress:
        for i in range(count):
            while True:
                try:
                    producer.produce(topic, value=value, partition=0)
                    break
                except BufferError:
                    producer.poll(0.05)
            if i % 100000 == 99999:
                producer.poll(0)
                progress.step()
        producer.flush(600)
