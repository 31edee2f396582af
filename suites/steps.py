"""Building blocks the KIP scenarios share: exact batches, checks of intermediate states,
convergence, the model's prediction and the checker's judgement.

Every step that creates a state also proves it, reading the replicas' segments from disk;
a step that finds anything else raises NotReached naming what it expected and observed.
"""

from __future__ import annotations

import copy
import re
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Producer

from checkers.audit import audit
from checkers.model import TruncationResult, truncate_follower
from checkers.verdict import PartitionVerdict
from fixtures.cluster import Cluster, ClusterSpec
from fixtures.errors import NotReached
from fixtures.waiting import WaitTimeout, wait_until
from observe.replicas import replica
from observe.state import PartitionState, partition_state
from runrecord.history import Send
from suites.scenario import Finding, RunContext
from suites.workload import delivery


def controller_apart(kafka: str, mode: str, **spec: Any) -> ClusterSpec:
    """Three ZooKeeper-mode brokers: A (b1) and B (b2) hold the partitions and die on
    purpose, with sessions short enough that the controller notices quickly; C (b3) holds
    nothing, is the controller, and has a long session so that it never loses that role."""
    return ClusterSpec(
        kafka,
        mode,
        brokers=3,
        controller=3,
        broker_config={"zookeeper.session.timeout.ms": 6000},
        node_config={"b3": {"zookeeper.session.timeout.ms": 60000}},
        **spec,
    )


def write_batch(
    ctx: RunContext,
    topic: str,
    count: int,
    *,
    to: int,
    acks: str,
    partition: int = 0,
    timeout: float = 60.0,
    request_timeout: float | None = None,
) -> list[Send]:
    """Send exactly one batch of `count` records through broker `to` and return the sends,
    acknowledged or not. A fresh producer bootstrapped from that broker alone is a client
    whose metadata comes from it, as a client of a zombie leader's would. With
    `request_timeout` the broker answers within it (an acks=all write the ISR does not
    complete times out) and the batch is never sent twice."""
    tag = secrets.token_hex(4)  # distinct contents, hence distinct CRCs, per batch
    conf: dict[str, Any] = {
        **ctx.cluster.client_config(only=to),
        "acks": acks,
        "enable.idempotence": False,
        "max.in.flight.requests.per.connection": 1,
        "linger.ms": 2000,  # keep every record in one batch until flush()
        "batch.num.messages": max(count, 1),
        "message.timeout.ms": int(timeout * 1000),
    }
    if request_timeout is not None:
        # A retried request would append the batch a second time.
        conf.update({"request.timeout.ms": int(request_timeout * 1000), "retries": 0})
        conf["message.timeout.ms"] = int(request_timeout * 1000) + 5000
    producer = Producer(conf)
    sends: list[Send] = []
    for i in range(count):
        value = f"{topic}-{tag}-{i}"
        send = Send(topic, value, value, acks, time.time(), partition=partition, broker=to)
        sends.append(send)
        producer.produce(
            topic,
            value=value.encode(),
            key=value.encode(),
            partition=partition,
            on_delivery=delivery(ctx.history, send),
        )
    producer.flush(timeout)
    return sends


def produce_batch(
    ctx: RunContext,
    topic: str,
    count: int,
    *,
    to: int,
    acks: str,
    partition: int = 0,
    timeout: float = 60.0,
) -> list[Send]:
    """Write exactly one batch of `count` records through broker `to`, the leader as that
    broker sees it (`write_batch`); not reached unless it is acknowledged whole."""
    # The client asks `to` for metadata first; until `to` itself believes it leads, that
    # client would be sent elsewhere (to a zombie leader, say, which would accept it).
    cluster = ctx.cluster
    wait_until(
        lambda: cluster.partition_metadata(topic, partition, only=to).leader,
        lambda leader: leader == to,
        what=f"broker {to} to see itself as leader of {topic}-{partition}",
        timeout=30,
    )
    sends = write_batch(ctx, topic, count, to=to, acks=acks, partition=partition, timeout=timeout)
    failed = [s for s in sends if not s.ok]
    offsets = [s.offset for s in sends if s.ok]
    if failed or offsets != list(range(offsets[0], offsets[0] + count)):
        raise NotReached(
            f"a batch of {count} records (acks={acks}) acknowledged by broker {to}",
            f"{len(failed)} failed ({failed[0].error if failed else ''}), offsets {offsets}",
        )
    ctx.timeline.record(
        "note", "batch", topic=topic, broker=to, acks=acks, first=offsets[0], last=offsets[-1]
    )
    return sends


