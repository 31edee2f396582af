"""Crafted run directories, as a scenario run leaves them, for tests, benchmarks and demos.

`kip279_s1_equal` lays out what KIP-279's first scenario with n = 20 leaves behind on a
release with KIP-101 rules only (1.1.1): the two replicas of ``t-0`` hold [11, 20] written
in epoch 1 on one and in epoch 2 on the other, the follower never truncated, and both
fetched [21, 30] since. Segments are written with `checkers.craft`, with producer
timestamps that line up with the timeline; the artifact files follow `suites/scenario.py`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from checkers.audit import audit
from checkers.model import Protocol, truncate_follower
from testsupport import craft
from testsupport.craft import PartitionSpec
from testsupport.lineages import from_spec

T0 = 1_795_300_000.0  # wall-clock start of crafted runs (seconds)
HOSTILE = "<script>alert(1)</script>"

# (base, last, epoch, seconds after T0 the producer sent it)
LEADER_LOG = [(0, 10, 1, 6.0), (11, 20, 1, 7.5), (21, 30, 3, 12.5)]
FOLLOWER_LOG = [(0, 10, 1, 6.0), (11, 20, 2, 9.5), (21, 30, 3, 12.5)]


def record_text(offset: int, epoch: int) -> str:
    return f"r{offset:04d}-e{epoch}"


def write_partition(
    log_dir: Path,
    topic: str,
    partition: int,
    batches: Sequence[tuple[int, int, int, float]],
    *,
    high_watermark: int | None,
    start: float = T0,
) -> None:
    """Replace the segment `write_log_dir` wrote with batches that carry keys and producer
    timestamps (the checkpoint files it wrote stay valid: same offsets and epochs)."""
    data = b""
    for base, last, epoch, at in batches:
        records = [
            (record_text(o, epoch).encode(), record_text(o, epoch).encode())
            for o in range(base, last + 1)
        ]
        data += craft.encode_v2_batch(
            base, records, leader_epoch=epoch, base_timestamp=int((start + at) * 1000)
        )
    (log_dir / f"{topic}-{partition}" / craft.segment_name(0)).write_bytes(data)


def write_jsonl(path: Path, items: Sequence[Mapping[str, Any]]) -> None:
    path.write_text("".join(json.dumps(item) + "\n" for item in items))


def kip279_s1_equal(
    run_dir: Path | str,
    *,
    release: str = "1.1.1",
    mode: str = "zk",
    topic: str = "t",
    hostile: bool = False,
    start: float = T0,
) -> Path:
    """A run directory of kip-279-s1-equal. `hostile` adds markup where a cluster or a log
    could put any text: a second topic named like a script in the producer history,
    states and timeline, and script-like keys and error texts."""
    root = Path(run_dir)
    nodes: dict[str, dict[str, Any]] = {
        "b1": {
            "broker_id": 1,
            "partitions": {
                (topic, 0): PartitionSpec([b[:3] for b in LEADER_LOG], high_watermark=31)
            },
        },
        "b2": {
            "broker_id": 2,
            "partitions": {
                (topic, 0): PartitionSpec([b[:3] for b in FOLLOWER_LOG], high_watermark=31)
            },
        },
        "b3": {"broker_id": 3, "partitions": {}},
    }
    craft.write_run_dir(root, nodes)
    write_partition(root / "nodes/b1/data", topic, 0, LEADER_LOG, high_watermark=31, start=start)
    write_partition(root / "nodes/b2/data", topic, 0, FOLLOWER_LOG, high_watermark=31, start=start)
    (root / "nodes/zk").mkdir(parents=True, exist_ok=True)

    def at(seconds: float) -> float:
        return round(start + seconds, 3)

    # What the model says when broker 2 rejoins: the log it had then, against the leader's.
    leader = from_spec(1, [b[:3] for b in LEADER_LOG])
    rejoining = from_spec(2, [b[:3] for b in FOLLOWER_LOG[:2]])
    model = truncate_follower(leader, rejoining, Protocol.KIP_101)
    other = HOSTILE if hostile else "u"
    timeline: list[dict[str, Any]] = [
        {"kind": "phase", "name": "boot", "wall": at(0)},
        {"kind": "phase", "name": "faults", "wall": at(5)},
        {
            "kind": "state",
            "name": "leader",
            "wall": at(5.5),
            "topic": topic,
            "leader": 1,
            "epoch": 1,
            "isr": [1, 2],
        },
        {"kind": "fault", "name": "cut", "wall": at(7.0), "cut": "b2 <-x-> b1", "rules": 2},
        {"kind": "fault", "name": "kill", "wall": at(8.0), "node": "b1", "signal": "SIGKILL"},
        {"kind": "heal", "name": "cut", "wall": at(8.1), "cut": "b2 <-x-> b1"},
        {
            "kind": "election",
            "name": "unclean",
            "wall": at(9.0),
            "topic": topic,
            "partition": 0,
            "leader": 2,
            "epoch": 2,
        },
        {"kind": "fault", "name": "kill", "wall": at(10.0), "node": "b2", "signal": "SIGKILL"},
        {"kind": "heal", "name": "restart", "wall": at(11.0), "node": "b1"},
        {
            "kind": "election",
            "name": "unclean",
            "wall": at(12.0),
            "topic": topic,
            "partition": 0,
            "leader": 1,
            "epoch": 3,
        },
        {"kind": "heal", "name": "restart", "wall": at(13.0), "node": "b2"},
        {
            "kind": "note",
            "name": "model",
            "wall": at(13.1),
            "protocol": "kip-101",
            "follower": 2,
            "leader": 1,
            "outcome": model.outcome.value,
            "lines": model.describe(),
        },
        {"kind": "phase", "name": "convergence", "wall": at(14.0)},
        {
            "kind": "note",
            "name": "convergence",
            "wall": at(15.5),
            "converged": True,
            "isr": [1, 2],
            "leos": {"1": 31, "2": 31},
        },
        {"kind": "phase", "name": "check", "wall": at(16.0)},
        {"kind": "phase", "name": "done", "wall": at(17.0)},
    ]
    if hostile:
        timeline.insert(
            3,
            {
                "kind": "note",
                "name": HOSTILE,
                "wall": at(6.5),
                "topic": other,
                "detail": "<img src=x onerror=alert(2)>",
            },
        )
    for i, event in enumerate(timeline):
        event.setdefault("mono", 1000.0 + event["wall"] - start + i * 1e-6)
    write_jsonl(root / "timeline.jsonl", timeline)

    states = [
        (5.5, 1, 1, [1, 2], 1),
        (8.3, 1, 1, [1], 2),
        (9.0, 2, 2, [2], 3),
        (10.2, -1, 2, [2], 4),
        (12.0, 1, 3, [1], 5),
        (15.0, 1, 3, [1, 2], 6),
    ]
    write_jsonl(
        root / "states.jsonl",
        [
            {
                "wall": at(t),
                "topic": topic,
                "partition": 0,
                "leader": leader_id,
                "leader_epoch": epoch,
                "isr": isr,
                "recovery_state": "RECOVERED",
                "version": version,
                "source": mode,
            }
            for t, leader_id, epoch, isr, version in states
        ]
        + (
            [
                {
                    "wall": at(6.6),
                    "topic": other,
                    "partition": 0,
                    "leader": 3,
                    "leader_epoch": 0,
                    "isr": [3],
                    "recovery_state": "RECOVERED",
                    "version": 0,
                    "source": mode,
                }
            ]
            if hostile
            else []
        ),
    )

    sends: list[dict[str, Any]] = []
    for batches, broker in ((LEADER_LOG[:2], 1), (FOLLOWER_LOG[1:2], 2), (LEADER_LOG[2:], 1)):
        for base, last, epoch, sent in batches:
            for offset in range(base, last + 1):
                text = record_text(offset, epoch)
                sends.append(
                    {
                        "topic": topic,
                        "key": text,
                        "value": text,
                        "acks": "1",
                        "sent": at(sent - 0.05),
                        "acked": at(sent + 0.01),
                        "partition": 0,
                        "offset": offset,
                        "error": None,
                        "broker": broker,
                    }
                )
    for i in range(3):  # sends while the partition had no leader
        sends.append(
            {
                "topic": topic,
                "key": f"late-{i}",
                "value": f"late-{i}",
                "acks": "1",
                "sent": at(10.5 + i * 0.1),
                "acked": at(11.5),
                "partition": 0,
                "offset": None,
                "error": 'KafkaError{code=NOT_LEADER_OR_FOLLOWER,val=6,str="Broker: Not leader '
                'for partition"}',
                "broker": None,
            }
        )
    if hostile:
        sends.append(
            {
                "topic": other,
                "key": HOSTILE,
                "value": "<b>bold</b>",
                "acks": "all",
                "sent": at(6.6),
                "acked": at(6.7),
                "partition": 0,
                "offset": 0,
                "error": None,
                "broker": 3,
            }
        )
        sends.append(
            {
                "topic": topic,
                "key": "x",
                "value": "x",
                "acks": "1",
                "sent": at(6.8),
                "acked": at(6.9),
                "partition": 0,
                "offset": None,
                "error": "<script>alert(3)</script> & friends",
                "broker": 1,
            }
        )
    write_jsonl(root / "producer.jsonl", sends)

    title = "KIP-279 scenario 1, n = 20: follower keeps a batch of an epoch the leader never had"
    summary = (
        f"replicas 1 and 2 of {topic}-0 diverged at offset 11: [11, 20] is epoch 1 on broker 1 "
        "and epoch 2 on broker 2, below the high watermark 31"
    )
    if hostile:
        title += f" {HOSTILE}"
        summary += f" {HOSTILE}"
    expected = "reproduced" if release.split(".")[0] in ("0", "1") else "consistent"
    outcome = "reproduced" if expected == "reproduced" else "diverged"
    meta = {
        "scenario": "kip-279-s1-equal",
        "title": title,
        "kip": "KIP-279",
        "jira": "KAFKA-6361",
        "fixed_in": "2.0.0",
        "release": release,
        "mode": mode,
        "started": start,
        "host": "crafted",
    }
    verdict = {
        "scenario": "kip-279-s1-equal",
        "release": release,
        "mode": mode,
        "outcome": outcome,
        "expected": expected,
        "summary": summary,
        "jira": "KAFKA-6361",
        "kip": "KIP-279",
        "fixed_in": "2.0.0",
        "run_dir": str(root),
        "phases": {"boot": 5.0, "faults": 9.0, "convergence": 2.0, "check": 1.0},
        "details": {"diverged_at": 11, "follower": 2, "leader": 1},
        "as_expected": outcome == expected,
    }
    (root / "run.json").write_text(
        json.dumps(
            {
                **meta,
                "finished": start + 17,
                "outcome": outcome,
                "as_expected": outcome == expected,
                "cluster": {"release": release, "mode": mode, "seconds": 5.0},
            },
            indent=1,
        )
    )
    (root / "verdict.json").write_text(json.dumps(verdict, indent=1))
    (root / "cluster.json").write_text(
        json.dumps(
            {
                "run_id": root.name,
                "release": release,
                "mode": mode,
                "nodes": {
                    "zk": {"role": "zookeeper", "node_id": None},
                    **{f"b{i}": {"role": "broker", "node_id": i} for i in (1, 2, 3)},
                },
            },
            indent=1,
        )
    )
    result = audit([root], topic=topic, protocol=Protocol.KIP_101)
    (root / "audit.json").write_text(result.to_json())
    return root


def consistent_run(
    run_dir: Path | str,
    *,
    scenario: str = "smoke",
    release: str = "3.9.2",
    mode: str = "zk",
    outcome: str = "consistent",
    expected: str = "consistent",
    start: float = T0,
) -> Path:
    """A short run whose replicas agree (or, with outcome "not-reached", whose nodes hold
    nothing yet): for index pages and reports of uneventful runs."""
    root = Path(run_dir)
    log = [(0, 9, 1), (10, 19, 1), (20, 29, 2)]
    parts = (
        {("smoke", 0): PartitionSpec(log, high_watermark=30)} if outcome != "not-reached" else {}
    )
    craft.write_run_dir(root, {f"b{b}": {"broker_id": b, "partitions": parts} for b in (1, 2, 3)})
    meta = {
        "scenario": scenario,
        "title": f"{scenario} crafted",
        "kip": None,
        "jira": None,
        "fixed_in": None,
        "release": release,
        "mode": mode,
        "started": start,
        "finished": start + 10,
        "host": "crafted",
        "outcome": outcome,
        "as_expected": outcome == expected,
    }
    (root / "run.json").write_text(json.dumps(meta))
    summary = {
        "consistent": "all acknowledged records present once and in order",
        "not-reached": "not reached: expected leader election; observed no leader",
    }
    (root / "verdict.json").write_text(
        json.dumps(
            {
                "scenario": scenario,
                "release": release,
                "mode": mode,
                "outcome": outcome,
                "expected": expected,
                "summary": summary.get(outcome, outcome),
                "as_expected": outcome == expected,
                "phases": {"boot": 4.0},
                "details": {},
            }
        )
    )
    write_jsonl(
        root / "timeline.jsonl",
        [
            {"kind": "phase", "name": "boot", "wall": start, "mono": 0.0},
            {"kind": "fault", "name": "kill", "wall": start + 3, "mono": 3.0, "node": "b1"},
            {"kind": "heal", "name": "restart", "wall": start + 6, "mono": 6.0, "node": "b1"},
            {"kind": "phase", "name": "done", "wall": start + 10, "mono": 10.0},
        ],
    )
    return root


def many_partitions(
    root: Path | str,
    *,
    partitions: int = 2000,
    brokers: int = 3,
    batches: int = 20,
    diverged: Sequence[int] = (7,),
    topics: int = 20,
) -> list[Path]:
    """Plain broker log dirs with `partitions` partitions replicated on every broker, for
    benchmarks; the partitions in `diverged` differ on the last broker from their middle on."""
    base = Path(root)
    per_topic = max(1, partitions // topics)
    specs: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
    for n in range(partitions):
        tp = (f"topic{n // per_topic:03d}", n % per_topic)
        # Three leader epochs over the log, as a few elections leave them.
        specs[tp] = [(i * 10, i * 10 + 9, 1 + 3 * i // batches) for i in range(batches)]
    dirs = []
    for b in range(1, brokers + 1):
        parts: dict[tuple[str, int], PartitionSpec] = {}
        for n, (tp, log) in enumerate(specs.items()):
            if b == brokers and n in diverged:
                half = len(log) // 2
                log = log[:half] + [(x, y, e, "other") for x, y, e in log[half:]]
            parts[tp] = PartitionSpec(log, high_watermark=batches * 10)
        dirs.append(craft.write_log_dir(base / f"broker-{b}", b, parts))
    return dirs
