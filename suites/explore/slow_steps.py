"""A schedule's slow links (the `slow` step) and the filler a `produce` step may write first.

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

from faults.slow_link import SlowLink, slow
from fixtures.cluster import Cluster
from fixtures.errors import NotReached
from runrecord import schedule_roles as roles
from runrecord.schedule import Schedule
from runrecord.schedule_roles import Unserved
from runrecord.steps.links import Slow
from runrecord.steps.writes import Produce

if TYPE_CHECKING:
    from suites.explore.actions import Live

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


def slow_link(live: Live, step: Slow) -> tuple[int, int, SlowLink]:
    """Shape what `a` sends `b`; a pair already slowed, or not both running, is passed by
    (runrecord.schedule_roles.pick_pair, the rule the model follows)."""

    def ok(a: Any, b: Any) -> bool:
        slowed = any(x.kind == "slow" and (x.a, x.b) == (a, b) for x in live.links)
        return live.alive(a) and live.alive(b) and not slowed

    a, b = roles.pick_pair(step.a, step.b, live.view(), ok, roles.SLOWABLE)
    return a, b, slow(live.cluster, live.node(a), live.node(b), step.rate)