def await_leader(
    cluster: Cluster,
    topic: str,
    leader: int,
    *,
    what: str,
    min_epoch: int | None = None,
    timeout: float = 90.0,
) -> PartitionState:
    def ok(s: PartitionState) -> bool:
        return s.leader == leader and (min_epoch is None or (s.leader_epoch or 0) >= min_epoch)

    try:
        return wait_until(
            lambda: partition_state(cluster, topic), ok, what=what, timeout=timeout, describe=str
        )
    except WaitTimeout as exc:
        raise NotReached(what, str(exc.last)) from None


def await_isr(
    cluster: Cluster,
    topic: str,
    isr: tuple[int, ...],
    *,
    what: str,
    partition: int = 0,
    timeout: float = 90.0,
) -> PartitionState:
    try:
        return wait_until(
            lambda: partition_state(cluster, topic, partition),
            lambda s: s.isr == isr,
            what=what,
            timeout=timeout,
            describe=str,
        )
    except WaitTimeout as exc:
        raise NotReached(what, str(exc.last)) from None


def log_mark(node) -> int:
    """Where the node's log ends now; lines after it are what happens next."""
    return node.log_file.stat().st_size if node.log_file.is_file() else 0


def await_log_line(node, match, *, since: int, what: str, timeout: float = 60.0) -> str:
    """The first line the node logs after `since` that `match` accepts."""

    def lines() -> list[str]:
        with node.log_file.open("rb") as f:
            f.seek(since)
            return f.read().decode(errors="replace").splitlines()

    try:
        found = wait_until(
            lambda: [ln for ln in lines() if match(ln)],
            bool,
            what=what,
            timeout=timeout,
            describe=lambda ls: ls[-1:] if ls else "no line",
        )
    except WaitTimeout as exc:
        raise NotReached(what, str(exc.last)) from None
    return found[0]


# Log lines that mean a follower's replication of a partition stopped for good (until
# someone intervenes): the fetcher thread died (before 2.3) or marked the partition failed
# (KIP-461, 2.3+). The first is KAFKA-6361's n < 20 case. The last: a follower whose log
# ends past its leader's, where the topic forbids unclean elections, halts the broker
# before 2.0 rather than truncate (ReplicaFetcherThread.handleOffsetOutOfRange).
STUCK_MARKS = (
    "UnexpectedAppendOffsetException",
    "Error processing data for partition",
    "marked as failed",
    "Out of order offsets",
    "because log truncation is not allowed",
)


# Since KIP-461 a fetcher marks one partition failed instead of dying, and the partition's
# next leadership change starts it afresh: the broker leads it, or a fetcher is added for it.
# A follower fenced while the leader epoch moves on (FENCED_LEADER_EPOCH: "older epoch than
# the current leader") is marked failed that way until its next LeaderAndIsr state, so only
# a mark that nothing restarted since is a stuck follower. A dead fetcher thread (before
# 2.3) is stuck for good, whatever follows: partitions added to it are never fetched.
MARKED_FAILED = "marked as failed"
RESTARTED = re.compile(r"Added fetcher|^(?!.*Follower ).*starts at leader epoch", re.IGNORECASE)


def _names(topic: str) -> re.Pattern[str]:
    """A partition of `topic` named in a log line (`topic-3`; before 1.0 some lines name
    the topic alone: `for topic t,`), and not a topic whose name merely starts or ends the
    same way."""
    return re.compile(rf"(?<![\w.-]){re.escape(topic)}(?:-(\d+)\b|(?=[,\s]))")


