"""Faults of the KRaft controller quorum, on the simulated cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from checkers.simulate.rules.registry import rule
from checkers.simulate.state import (
    PAUSED,
    RUNNING,
    STOPPED,
)
from runrecord.schedule_roles import (
    Skip,
)
from runrecord.steps.quorum import ACTIVE, Quorum

if TYPE_CHECKING:
    from checkers.simulate.simulator import Simulator


@rule(Quorum)
def quorum(sim: Simulator, step: Quorum) -> dict[str, Any]:
    """A fault of the KRaft controller quorum. The quorum elects another leader while a
    majority of its voters runs; without one, nobody fences brokers or changes the
    partition until it has one again, when every broker's session starts afresh."""
    voter = sim.quorum_leader if step.voter == ACTIVE else step.voter
    if voter is None:
        raise Skip("the quorum has no leader")
    if voter not in sim.voters or voter in sim.gone:
        raise Skip(f"controller {voter} does not vote")
    state, cut = sim.voters[voter], sim.voter_cut(voter)
    wanted = {"kill": RUNNING, "pause": RUNNING, "isolate": RUNNING}.get(step.action)
    wanted = wanted or {"restart": STOPPED, "resume": PAUSED}[step.action]
    if state != wanted:
        raise Skip(f"voter {voter} is {state}")
    if step.action == "isolate" and cut in sim.cuts:
        raise Skip(f"voter {voter} is already isolated")
    was_up = sim.quorum_up()
    if step.action == "isolate":
        sim.cuts.add(cut)
    else:
        sim.voters[voter] = {"kill": STOPPED, "pause": PAUSED}.get(step.action, RUNNING)
    if sim.quorum_leader == voter and step.action != "restart":
        sim.quorum_leader = None
    sim._quorum_back(was_up)
    leader = sim.quorum_leader
    sim._event(
        f"voter {voter}: {step.action}; quorum "
        + (f"led by voter {leader}" if leader is not None else "without a majority")
    )
    sim.control.settle()
    return {"voter": voter, "quorum_leader": leader}
