"""Building blocks the KIP scenarios share: exact batches, checks of intermediate states,
convergence, the model's prediction and the checker's judgement.

Every step that creates a state also proves it, reading the replicas' segments from disk;
a step that finds anything else raises NotReached naming what it expected and observed.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, Producer

from basics.errors import NotReached
from basics.protocol import Protocol
from checkers.audit import AuditResult
from checkers.audit.plan import plan_audit
from checkers.checkpoints import REPLICATION_OFFSET_CHECKPOINT, read_offset_checkpoint
from checkers.errors import LogReadError
from checkers.history import DURABLE_ACKS, HistoryCheck, ReadLog, check_history
from checkers.model import TruncationResult, truncate_follower
from checkers.transactions import DEFAULT_TXN_TIMEOUT_MS
from checkers.verdict import PartitionVerdict
from fixtures.cluster import Cluster, ClusterSpec
from fixtures.waiting import NOT_YET, WaitTimeout, wait_until
from observe.replicas import replica
from observe.state import PartitionState, partition_state, wait_state
from reports.engine_local import judge as judge_source
from reports.sources import own_source
from runrecord.events import deleted_below
from runrecord.history import Send
from runrecord.outcome import (
    CONSISTENT,
    DIVERGED,
    DUPLICATE_SEQUENCE,
    HANGING,
    LOST,
    STUCK,
    TORN_TRANSACTION,
    Symptom,
)
from suites.convergence import Convergence, converge
from suites.scenario import Finding, RunContext
from suites.workload import delivery, read_partition


def controller_apart(
    kafka: str,
    mode: str,
    *,
    brokers: int = 3,
    broker_config: dict[str, Any] | None = None,
    node_config: dict[str, dict[str, Any]] | None = None,
    **spec: Any,
) -> ClusterSpec:
    """ZooKeeper-mode brokers: the first ones hold the partitions and die on purpose, with
    sessions short enough that the controller notices quickly; the last one (b3 of three)
    holds nothing, is the controller, and has a long session so that it never loses that
    role. `broker_config` adds settings for every broker, `node_config` for one."""
    nodes = {f"b{brokers}": {"zookeeper.session.timeout.ms": 60000}}
    for name, config in (node_config or {}).items():
        nodes[name] = {**nodes.get(name, {}), **config}
    return ClusterSpec(
        kafka,
        mode,
        brokers=brokers,
        controller=brokers,
        broker_config={"zookeeper.session.timeout.ms": 6000, **(broker_config or {})},
        node_config=nodes,
        **spec,
    )


def checkpointed_hw(cluster: Cluster, broker_id: int, topic: str) -> int | None:
    """The broker's high watermark of partition 0 as its replication-offset-checkpoint
    (written every replica.high.watermark.checkpoint.interval.ms, 5 s) has it."""
    path = cluster.broker(broker_id).data_dir / REPLICATION_OFFSET_CHECKPOINT
    try:
        return read_offset_checkpoint(path).get((topic, 0))
    except (OSError, LogReadError):  # mid-rewrite or absent: no value yet
        return None


def await_checkpointed_hw(cluster: Cluster, broker_id: int, topic: str, at_least: int) -> None:
    try:
        wait_until(
            lambda: checkpointed_hw(cluster, broker_id, topic) or 0,
            lambda hw: hw >= at_least,
            timeout=30,
            what=f"broker {broker_id}'s checkpointed high watermark of {topic} >= {at_least}",
        )
    except WaitTimeout as exc:
        raise NotReached(exc.what, f"{exc.last}") from None


def next_checkpointed_hw(cluster: Cluster, broker_id: int, topic: str) -> int | None:
    """The high watermark the broker's next checkpoint write records: what it holds now,
    not what it held up to 5 s ago."""
    path = cluster.broker(broker_id).data_dir / REPLICATION_OFFSET_CHECKPOINT
    mtime = path.stat().st_mtime_ns if path.exists() else 0
    wait_until(
        lambda: path.stat().st_mtime_ns,
        lambda t: t != mtime,
        what=f"broker {broker_id}'s next high watermark checkpoint",
        timeout=30,
    )
    return checkpointed_hw(cluster, broker_id, topic)


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
    pad: int = 0,
) -> list[Send]:
    """Send exactly one batch of `count` records through broker `to` and return the sends,
    acknowledged or not. A fresh producer bootstrapped from that broker alone is a client
    whose metadata comes from it, as a client of a zombie leader's would. With
    `request_timeout` the broker answers within it (an acks=all write the ISR does not
    complete times out); without, the one request is waited for as long as the batch may
    take (an acks=all write can wait for the ISR to shrink first). Either way no timeout
    resends it: without idempotence a resent request appends the batch a second time. (The
    client was seen to resend after NOT_LEADER_FOR_PARTITION even so: a leader deposed
    while its acks=all write waited had appended it once already, on 1.1.1; `check_landed`
    finds the second copy.) `pad` makes each
    value that many bytes longer (a batch a packet filter can tell apart)."""
    tag = secrets.token_hex(4)  # distinct contents, hence distinct CRCs, per batch
    wait_ms = int((request_timeout if request_timeout is not None else timeout) * 1000)
    conf: dict[str, Any] = {
        **ctx.cluster.client_config(only=to),
        "acks": acks,
        "enable.idempotence": False,
        "max.in.flight.requests.per.connection": 1,
        "linger.ms": 2000,  # keep every record in one batch until flush()
        "batch.num.messages": max(count, 1),
        "message.timeout.ms": int(timeout * 1000),
        "request.timeout.ms": wait_ms,
    }
    if request_timeout is None:
        conf["socket.timeout.ms"] = wait_ms
    else:
        conf.update({"retries": 0, "message.timeout.ms": wait_ms + 5000})
    producer = Producer(conf)
    # The partition's leader known before anything is queued: records queued earlier wait
    # unassigned and are moved to the partition one at a time when the metadata arrives,
    # and with flush() already under way the broker thread can send the first one alone
    # (librdkafka's rd_kafka_topic_assign_uas): one write split into two batches, seen
    # once in CI under load. A broker that does not answer here fails the sends below.
    with contextlib.suppress(KafkaException):
        producer.list_topics(topic, timeout=min(timeout, 10.0))
    sends: list[Send] = []
    for i in range(count):
        value = f"{topic}-{tag}-{i}" + "." * pad
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


def check_landed(cluster: Cluster, to: int, sends: list[Send]) -> None:
    """An acknowledged batch is on broker `to`'s disk, at the offsets the client was told,
    in entries written no earlier than it was sent; otherwise another broker took it (a
    zombie leader whose stale metadata a client followed) and the step did not happen."""
    acked = [s for s in sends if s.ok]
    if not acked:
        return
    first, last = min(s.offset for s in acked), max(s.offset for s in acked)
    topic, partition = acked[0].topic, acked[0].partition
    sent_ms = int(min(s.sent for s in acked) * 1000) - 1
    batches = replica(cluster, to, topic, partition).batches
    held = [b for b in batches if b.last_offset >= first and b.base_offset <= last]
    covered = sum(b.last_offset - b.base_offset + 1 for b in held)
    fresh = all(b.magic == 0 or b.max_timestamp >= sent_ms for b in held)
    if covered != last - first + 1 or not fresh or held[0].base_offset != first:
        raise NotReached(
            f"the batch acknowledged at offsets {first}-{last} on broker {to}'s disk",
            f"broker {to} holds there: " + (" ".join(b.span for b in held) or "nothing"),
        )
    if len(held) > 1 and held[0].magic >= 2:  # before v2, each uncompressed record stands alone
        raise NotReached(
            f"the records acknowledged at offsets {first}-{last} written as one batch",
            "the client sent them as " + " ".join(b.span for b in held),
        )
    # A v2 batch's CRC leaves out its base offset and leader epoch: the same batch sent
    # again has the same one. librdkafka re-sends after NOT_LEADER_FOR_PARTITION even with
    # retries=0, and a leader deposed while an acks=all write waited has appended it once
    # already (Kafka 1.1, Partition.checkEnoughReplicasReachOffset): written twice, once.
    sent = {b.crc for b in held if b.magic >= 2}
    again = [b for b in batches if b.crc in sent and not first <= b.base_offset <= last]
    if again:
        raise NotReached(
            f"the batch acknowledged at offsets {first}-{last} written once",
            f"broker {to} holds it also at " + " ".join(b.span for b in again),
        )


def produce_batch(
    ctx: RunContext,
    topic: str,
    count: int,
    *,
    to: int,
    acks: str,
    partition: int = 0,
    timeout: float = 60.0,
    pad: int = 0,
) -> list[Send]:
    """Write exactly one batch of `count` records through broker `to`, the leader as that
    broker sees it (`write_batch`); not reached unless it is acknowledged whole."""
    # The client asks `to` for metadata first; until `to` itself believes it leads, that
    # client would be sent elsewhere (to a zombie leader, say, which would accept it).
    cluster = ctx.cluster
    wait_until(
        lambda: cluster.leader_seen_by(to, topic, partition),
        lambda leader: leader == to,
        what=f"broker {to} to see itself as leader of {topic}-{partition}",
        timeout=30,
    )
    sends = write_batch(
        ctx, topic, count, to=to, acks=acks, partition=partition, timeout=timeout, pad=pad
    )
    failed = [s for s in sends if not s.ok]
    offsets = [s.offset for s in sends if s.ok]
    if failed or offsets != list(range(offsets[0], offsets[0] + count)):
        raise NotReached(
            f"a batch of {count} records (acks={acks}) acknowledged by broker {to}",
            f"{len(failed)} failed ({failed[0].error if failed else ''}), offsets {offsets}",
        )
    check_landed(ctx.cluster, to, sends)
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


def await_election(
    cluster: Cluster, topic: str, leader: int | None, *, what: str, timeout: float = 90.0
) -> PartitionState:
    """Once the leader is gone: `leader` elected, or (None) the partition left without
    one, since no replica may be elected."""
    if leader is not None:
        return await_leader(cluster, topic, leader, what=what, timeout=timeout)
    return wait_state(cluster, topic, lambda s: s.leader == -1, what=what, timeout=timeout)


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


def _await_checkpointed_high_watermarks(
    ctx: RunContext, topic: str, replicas: list[int], timeout: float = 12.0
) -> None:
    """Brokers checkpoint their high watermarks every replica.high.watermark.checkpoint.
    interval.ms (5 s); give the leader's checkpoint time to reach its log end, so that the
    checker's "below the high watermark" speaks of the final state. Not a precondition:
    a stuck partition's high watermark may never get there."""
    try:
        leader = partition_state(ctx.cluster, topic).leader
    except NOT_YET:  # no state, no leader to wait for
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