def stuck_line(lines: Iterable[str], topic: str | None) -> tuple[int, str] | None:
    """(partition, line) of the first sign in `lines` that replication of a partition of
    `topic` (None: of any) stopped for good; partition -1: the line names no partition."""
    names = _names(topic) if topic is not None else None
    marked: dict[int, str] = {}
    for line in lines:
        found = list(names.finditer(line)) if names is not None else []
        if names is not None and not found:
            continue
        partitions = [int(m.group(1)) for m in found if m.group(1) is not None] or [-1]
        if any(mark in line for mark in STUCK_MARKS if mark != MARKED_FAILED):
            return partitions[0], line.strip()[:400]
        if MARKED_FAILED in line:
            marked.setdefault(partitions[0], line.strip()[:400])
        elif RESTARTED.search(line):
            for p in partitions if names is not None else list(marked):
                marked.pop(p, None)
    return next(iter(marked.items()), None)


def stuck_follower(
    cluster: Cluster, broker_id: int, topic: str | None, *, since: int = 0
) -> tuple[int, str] | None:
    """(partition, log line) of the first sign, in the broker's log from byte `since` on,
    that its replication of a partition of `topic` (None: of any) stopped for good."""
    log = cluster.broker(broker_id).log_file
    if not log.is_file():
        return None
    with log.open("rb") as f:
        f.seek(since)
        text = f.read().decode(errors="replace")
    return stuck_line(text.splitlines(), topic)


@dataclass
class Convergence:
    converged: bool
    seconds: float
    stuck: dict[int, str] = field(default_factory=dict)  # broker -> the log line
    isr: tuple[int, ...] = ()  # partition 0's
    log_end_offsets: dict[int, int] = field(default_factory=dict)  # partition 0's
    stuck_partitions: dict[int, int] = field(default_factory=dict)  # broker -> partition
    partitions: dict[int, dict[str, Any]] = field(default_factory=dict)  # isr, leos
    stalled: bool = False  # nothing changed for the stall time before convergence

    def to_dict(self) -> dict[str, Any]:
        return {
            "converged": self.converged,
            "stuck": self.stuck,
            "isr": list(self.isr),
            "log_end_offsets": self.log_end_offsets,
            "stuck_partitions": self.stuck_partitions,
            "partitions": self.partitions,
            "stalled": self.stalled,
            "seconds": round(self.seconds, 1),
        }


def converge(
    ctx: RunContext,
    topic: str,
    replicas: list[int],
    *,
    timeout: float = 90.0,
    partitions: tuple[int, ...] = (0,),
    since: dict[int, int] | None = None,
    stall: float | None = None,
    stop_on_stuck: bool = True,
) -> Convergence:
    """Give the cluster time to converge: every replica of each partition in its ISR with
    equal log end offsets. Returns early when a follower's replication has stopped for good
    (its log says so, from byte `since` of each broker's log on; `stop_on_stuck=False`:
    noted only, since from 2.3 a partition marked failed resumes with its next leader
    change, KIP-461), or when `stall` seconds passed with no ISR or log end offset
    changing."""
    ctx.timeline.phase("convergence")
    cluster = ctx.cluster
    started = time.monotonic()
    changed, last = started, None
    result = Convergence(False, 0.0)
    while time.monotonic() - started < timeout:
        for b in replicas:
            found = stuck_follower(cluster, b, topic, since=(since or {}).get(b, 0))
            if found is not None:
                result.stuck_partitions[b], result.stuck[b] = found
        for p in partitions:
            try:
                isr = partition_state(cluster, topic, p).isr
            except Exception:  # noqa: BLE001 - a controller failing over; look again
                isr = ()
            leos = {b: replica(cluster, b, topic, p).leo for b in replicas}
            result.partitions[p] = {"isr": list(isr), "leos": leos}
        first = result.partitions[partitions[0]]
        result.isr, result.log_end_offsets = tuple(first["isr"]), first["leos"]
        if all(
            sorted(v["isr"]) == sorted(replicas) and len(set(v["leos"].values())) == 1
            for v in result.partitions.values()
        ):
            result.converged = True
            break
        if result.stuck and stop_on_stuck:
            break
        now = time.monotonic()
        if result.partitions != last:
            changed, last = now, copy.deepcopy(result.partitions)
        elif stall is not None and now - changed >= stall:
            result.stalled = True
            break
        time.sleep(0.5)
    result.seconds = time.monotonic() - started
    ctx.timeline.record(
        "note",
        "convergence",
        converged=result.converged,
        stuck=result.stuck,
        isr=list(result.isr),
        leos=result.log_end_offsets,
        partitions=result.partitions,
        stalled=result.stalled,
    )
    return result


