"""The links between nodes on real brokers: a follower held back from its leader, a
broker's AlterPartition requests held, a cut, a slow link, a session expired by a cut from
the quorum, and heals (faults.network, faults.replication, faults.session,
faults.slow_link). A heal of every cut heals the slow links first, so that what they held
back arrives before any cut heals, as the model has it (checkers.simulate.slow_links)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from faults import network, replication, session
from faults.slow_link import SlowLink, slow
from runrecord import schedule_roles as roles
from runrecord.schedule_roles import Skip
from runrecord.steps.base import QUORUM
from runrecord.steps.links import Cut, ExpireSession, Heal, HoldAlterPartition, HoldBack, Slow
from suites.explore.live.context import Link
from suites.explore.live.registry import action
from suites.explore.live.txn import release_held_end

if TYPE_CHECKING:
    from suites.explore.live.context import Live


@action(HoldBack)
def hold_back(live: Live, step: HoldBack) -> tuple[dict[str, Any], float]:
    view = live.view()
    leader = view.leader
    if leader is None or not live.alive(leader):
        raise Skip("no live leader to hold a follower back from")

    def ok(b: Any) -> str | None:
        if b not in view.isr or b == leader:
            return f"broker {b} is not a follower in the ISR {list(view.isr)}"
        if not live.alive(b):
            return live.describe(b)
        if not live.linked(b, leader):
            return f"broker {b} is already cut from leader {leader}"
        return None

    b = roles.pick(step.target, view, ok, "hold back")
    held = replication.hold_back(
        live.cluster, live.topic, live.node(b), live.node(leader), mirror=True
    )
    live.links.append(Link(b, leader, "hold-back", held.cut))
    return {"follower": b, "leader": leader}, 0.0


@action(HoldAlterPartition)
def hold_alter_partition(live: Live, step: HoldAlterPartition) -> tuple[dict[str, Any], float]:
    if live.cluster.mode == "zk" and not live.cluster.release.has_alter_partition:
        raise Skip(roles.NO_ALTER_PARTITION)
    view = live.view()

    def ok(b: Any) -> str | None:
        held = live.holds.held()
        return roles.cannot_hold_alter_partition(b, live.assignment, live.running(b), held)

    b = roles.pick(step.target, view, ok, "hold the AlterPartition requests of")
    # A KRaft broker cut off from the quorum by a step reaches no controller to probe.
    reaching = live.cluster.mode != "kraft" or live.linked(b, QUORUM)
    live.holds.hold(b, live.node(b), reaching=reaching)
    return {"broker": b}, 0.0


@action(Cut)
def cut(live: Live, step: Cut) -> tuple[dict[str, Any], float]:
    view = live.view()
    down: list[str] = []
    for a in roles.candidates(step.a, view):
        for b in roles.candidates(step.b, view):
            if a in (b, QUORUM) or not live.linked(a, b):
                continue
            # The rules go into both ends' network namespaces, which a stopped or paused
            # container cannot take (docker refuses the exec). The protocol model keeps
            # such a cut through a restart instead: the two differ on those schedules.
            dead = next((end for end in (a, b) if not live.alive(end)), None)
            if dead is not None:
                down.append(live.describe(dead))
                continue
            cut = network.partition(live.cluster, live.node(a), live.nodes_of(b), mirror=True)
            live.links.append(Link(a, b, "cut", cut))
            return {"a": a, "b": b}, 0.0
    why = f": {'; '.join(down)}" if down else ""
    raise Skip(f"no uncut link between {step.a} and {step.b}{why}")


@action(Slow)
def slow_down(live: Live, step: Slow) -> tuple[dict[str, Any], float]:
    a, b, link = slow_link(live, step)
    live.links.append(Link(a, b, "slow", link))
    return {"a": a, "b": b, "rate": step.rate}, 0.0


@action(Heal)
def heal(live: Live, step: Heal) -> tuple[dict[str, Any], float]:
    if step.a is None:
        if not (live.links or live.voter_cuts or live.holds.held() or live.txn.held):
            raise Skip("nothing is cut")
        healed = [f"{link.a}-{link.b}" for link in live.links]
        healed += [f"{name}-voters" for name in live.voter_cuts]
        for link in live.slow_first():
            live.heal_link(link)
        live.heal_voters()
        released = live.holds.release(live.sim)
        late = release_held_end(live, live.txn)
        return {"links": healed, "alter_partition_dropped": released, **late}, 0.0
    view = live.view()
    for a in roles.candidates(step.a, view):
        for b in roles.candidates(step.b, view):
            link = next((x for x in live.links if x.joins(a, b)), None)
            if link is not None:
                live.heal_link(link)
                return {"a": a, "b": b}, 0.0
    raise Skip(f"no cut between {step.a} and {step.b}")


@action(ExpireSession)
def expire_session(live: Live, step: ExpireSession) -> tuple[dict[str, Any], float]:
    view = live.view()

    def ok(b: Any) -> str | None:
        if not live.alive(b) or not live.registered(b):
            return live.describe(b)
        if not live.linked(b, QUORUM):
            return f"broker {b} is already cut from the quorum"
        return None

    b = roles.pick(step.target, view, ok, "expire")
    since = time.monotonic()
    expiry = session.expire_session(live.cluster, live.node(b), mirror=True)
    live.links.append(Link(b, QUORUM, "session", expiry.cut, expiry))
    return {"broker": b}, live.session_wait(b, since)


def slow_link(live: Live, step: Slow) -> tuple[int, int, SlowLink]:
    """Shape what `a` sends `b`; a pair already slowed, or not both running, is passed by
    (runrecord.schedule_roles.pick_pair, the rule the model follows)."""

    def ok(a: Any, b: Any) -> bool:
        slowed = any(x.kind == "slow" and (x.a, x.b) == (a, b) for x in live.links)
        return live.alive(a) and live.alive(b) and not slowed

    a, b = roles.pick_pair(step.a, step.b, live.view(), ok, roles.SLOWABLE)
    return a, b, slow(live.cluster, live.node(a), live.node(b), step.rate)