def judge(
    ctx: RunContext,
    topic: str,
    partition: int = 0,
    *,
    txn_timeout_ms: int = DEFAULT_TXN_TIMEOUT_MS,
) -> PartitionVerdict:
    """The checker's judgement of the topic's replicas on disk; audit.json keeps it.
    `txn_timeout_ms`: the longest transaction timeout the run's producers use."""
    return judge_partitions(ctx, topic, [partition], txn_timeout_ms=txn_timeout_ms)[0]


def judge_partitions(
    ctx: RunContext,
    topic: str,
    partitions: list[int],
    *,
    txn_timeout_ms: int = DEFAULT_TXN_TIMEOUT_MS,
) -> list[PartitionVerdict]:
    """`judge` for several partitions of the topic, from one audit of its log dirs."""
    ctx.timeline.phase("check")
    dirs = [d for node in ctx.cluster.brokers.values() for d in node.log_dirs]
    return judged(
        audit_dirs(ctx, dirs, topic=topic, txn_timeout_ms=txn_timeout_ms), topic, partitions
    )


def audit_dirs(
    ctx: RunContext,
    dirs: Sequence[Path],
    *,
    topic: str | None = None,
    protocol: Protocol | None = None,
    txn_timeout_ms: int = DEFAULT_TXN_TIMEOUT_MS,
) -> AuditResult:
    """The run's judgement of the log dirs (of `topic` alone, when named; by the release's
    protocol unless told another), kept in audit.json and, with each partition's report
    row, in `ctx.judged`: the run's report renders that judgement, not one of its own."""
    plan = plan_audit(dirs, topic, (), txn_timeout_ms, None)
    source = own_source(ctx.run.path, plan, protocol or ctx.release.protocol)
    ctx.judged = judge_source(source)
    ctx.run.write_audit(ctx.judged.audit.to_dict())
    return ctx.judged.audit