def _await_checkpointed_high_watermarks(
    ctx: RunContext, topic: str, replicas: list[int], timeout: float = 12.0
) -> None:
    """Brokers checkpoint their high watermarks every replica.high.watermark.checkpoint.
    interval.ms (5 s); give the leader's checkpoint time to reach its log end, so that the
    checker's "below the high watermark" speaks of the final state. Not a precondition:
    a stuck partition's high watermark may never get there."""
    try:
        leader = partition_state(ctx.cluster, topic).leader
    except Exception:  # noqa: BLE001 - no state, no leader to wait for
        return
    if leader not in replicas:
        return
    target = replica(ctx.cluster, leader, topic).leo
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (replica(ctx.cluster, leader, topic).high_watermark or 0) >= target:
            return
        time.sleep(0.5)


def predict(ctx: RunContext, topic: str, *, leader: int, follower: int) -> TruncationResult:
    """What the protocol model says the follower will do, from the logs as they are now."""
    protocol = ctx.release.protocol
    result = truncate_follower(
        replica(ctx.cluster, leader, topic), replica(ctx.cluster, follower, topic), protocol
    )
    ctx.timeline.record(
        "note",
        "model",
        protocol=protocol.value,
        follower=follower,
        leader=leader,
        outcome=result.outcome.value,
        lines=result.describe(),
    )
    return result


def judge(ctx: RunContext, topic: str, partition: int = 0) -> PartitionVerdict:
    """The checker's judgement of the topic's replicas on disk; audit.json keeps it."""
    ctx.timeline.phase("check")
    dirs = [d for node in ctx.cluster.brokers.values() for d in node.log_dirs]
    result = audit(dirs, topic=topic, protocol=ctx.release.protocol)
    ctx.run.write_audit(result.to_dict())
    for verdict in result.partitions:
        if (verdict.topic, verdict.partition) == (topic, partition):
            return verdict
    raise NotReached(
        f"the checker reading {topic}-{partition} on disk",
        f"no replica found; errors: {[str(e.error) for e in result.errors]}",
    )


def model_vs_brokers(
    prediction: TruncationResult, verdict: PartitionVerdict, convergence: Convergence
) -> dict[str, Any]:
    """Both sides recorded: what the model predicted and what the brokers did."""
    if convergence.stuck:
        actual = "stuck"
    else:
        actual = "diverged" if verdict.status == "diverged" else "consistent"
    return {
        "predicted": prediction.outcome.value,
        "predicted_truncation_offset": prediction.truncation_offset,
        "model": prediction.describe(),
        "actual": actual,
        "agree": prediction.outcome.value == actual,
    }


def conclude(
    ctx: RunContext,
    topic: str,
    *,
    leader: int,
    follower: int,
    prediction: TruncationResult | None,
    details: dict[str, Any],
    converged: str,
) -> Finding:
    """Let the cluster converge, have the checker judge the logs on disk, record what the
    model predicted beside what the brokers did, and say what it amounts to. `converged` is
    the sentence for the clean outcome."""
    convergence = converge(ctx, topic, [leader, follower], timeout=60)
    verdict = judge(ctx, topic)
    details = {**details, "convergence": convergence.to_dict(), "checker": verdict.to_dict()}
    predicted = ""
    if prediction is not None:
        comparison = model_vs_brokers(prediction, verdict, convergence)
        details["model_vs_brokers"] = comparison
        predicted = f"; model predicted {comparison['predicted']}"
    if convergence.stuck:
        line = convergence.stuck.get(follower) or next(iter(convergence.stuck.values()))
        return Finding(
            True,
            f"follower {follower} is stuck (log: {line}); replicas diverged "
            f"at {verdict.diverged_at}{predicted}",
            details,
        )
    if verdict.status == "diverged":
        committed = "below" if verdict.below_high_watermark else "above"
        return Finding(
            True,
            f"replicas diverged at offset {verdict.diverged_at} ({committed} "
            f"the high watermark){predicted}",
            details,
        )
    if not convergence.converged:
        raise NotReached(
            f"broker {follower} converging with broker {leader}",
            f"isr {list(convergence.isr)}, log ends {convergence.log_end_offsets}",
        )
    return Finding(False, f"{converged}{predicted}", details)
