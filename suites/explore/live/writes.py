"""The `produce` step on real brokers: one batch through the broker the step names, after
the filler it may ask for.

A follower behind a slow link gets each fetch response late, and the leader reads the
response's log slices from its file as the link drains (FileRecords.writeTo). A large
record of another partition ahead of the schedule's partition in the same response holds
that partition's bytes back until the filler has gone out: what the follower then receives
is the leader's log as it stands by then, after a truncation perhaps (KAFKA-18723).

The filler goes to a topic of its own, on the schedule's replicas, which nothing else
writes. A leader's fetch session moves the partitions it returned records for to the end
of its order (KIP-227, FetchSession's IncrementalFetchContext), so an idle partition drifts
to the front: the filler's record comes first in the response that carries both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException, Producer

from basics.errors import NotReached
from fixtures.cluster import Cluster
from runrecord import schedule_roles as roles
from runrecord.schedule import Schedule
from runrecord.schedule_roles import Rejected, Skip, Unserved
from runrecord.steps.base import Role
from runrecord.steps.writes import Produce
from suites.explore.live.registry import action
from suites.steps import check_landed, write_batch

if TYPE_CHECKING:
    from suites.explore.live.context import Live

# An acks=all write the ISR does not complete is answered with a timeout after
# Produce.REQUEST_TIMEOUT (the model lets that time pass too); a write is not retried by a
# timeout, so one step is one batch (a re-send after NOT_LEADER_FOR_PARTITION makes the step
# not reached: check_landed).
REQUEST_TIMEOUT = Produce.REQUEST_TIMEOUT
NOT_ENOUGH_REPLICAS = "Not enough in-sync replicas"  # librdkafka's text of error 19


@action(Produce)
def produce(live: Live, step: Produce) -> tuple[dict[str, Any], float]:
    """Write the batch (and the filler first); skipped where no broker fits, rejected where
    the leader refuses it for want of in-sync replicas."""
    view = live.view()
    if step.to == Role.LEADER and view.leader is None:
        raise Skip("the partition has no leader (offline)")

    def ok(b: Any) -> str | None:
        if b not in live.assignment:
            return f"broker {b} holds no replica"
        if not live.alive(b):
            return live.describe(b)
        seen = live.own_leader(b)
        if seen != b:
            return f"broker {b} does not know it leads (its metadata says leader {seen})"
        return None

    b = roles.pick(step.to, view, ok, "produce to")
    filler: dict[str, Any] = {}
    if step.filler:  # first, so that a fetch response carries it ahead of the batch
        filler = write_filler(live.cluster, live.topic, step.filler, b)
    sends = write_batch(
        live.ctx,
        live.topic,
        step.count,
        to=b,
        acks=step.acks,
        request_timeout=REQUEST_TIMEOUT,
    )
    errors = sorted({s.error for s in sends if s.error})
    offsets = [s.offset for s in sends if s.ok]
    if any(NOT_ENOUGH_REPLICAS in e for e in errors):
        raise Rejected(f"broker {b} refused the write: {errors[0]}; nothing written")
    acknowledged = not errors and len(offsets) == step.count
    check_landed(live.cluster, b, sends)
    live.ctx.timeline.record(
        "note",
        "batch",
        topic=live.topic,
        broker=b,
        acks=step.acks,
        first=offsets[0] if offsets else None,
        last=offsets[-1] if offsets else None,
        acknowledged=acknowledged,
        errors=errors,
    )
    if filler and filler["filler_leader"] != b:
        # The model puts the filler on the batch's leader (checkers.simulate.slow_links).
        live.history.unknown.append(
            f"the filler of the write to broker {b} went to broker {filler['filler_leader']}"
        )
    waits = REQUEST_TIMEOUT if step.acks == "all" and not acknowledged else 0.0
    return {"to": b, "acknowledged": acknowledged, "errors": errors, **filler}, waits


FILLER_TIMEOUT = 30.0  # seconds for the filler's acks=1 write


def filler_topic(topic: str) -> str:
    return f"{topic}-filler"


def needs_filler(schedule: Schedule) -> bool:
    return any(isinstance(s, Produce) and s.filler for s in schedule.steps)


def create_filler_topic(cluster: Cluster, schedule: Schedule, topic: str) -> None:
    """The filler topic, one partition on the schedule's replicas, where a step writes one."""
    if needs_filler(schedule):
        cluster.create_topic(filler_topic(topic), [list(schedule.cluster.replicas)])


def write_filler(cluster: Cluster, topic: str, kbytes: int, to: int) -> dict[str, Any]:
    """One record of `kbytes` KB, acks=1, through broker `to` (the batch's): a producer
    bootstrapped from it alone writes where its metadata says the filler topic's leader is,
    itself where it is a zombie leader, as for the batch (suites.steps.write_batch). It pads
    fetch responses and holds no data anyone judges, so it is in no history; not reached
    unless it is acknowledged. Unserved where the filler topic has no leader: its
    partition's fate (a power loss took its only ISR member, say) is not the model's."""
    where = cluster.leader_seen_by(to, filler_topic(topic))
    if where is None or where < 0:
        raise Unserved(f"the filler's topic has no leader (broker {to}'s metadata)")
    conf = {**cluster.client_config(only=to), "acks": "1", "linger.ms": 0}
    producer = Producer(conf)
    landed: list[Any] = []
    producer.produce(
        filler_topic(topic),
        value=b"f" * (kbytes * 1000),
        partition=0,
        on_delivery=lambda err, msg: landed.append(err or msg.offset()),
    )
    try:
        left = producer.flush(FILLER_TIMEOUT)
    except KafkaException as exc:
        landed.append(exc)
    if left or not landed or not isinstance(landed[0], int):
        seen = landed[0] if landed else "no answer"
        raise NotReached(f"a {kbytes} KB filler written", f"{seen}")
    # The filler holds a response back only where the batch's leader took it too; its
    # topic's leadership moves on its own, so the step says where it went.
    leader = cluster.leader_seen_by(to, filler_topic(topic))
    return {"filler_kb": kbytes, "filler_offset": landed[0], "filler_leader": leader}