def judged(result: AuditResult, topic: str, partitions: list[int]) -> list[PartitionVerdict]:
    """The audit's verdicts for the partitions, or not reached: a partition with no
    replica on disk, or an input the audit could not read (it may hide any partition's
    data, as explore's judge holds too), named with its file and byte."""
    found = {v.partition: v for v in result.partitions if v.topic == topic}
    errors = [str(e.error) for e in result.errors]
    missing = [p for p in partitions if p not in found]
    if missing:
        raise NotReached(
            f"the checker reading {topic}-{missing[0]} on disk",
            f"no replica found; errors: {errors}",
        )
    if errors:
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        raise NotReached(
            f"the checker reading every log dir holding {topic}",
            f"unreadable input: {'; '.join(errors[:3])}{more}",
        )
    return [found[p] for p in partitions]


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


def require_settled(convergence: Convergence, what: str, *, stuck_ok: bool = True) -> None:
    """The replicas converged, or a follower stopped for good (`stuck_ok`): what a verdict
    on them needs. An unconverged follower's log is a prefix of its leader's for no reason
    but its lag: judged so, the partition would pass as consistent."""
    if convergence.converged or (stuck_ok and convergence.stuck):
        return
    stuck = f", stuck {convergence.stuck}" if convergence.stuck else ""
    raise NotReached(
        what, f"isr {list(convergence.isr)}, log ends {convergence.log_end_offsets}{stuck}"
    )


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
    predicted, said = None, ""
    if prediction is not None:
        comparison = model_vs_brokers(prediction, verdict, convergence)
        details["model_vs_brokers"] = comparison
        predicted = comparison["predicted"]
        said = f"; model predicted {predicted}"
    if convergence.stuck:
        line = convergence.stuck.get(follower) or next(iter(convergence.stuck.values()))
        return Finding(
            Symptom(STUCK, replicas=sorted(convergence.stuck)),
            f"follower {follower} is stuck (log: {line}); replicas diverged "
            f"at {verdict.diverged_at}{said}",
            details,
            predicted,
        )
    if verdict.status == "diverged":
        observed = divergence(verdict)
        return Finding(observed, f"replicas {observed.describe()}{said}", details, predicted)
    require_settled(convergence, f"broker {follower} converging with broker {leader}")
    return Finding(Symptom(CONSISTENT), f"{converged}{said}", details, predicted)


