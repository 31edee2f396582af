"""Links between nodes on the simulated cluster: hold-backs, AlterPartition holds, cuts, slow
links, session expiries and heals."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from checkers.simulate.rules.registry import rule
from checkers.simulate.state import (
    RUNNING,
)
from runrecord.schedule_roles import (
    NO_ALTER_PARTITION,
    SLOWABLE,
    Skip,
    cannot_hold_alter_partition,
    pick_pair,
)
from runrecord.steps.base import QUORUM
from runrecord.steps.links import Cut, ExpireSession, Heal, HoldAlterPartition, HoldBack, Slow

if TYPE_CHECKING:
    from checkers.simulate.simulator import Simulator


@rule(HoldBack)
def hold_back(sim: Simulator, step: HoldBack) -> dict[str, Any]:
    leader = sim.ctl.leader
    if leader is None or not sim.alive(leader):
        raise Skip("no live leader to hold a follower back from")

    def ok(b: Any) -> str | None:
        if b not in sim.ctl.isr or b == leader:
            return f"broker {b} is not a follower in the ISR {sim.ctl.isr}"
        if not sim.alive(b):
            return sim._describe_broker(b)
        if not sim.linked(b, leader):
            return f"broker {b} is already cut from leader {leader}"
        return None

    b = sim._pick(step.target, ok, "hold back")
    sim.cuts.add(frozenset((b, leader)))
    sim._event(f"broker {b} cut off from leader {leader} (held back)")
    sim.control.settle()
    return {"follower": b, "leader": leader}


@rule(HoldAlterPartition)
def hold_alter_partition(sim: Simulator, step: HoldAlterPartition) -> dict[str, Any]:
    if not sim.alter_partition:
        raise Skip(NO_ALTER_PARTITION)
    running = sim._status_is(RUNNING)

    def ok(b: Any) -> str | None:
        return cannot_hold_alter_partition(b, sim.assignment, running(b), sim.held)

    b = sim._pick(step.target, ok, "hold the AlterPartition requests of")
    sim.held.add(b)
    sim._event(f"broker {b}'s AlterPartition requests held")
    sim.control.settle()
    return {"broker": b}


@rule(Cut)
def cut(sim: Simulator, step: Cut) -> dict[str, Any]:
    for a in sim._candidates(step.a):
        for b in sim._candidates(step.b):
            if a != b and sim.linked(a, b):
                sim.cuts.add(frozenset((a, b)))
                sim._event(f"link {a} - {b} cut")
                sim.control.settle()
                return {"a": a, "b": b}
    raise Skip(f"no uncut link between {step.a} and {step.b}")


@rule(Slow)
def slow_down(sim: Simulator, step: Slow) -> dict[str, Any]:
    def ok(a: Any, b: Any) -> bool:
        return sim.alive(a) and sim.alive(b) and (a, b) not in sim.slowed

    a, b = pick_pair(step.a, step.b, sim.view(), ok, SLOWABLE)
    sim.slowed[(a, b)] = step.rate
    sim._event(f"what broker {a} sends broker {b} slowed to {step.rate} KB/s")
    return {"a": a, "b": b, "rate": step.rate}


@rule(Heal)
def heal(sim: Simulator, step: Heal) -> dict[str, Any]:
    if step.a is None:
        if not sim.cuts and not sim.held and sim.transactions.held_end is None and not sim.slowed:
            raise Skip("nothing is cut")
        healed = sorted(sorted(map(str, c)) for c in sim.cuts) + sim.slow.lift_slow()
        was_up = sim.quorum_up()
        sim.cuts.clear()
        sim._quorum_back(was_up)
        released = sim.control._release_held()
        sim._event(f"every cut healed ({healed}), AlterPartition released {released}")
        late = sim.transactions.deliver_held_end()
        sim.control.settle()
        late_end = {"late_end": late} if late else {}
        return {"links": healed, "released": released, **late_end}
    assert step.b is not None
    for a in sim._candidates(step.a):
        for b in sim._candidates(step.b):
            if frozenset((a, b)) in sim.cuts or sim.slow.lift_slow(a, b):
                sim.cuts.discard(frozenset((a, b)))
                sim._event(f"link {a} - {b} healed")
                sim.control.settle()
                return {"a": a, "b": b}
    raise Skip(f"no cut between {step.a} and {step.b}")


@rule(ExpireSession)
def expire_session(sim: Simulator, step: ExpireSession) -> dict[str, Any]:
    def ok(b: Any) -> str | None:
        if not sim.alive(b) or not sim.registered(b):
            return sim._describe_broker(b)
        if not sim.linked(b, QUORUM):
            return f"broker {b} is already cut from the quorum"
        return None

    b = sim._pick(step.target, ok, "expire")
    sim.cuts.add(frozenset((b, QUORUM)))
    sim._event(f"broker {b} cut off from the quorum until its session expires")
    sim.control.advance(sim._session_timeout(b))
    return {"broker": b}
