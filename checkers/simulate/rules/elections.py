"""Elections an operator asks for, on the simulated cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from checkers.simulate.rules.registry import rule
from runrecord.schedule_roles import (
    Skip,
)
from runrecord.steps.elections import ElectPreferred, ElectUnclean

if TYPE_CHECKING:
    from checkers.simulate.simulator import Simulator


@rule(ElectPreferred)
def elect_preferred(sim: Simulator, step: ElectPreferred) -> dict[str, Any]:
    preferred = sim.assignment[0]
    if sim.ctl.leader == preferred:
        raise Skip(f"preferred replica {preferred} already leads")
    if not sim.registered(preferred):
        raise Skip(sim._describe_broker(preferred))
    if preferred not in sim.ctl.isr:
        raise Skip(f"preferred replica {preferred} is not in the ISR {sim.ctl.isr}")
    if sim.cluster.mode == "zk" and sim._controller_broker() is None:
        raise Skip("no controller")
    sim.ctl.leader = preferred
    sim.control._bump()
    sim.control._note_clean_election()
    sim._event(f"preferred election: broker {preferred} leads in epoch {sim.ctl.epoch}")
    sim.control.settle()
    return {"leader": preferred}


@rule(ElectUnclean)
def elect_unclean(sim: Simulator, step: ElectUnclean) -> dict[str, Any]:
    live_isr = [b for b in sim.ctl.isr if sim.registered(b)]
    if live_isr:
        raise Skip(f"ISR member(s) {live_isr} alive: that would be a clean election")

    def ok(b: Any) -> str | None:
        if b not in sim.replicas:
            return f"broker {b} holds no replica"
        if b in sim.ctl.isr:
            return f"broker {b} is in the ISR {sim.ctl.isr}"
        if not sim.registered(b):
            return sim._describe_broker(b)
        return None

    b = sim._pick(step.target, ok, "elect")
    sim.control._elect_unclean(b)
    sim.control.settle()
    return {"leader": b}
