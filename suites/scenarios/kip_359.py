"""kip-359-zombie-leader: what a deposed leader still acknowledges, because produce requests
carry no leader epoch (KIP-359 was never implemented).

Leader L (b1) and follower F (b2) hold the partition. Clients can reach only L (the other
brokers' client listeners are cut), as clients with stale metadata would. L is cut off from
ZooKeeper (or from the KRaft controllers) until the controller elects F, while two
producers keep writing to L, one with acks=1 and one with acks=all. Then everything heals
and L, now F's follower, truncates what it accepted after it was deposed.

Measured: acks=1 writes the zombie acknowledged that were later truncated (count, offsets,
window), whether any acks=all write acknowledged anywhere was lost (that fails the
scenario), and whether any produce to the stale leader was ever fenced.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka import Producer

from faults import network, session
from fixtures.cluster import ClusterSpec
from fixtures.waiting import wait_until
from observe.state import PartitionState, partition_state
from runrecord.history import Send
from runrecord.outcome import CONSISTENT, STUCK, VIOLATED, Symptom
from suites import steps
from suites.convergence import Convergence, converge
from suites.scenario import Finding, RunContext, Scenario, Topic
from suites.workload import delivery, read_partition

TOPIC = "kip359"
L, F = 1, 2
AFTER_ELECTION = 20  # acks=1 writes the zombie must acknowledge after F is elected
FENCING_ERRORS = ("NOT_LEADER", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH")


def spec(kafka: str, mode: str) -> ClusterSpec:
    return steps.controller_apart(kafka, mode) if mode == "zk" else ClusterSpec(kafka, mode)


class Writer(threading.Thread):
    """Writes one record every `interval` through broker L until stopped."""

    def __init__(self, ctx: RunContext, acks: str, interval: float = 0.05) -> None:
        super().__init__(daemon=True, name=f"writer-acks-{acks}")
        self.ctx, self.acks, self.interval = ctx, acks, interval
        self.stop_event = threading.Event()
        self.producer = Producer(
            {
                **ctx.cluster.client_config(only=L),
                "acks": acks,
                "enable.idempotence": False,
                "linger.ms": 0,
                "message.timeout.ms": 10000,
                "request.timeout.ms": 5000,
            }
        )

    def run(self) -> None:
        i = 0
        while not self.stop_event.is_set():
            value = f"acks{self.acks}-{i}"
            send = Send(TOPIC, value, value, self.acks, time.time(), partition=0, broker=L)
            self.producer.produce(
                TOPIC,
                value=value.encode(),
                key=value.encode(),
                partition=0,
                on_delivery=delivery(self.ctx.history, send),
            )
            self.producer.poll(0)
            self.stop_event.wait(self.interval)  # pacing: a steady rate of writes
            i += 1

    def finish(self) -> None:
        self.stop_event.set()
        self.join(timeout=10)
        self.producer.flush(30)


def body(ctx: RunContext) -> Finding:
    cluster, timeline = ctx.cluster, ctx.timeline
    others = [n for i, n in cluster.brokers.items() if i != L]
    client_cuts = [network.cut_clients(cluster, n) for n in others]
    writers = [Writer(ctx, "1"), Writer(ctx, "all")]
    try:
        for w in writers:
            w.start()
        steps.await_isr(cluster, TOPIC, (L, F), what="L and F in sync while writes flow")
        before = partition_state(cluster, TOPIC)
        expiry = session.expire_session(cluster, cluster.broker(L))
        elected_at = time.time()
        new = partition_state(cluster, TOPIC)
        timeline.record("note", "zombie-window-open", leader=new.leader, epoch=new.leader_epoch)
        # The zombie window: writes keep flowing to L until it has acknowledged a number of
        # them after F's election (it answers, unaware it was deposed).
        wait_until(
            lambda: sum(
                1
                for s in list(ctx.history.sends)
                if s.acks == "1" and s.ok and (s.acked or 0) >= elected_at
            ),
            lambda n: n >= AFTER_ELECTION,
            timeout=60,
            what=f"the zombie to acknowledge {AFTER_ELECTION} acks=1 writes after F's election",
        )
        window_closed = time.time()
        for w in writers:
            w.finish()
        timeline.record("note", "writers-stopped")
        expiry.heal()
    finally:
        for w in writers:
            if w.is_alive():
                w.finish()
        for cut in client_cuts:
            cut.heal()
    convergence = converge(ctx, TOPIC, [L, F], timeout=90)
    steps.require_settled(convergence, f"L (b{L}) converging with F (b{F}) after the heal")
    verdict = steps.judge(ctx, TOPIC)
    final = read_partition(cluster, TOPIC)
    return _measure(
        ctx, before.leader_epoch, new, (elected_at, window_closed), final, verdict, convergence
    )


def _measure(
    ctx: RunContext,
    old_epoch: int | None,
    new: PartitionState,
    window: tuple[float, float],
    final: Any,
    verdict: Any,
    convergence: Convergence,
) -> Finding:
    elected_at, closed_at = window
    sends = ctx.history.sends
    acks1 = steps.check_acknowledged(ctx, TOPIC, ctx.history.acknowledged("1"), final, order=False)
    acks_all = steps.check_acknowledged(ctx, TOPIC, ctx.history.acknowledged("all"), final)
    truncated = acks1.lost  # the zombie's writes that F's log replaced (the first 100)
    fenced = [
        s
        for s in sends
        if s.error and any(e in s.error for e in FENCING_ERRORS) and s.sent <= closed_at
    ]
    stamps = [w.acked or 0.0 for w in truncated]
    span = max(stamps) - min(stamps) if len(stamps) > 1 else 0.0
    after_election = [w for w in truncated if (w.acked or 0) >= elected_at]
    details = {
        "old_epoch": old_epoch,
        "new_leader": new.leader,
        "new_epoch": new.leader_epoch,
        "acks1_acknowledged": acks1.acked,
        "acks1_truncated": acks1.lost_count,
        "acks1_truncated_offsets": [truncated[0].offset, truncated[-1].offset]
        if truncated
        else None,
        "acks1_truncated_after_election": len(after_election),
        "acks1_loss_window_seconds": round(span, 3),
        "acksall": acks_all.to_dict(),
        "acksall_failed": len([s for s in sends if s.acks == "all" and not s.ok]),
        "stale_produce_fenced": len(fenced),
        "convergence": {"converged": convergence.converged, "isr": list(convergence.isr)},
        "checker": verdict.to_dict(),
    }
    fence = (
        f"{len(fenced)} stale produce(s) fenced"
        if fenced
        else "no produce to the stale leader was ever fenced (KIP-359 not implemented)"
    )
    cost = (
        f"{acks1.lost_count} acks=1 write(s) acknowledged by the zombie were truncated "
        f"(offsets {truncated[0].offset}-{truncated[-1].offset}, over {span:.1f}s)"
        if truncated
        else "no acks=1 write was truncated"
    )
    if not acks_all.clean:
        observed = steps.loss_symptom(acks_all, None)
        if observed.kind == CONSISTENT:  # duplicated or reordered, none lost
            observed = Symptom(VIOLATED)
        return Finding(observed, f"acks=all: {acks_all.line()}; {cost}; {fence}", details)
    if convergence.stuck:
        line = next(iter(convergence.stuck.values()))
        observed = Symptom(STUCK, replicas=sorted(convergence.stuck))
        return Finding(observed, f"a follower is stuck (log: {line}); {cost}", details)
    if verdict.status == "diverged":
        observed = steps.divergence(verdict)
        return Finding(observed, f"replicas {observed.describe()}; {cost}", details)
    return Finding(
        Symptom(CONSISTENT),
        f"no acknowledged acks=all write lost ({acks_all.acked} acknowledged); {cost}; {fence}",
        details,
    )


SCENARIO = Scenario(
    id="kip-359-zombie-leader",
    title="KIP-359 (never implemented): a deposed leader keeps acknowledging acks=1 writes",
    body=body,
    cluster=spec,
    topic=Topic.fixed(TOPIC, [L, F], **{"min.insync.replicas": 1}),
    kip="KIP-359",
)