def divergence(verdict: PartitionVerdict) -> Symptom:
    """The audit's divergence as a symptom."""
    return Symptom(DIVERGED, verdict.diverged_at, below_high_watermark=verdict.below_high_watermark)


def disk_symptom(verdict: PartitionVerdict) -> Symptom | None:
    """What the disk audit found in a partition, as a symptom: its divergence, else its
    first transaction finding (a hanging or torn transaction, a duplicated sequence); None
    when it found nothing."""
    if verdict.status == "diverged":
        return divergence(verdict)
    found = verdict.transactions
    if found.hanging:
        first = found.hanging[0]
        return Symptom(HANGING, first.first_offset, replicas=list(first.brokers))
    if found.torn:
        return Symptom(TORN_TRANSACTION, found.torn[0].first_offset)
    if found.duplicates:
        first_copy = found.duplicates[0]
        return Symptom(DUPLICATE_SEQUENCE, first_copy.first_offset, replicas=[first_copy.broker])
    return None


def loss_symptom(history: HistoryCheck, verdict: PartitionVerdict | None) -> Symptom:
    """What a loss scenario's brokers showed: the first acknowledged acks=all write lost,
    else the disk audit's divergence, else consistency."""
    durable = [w.offset for w in history.lost if w.acks in DURABLE_ACKS]
    if history.durable_lost:
        return Symptom(LOST, min(durable) if durable else None)
    if verdict is not None and verdict.status == "diverged":
        return divergence(verdict)
    return Symptom(CONSISTENT)


