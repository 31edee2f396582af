"""Our segment reader against Kafka's own DumpLogSegments, on segments a real broker wrote.

Each compression codec the release supports gets a topic; a 1.1.1 broker also writes a
topic in message format 0.10.2 (v1 messages and compressed wrappers). DumpLogSegments runs
inside the broker's container, on the same files, with the release's own jars (from 4.3
plus kafka-tools, copied in; a release without a published kafka-tools is skipped with the
reason, see fixtures.tools).
"""

import re

import pytest
from confluent_kafka import Producer

from checkers.segments import scan_partition
from fixtures.ci import require
from fixtures.config import LIBS_DIR
from fixtures.tools import ToolClasspath, ToolUnavailable, dump_log_segments

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


TOOLS_DIR = "/tmp/kafka-tools"


def dump(node, tool: ToolClasspath, path: str) -> list[dict[str, str]]:
    classpath = tool.container_classpath(LIBS_DIR, TOOLS_DIR)
    result = node.exec(["java", "-Xmx256m", "-cp", classpath, tool.main, "--files", path])
    assert result.exit_code == 0, result.output[-2000:]
    entries = []
    for line in result.output.splitlines():
        # One line per v2 batch ("baseOffset: ...") or per v0/v1 entry ("offset: ...").
        if line.startswith(("baseOffset:", "offset:")):
            entries.append(dict(re.findall(r"(\w+): (\S+)", line)))
    return entries


def produce(cluster, topic: str, codec: str, batches: int = 6, per_batch: int = 7) -> None:
    producer = Producer(
        {
            **cluster.client_config(),
            "acks": "all",
            "compression.type": codec,
            "linger.ms": 500,
            "batch.num.messages": per_batch,
        }
    )
    for b in range(batches):
        for r in range(per_batch):
            producer.produce(topic, value=f"{codec}-{b}-{r}-".encode() * 20, key=f"k{r}".encode())
        producer.flush(30)


@pytest.mark.cluster
def test_reader_matches_dump_log_segments(cluster_factory, kafka_target):
    try:
        tool = dump_log_segments(kafka_target.kafka)
    except ToolUnavailable as exc:
        require(str(exc))
    cluster = cluster_factory(brokers=1)
    release = cluster.release
    node = cluster.broker(1)
    if tool.extra_jars:  # 4.3+: the broker's libs lack the tools module (KAFKA-14579)
        parent, name = TOOLS_DIR.rsplit("/", 1)
        assert node.docker.put_archive(parent, tool.extra_jars_tar(name))
    topics = {}
    for codec in CODECS:
        if codec == "zstd" and not release.at_least(2, 1):  # KIP-110
            continue
        topics[f"seg-{codec}"] = ({}, codec)
        if not release.at_least(3, 0):  # message formats below v2 went away with 3.0 (KIP-724)
            topics[f"seg-v1-{codec}"] = ({"message.format.version": "0.10.2"}, codec)
    topics = {t: v for t, v in topics.items() if not (v[1] == "zstd" and "v1" in t)}
    for topic, (config, codec) in topics.items():
        cluster.create_topic(topic, [[1]], config)
        produce(cluster, topic, codec)

    for topic, (_, codec) in topics.items():
        scan = scan_partition(node.data_dir / f"{topic}-0")
        assert not scan.errors, scan.errors
        segment = scan.segments[0]
        theirs = dump(node, tool, f"/logfork/data/{topic}-0/{segment.name}")
        ours = [b for b in scan.batches if b.segment == segment.name]
        assert len(ours) == len(theirs) >= 6, topic
        for mine, kafka in zip(ours, theirs, strict=True):
            assert mine.position == int(kafka["position"])
            assert mine.crc == int(kafka["crc"])
            assert mine.crc_valid == (kafka["isvalid"] == "true")
            assert mine.compression == kafka["compresscodec"].lower()
            if "baseOffset" in kafka:
                assert (mine.base_offset, mine.last_offset) == (
                    int(kafka["baseOffset"]),
                    int(kafka["lastOffset"]),
                )
                assert mine.leader_epoch == int(kafka["partitionLeaderEpoch"])
                assert mine.size == int(kafka["size"])
                assert mine.magic == 2
            else:  # a v0/v1 entry: its offset is the last inner offset
                assert mine.last_offset == int(kafka["offset"])
                assert mine.magic == int(kafka["magic"])
                assert mine.leader_epoch == -1
                # A wrapper holds the whole batch: our base is its first inner offset.
                assert mine.last_offset - mine.base_offset + 1 == (7 if codec != "none" else 1)
