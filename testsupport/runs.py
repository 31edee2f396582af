"""Crafted run directories, as a scenario run leaves them, for the report tests.

`kip279_s1_equal` lays out what KIP-279's first scenario with n = 20 leaves behind on a
release with KIP-101 rules only (1.1.1): the two replicas of ``t-0`` hold [11, 20] written
in epoch 1 on one and in epoch 2 on the other, the follower never truncated, and both
fetched [21, 30] since. Segments are written with `testsupport.craft`, with producer
timestamps that line up with the timeline; every file of the run record is written through
`runrecord`, as a real run writes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from basics.protocol import Protocol, RecoveryState
from checkers.abstract import from_spec
from checkers.audit import audit
from checkers.encode import encode_v2_batch
from checkers.model import truncate_follower
from runrecord.events import Event, EventKind
from runrecord.history import Send
from runrecord.outcome import Outcome
from runrecord.run import BootInfo, ClusterInfo, NodeInfo, RunInfo, Verdict
from runrecord.rundir import RunDir
from runrecord.states import StateRecord
from testsupport import craft
from testsupport.craft import PartitionSpec

T0 = 1_795_300_000.0  # wall-clock start of crafted runs (seconds)
HOSTILE = "<script>alert(1)</script>"

# (base, last, epoch, seconds after T0 the producer sent it)
LEADER_LOG = [(0, 10, 1, 6.0), (11, 20, 1, 7.5), (21, 30, 3, 12.5)]
FOLLOWER_LOG = [(0, 10, 1, 6.0), (11, 20, 2, 9.5), (21, 30, 3, 12.5)]
NOT_LEADER = 'KafkaError{code=NOT_LEADER_OR_FOLLOWER,val=6,str="Broker: Not leader for partition"}'


def record_text(offset: int, epoch: int) -> str:
    return f"r{offset:04d}-e{epoch}"


def write_partition(
    log_dir: Path,
    topic: str,
    partition: int,
    batches: Sequence[tuple[int, int, int, float]],
    *,
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
        data += encode_v2_batch(
            base, records, leader_epoch=epoch, base_timestamp=int((start + at) * 1000)
        )
    (log_dir / f"{topic}-{partition}" / craft.segment_name(0)).write_bytes(data)


def cluster_info(run: RunDir, release: str, mode: str, brokers: Sequence[int]) -> ClusterInfo:
    nodes = {f"b{i}": NodeInfo("broker", i, f"lf-crafted-b{i}") for i in brokers}
    if mode == "zk":
        nodes["zk"] = NodeInfo("zookeeper", None, "lf-crafted-zk")
    return ClusterInfo(run.path.name, release, "crafted", mode, {}, nodes)


def _timeline(run: RunDir, events: Sequence[dict[str, Any]], start: float) -> None:
    writer = run.timeline_writer()
    for i, raw in enumerate(events):
        fields = dict(raw)
        kind, name, at = EventKind(fields.pop("kind")), fields.pop("name"), fields.pop("at")
        typed = {k: fields.pop(k) for k in list(fields) if k in Event.__dataclass_fields__}
        wall = round(start + at, 3)
        writer.append(Event(kind, name, wall, 1000.0 + at + i * 1e-6, **typed, data=fields))


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
    run = RunDir(root)
    title = "KIP-279 scenario 1, n = 20: follower keeps a batch of an epoch the leader never had"
    summary = (
        f"replicas 1 and 2 of {topic}-0 diverged at offset 11: [11, 20] is epoch 1 on broker 1 "
        "and epoch 2 on broker 2, below the high watermark 31"
    )
    if hostile:
        title += f" {HOSTILE}"
        summary += f" {HOSTILE}"
    expected = Outcome.REPRODUCED if release.split(".")[0] in ("0", "1") else Outcome.CONSISTENT
    outcome = Outcome.REPRODUCED if expected == Outcome.REPRODUCED else Outcome.DIVERGED
    info = RunInfo(
        "kip-279-s1-equal",
        title,
        release,
        mode,
        start,
        "crafted",
        kip="KIP-279",
        jira="KAFKA-6361",
        fixed_in="2.0.0",
    )
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
    craft.write_run_dir(root, nodes, info=info)
    write_partition(run.node_data("b1"), topic, 0, LEADER_LOG, start=start)
    write_partition(run.node_data("b2"), topic, 0, FOLLOWER_LOG, start=start)
    run.node_dir("zk").mkdir(parents=True, exist_ok=True)
    run.write_cluster(cluster_info(run, release, mode, (1, 2, 3)))

    # What the model says when broker 2 rejoins: the log it had then, against the leader's.
    leader = from_spec(1, [b[:3] for b in LEADER_LOG])
    rejoining = from_spec(2, [b[:3] for b in FOLLOWER_LOG[:2]])
    model = truncate_follower(leader, rejoining, Protocol.KIP_101)
    other = HOSTILE if hostile else "u"
    events: list[dict[str, Any]] = [
        {"kind": "phase", "name": "boot", "at": 0},
        {"kind": "phase", "name": "faults", "at": 5},
        {"kind": "state", "name": "leader", "at": 5.5, "topic": topic, "leader": 1, "epoch": 1},
        {"kind": "fault", "name": "cut", "at": 7.0, "cut": "b2 <-x-> b1", "rules": 2},
        {"kind": "fault", "name": "kill", "at": 8.0, "node": "b1", "signal": "SIGKILL"},
        {"kind": "heal", "name": "cut", "at": 8.1, "cut": "b2 <-x-> b1"},
        {"kind": "election", "name": "unclean", "at": 9.0, "topic": topic, "partition": 0}
        | {"leader": 2, "epoch": 2},
        {"kind": "fault", "name": "kill", "at": 10.0, "node": "b2", "signal": "SIGKILL"},
        {"kind": "heal", "name": "restart", "at": 11.0, "node": "b1"},
        {"kind": "election", "name": "unclean", "at": 12.0, "topic": topic, "partition": 0}
        | {"leader": 1, "epoch": 3},
        {"kind": "heal", "name": "restart", "at": 13.0, "node": "b2"},
        {"kind": "note", "name": "model", "at": 13.1, "protocol": "kip-101", "leader": 1}
        | {"follower": 2, "outcome": model.outcome.value, "lines": model.describe()},
        {"kind": "phase", "name": "convergence", "at": 14.0},
        {"kind": "note", "name": "convergence", "at": 15.5, "converged": True, "isr": [1, 2]}
        | {"leos": {"1": 31, "2": 31}},
        {"kind": "phase", "name": "check", "at": 16.0},
        {"kind": "phase", "name": "done", "at": 17.0},
    ]
    if hostile:
        events.insert(
            3,
            {"kind": "note", "name": HOSTILE, "at": 6.5, "topic": other}
            | {"detail": "<img src=x onerror=alert(2)>"},
        )
    _timeline(run, events, start)

    states = run.states_writer()
    for at, leader_id, epoch, isr, version in [
        (5.5, 1, 1, [1, 2], 1),
        (8.3, 1, 1, [1], 2),
        (9.0, 2, 2, [2], 3),
        (10.2, -1, 2, [2], 4),
        (12.0, 1, 3, [1], 5),
        (15.0, 1, 3, [1, 2], 6),
    ]:
        states.append(
            StateRecord(
                topic, 0, leader_id, epoch, isr, RecoveryState.RECOVERED, version, mode,
                round(start + at, 3),
            )
        )  # fmt: skip
    if hostile:
        states.append(
            StateRecord(other, 0, 3, 0, [3], RecoveryState.RECOVERED, 0, mode, start + 6.6)
        )

    producer = run.producer_writer()
    for batches, broker in ((LEADER_LOG[:2], 1), (FOLLOWER_LOG[1:2], 2), (LEADER_LOG[2:], 1)):
        for base, last, epoch, sent in batches:
            for offset in range(base, last + 1):
                text = record_text(offset, epoch)
                producer.append(
                    Send(topic, text, text, "1", round(start + sent - 0.05, 3),
                         round(start + sent + 0.01, 3), 0, offset, None, broker)
                )  # fmt: skip
    for i in range(3):  # sends while the partition had no leader
        late = f"late-{i}"
        producer.append(
            Send(topic, late, late, "1", round(start + 10.5 + i * 0.1, 3),
                 round(start + 11.5, 3), 0, None, NOT_LEADER)
        )  # fmt: skip
    if hostile:
        producer.append(Send(other, HOSTILE, "<b>bold</b>", "all", start + 6.6, start + 6.7, 0, 0))
        producer.append(
            Send(topic, "x", "x", "1", start + 6.8, start + 6.9, 0, None,
                 "<script>alert(3)</script> & friends", 1)
        )  # fmt: skip

    run.write_verdict(
        Verdict(
            "kip-279-s1-equal",
            release,
            mode,
            outcome,
            expected,
            summary,
            jira="KAFKA-6361",
            kip="KIP-279",
            fixed_in="2.0.0",
            run_dir=str(root),
            phases={"boot": 5.0, "faults": 9.0, "convergence": 2.0, "check": 1.0},
            details={"diverged_at": 11, "follower": 2, "leader": 1},
        )
    )
    info.finished, info.outcome = start + 17, outcome
    info.as_expected = outcome == expected
    info.boot = BootInfo(release, mode, 5.0, "crafted")
    run.write_run(info)
    run.write_audit(audit([root], topic=topic, protocol=Protocol.KIP_101).to_dict())
    return root


def consistent_run(
    run_dir: Path | str,
    *,
    scenario: str = "smoke",
    release: str = "3.9.2",
    mode: str = "zk",
    outcome: Outcome = Outcome.CONSISTENT,
    expected: Outcome = Outcome.CONSISTENT,
    start: float = T0,
) -> Path:
    """A short run whose replicas agree (or, with another outcome, whose nodes hold nothing
    yet): for index pages and reports of uneventful runs."""
    root = Path(run_dir)
    run = RunDir(root)
    log = [(0, 9, 1), (10, 19, 1), (20, 29, 2)]
    parts = {("smoke", 0): PartitionSpec(log, high_watermark=30)} if outcome.has_verdict else {}
    info = RunInfo(scenario, f"{scenario} crafted", release, mode, start, "crafted")
    craft.write_run_dir(
        root, {f"b{b}": {"broker_id": b, "partitions": parts} for b in (1, 2, 3)}, info=info
    )
    run.write_cluster(cluster_info(run, release, mode, (1, 2, 3)))
    summary = {
        Outcome.CONSISTENT: "all acknowledged records present once and in order",
        Outcome.NOT_REACHED: "not reached: expected leader election; observed no leader",
        Outcome.SETUP_FAILED: "No Docker engine answers at unix:///crafted.sock",
        Outcome.DEPARTS: "offsets 11-20 missing on the follower, as documented",
    }
    verdict = Verdict(
        scenario, release, mode, outcome, expected, summary.get(outcome, outcome.value)
    )
    verdict.phases = {"boot": 4.0}
    run.write_verdict(verdict)
    _timeline(
        run,
        [
            {"kind": "phase", "name": "boot", "at": 0.0},
            {"kind": "fault", "name": "kill", "at": 3.0, "node": "b1"},
            {"kind": "heal", "name": "restart", "at": 6.0, "node": "b1"},
            {"kind": "phase", "name": "done", "at": 10.0},
        ],
        start,
    )
    info.finished, info.outcome, info.as_expected = start + 10, outcome, verdict.as_expected
    run.write_run(info)
    return root