def check_acknowledged(
    ctx: RunContext,
    topic: str,
    sends: list[Send],
    final: ReadLog | None = None,
    *,
    partition: int = 0,
    order: bool = True,
) -> HistoryCheck:
    """The history check of a partition's acknowledged `sends` against its `final` log (by
    default read back from its leader now), below the offsets the run's DeleteRecords
    removed. A write the check cannot see (in a batch that does not decode) leaves the run
    not reached: whether it survived is unknown."""
    final = final or read_partition(ctx.cluster, topic, partition)
    deleted = deleted_below(ctx.timeline.events).get((topic, partition), 0)
    check = check_history(sends, final, order=order, deleted_below=deleted)
    if check.unjudged:
        raise NotReached(f"the history check of {topic}-{partition} seeing every write",
                         check.unjudged)  # fmt: skip
    return check


def offset_ranges(offsets: list[int]) -> str:
    """ "5-9, 12" for [5, 6, 7, 8, 9, 12]."""
    spans: list[list[int]] = []
    for offset in sorted(offsets):
        if spans and offset == spans[-1][1] + 1:
            spans[-1][1] = offset
        else:
            spans.append([offset, offset])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def judge_loss(
    ctx: RunContext,
    topic: str,
    sends: list[Send],
    replicas: list[int],
    *,
    timeout: float = 90,
    since: dict[int, int] | None = None,
    txn_timeout_ms: int = DEFAULT_TXN_TIMEOUT_MS,
) -> tuple[Symptom, str, dict[str, Any]]:
    """Both verdicts of a loss scenario, once the replicas converged: the history checker's
    (were acknowledged writes lost, against the producer's acknowledgements) and the disk
    audit's (do the replicas hold the same batches). Returns (what the brokers showed, the
    two verdicts in a sentence, details). `since`: as for converge(); `txn_timeout_ms`: as
    for judge()."""
    convergence = converge(ctx, topic, replicas, timeout=timeout, since=since)
    require_settled(convergence, f"replicas {replicas} converging after the faults", stuck_ok=False)
    verdict = judge(ctx, topic, txn_timeout_ms=txn_timeout_ms)
    history = check_acknowledged(ctx, topic, sends)
    by_acks = {
        acks: offset_ranges([w.offset for w in history.lost if w.acks == acks])
        for acks in sorted({w.acks for w in history.lost})
    }
    lost = "; ".join(f"acks={acks}: offsets {spans}" for acks, spans in by_acks.items())
    loss = f"{history.line()} ({lost})" if history.lost_count else history.line()
    audit_line = (
        f"disk audit: replicas diverged at offset {verdict.diverged_at}"
        if verdict.status == "diverged"
        else f"disk audit: replicas {sorted(verdict.replicas)} consistent"
    )
    details = {
        "history": history.to_dict(),
        "checker": verdict.to_dict(),
        "convergence": convergence.to_dict(),
        "lost_offsets": by_acks,
    }
    return loss_symptom(history, verdict), f"history: {loss}; {audit_line}", details
