"""The KRaft quorum's membership (KIP-853), on the simulated cluster: voters added, removed,
and a voter's disk lost. The model follows the voter set and the quorum's leadership; what
a change does to the brokers it knows only through the quorum being up or not."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from checkers.simulate.rules.registry import rule
from checkers.simulate.state import RUNNING
from runrecord.schedule_roles import Skip
from runrecord.steps.quorum import ACTIVE
from runrecord.steps.voters import AddVoter, RemoveVoter, WipeVoter

if TYPE_CHECKING:
    from checkers.simulate.simulator import Simulator

# KAFKA-14077: a static quorum's wiped voter votes with an empty log, so which committed
# metadata survives depends on the votes of the next election, which the model does not
# follow.
STATIC_WIPE = (
    "a static quorum's voter lost its disk and votes again with an empty log (KAFKA-14077): "
    "what committed metadata survives depends on the next election's votes"
)


def _voter(sim: Simulator, named: Any) -> int:
    voter = sim.quorum_leader if named == ACTIVE else named
    if voter is None:
        raise Skip("the quorum has no leader")
    if voter not in sim.voters or voter in sim.gone:
        raise Skip(f"controller {voter} does not vote")
    return voter


def _majority_after(sim: Simulator, voters: set[int]) -> bool:
    """A change commits on a majority of the new voter set (KIP-853): whether one of it is
    running and reachable."""
    up = set(sim.voters_up()) | {v for v in voters if v not in sim.voters}
    return len(up & voters) >= len(voters) // 2 + 1


def _changed(sim: Simulator, was_up: bool, what: str) -> dict[str, Any]:
    if sim.quorum_leader is not None and sim.quorum_leader not in sim.voters_up():
        sim.quorum_leader = None  # the leader left: the others elect one
    sim._quorum_back(was_up)
    leader = sim.quorum_leader
    sim._event(
        f"{what}; voters {sorted(sim.voters)}, quorum "
        + (f"led by voter {leader}" if leader is not None else "without a majority")
    )
    sim.control.settle()
    return {"voters": sorted(sim.voters), "quorum_leader": leader}


@rule(AddVoter)
def add_voter(sim: Simulator, step: AddVoter) -> dict[str, Any]:
    """A running controller that does not vote joins the voters, once the quorum's leader
    commits the change (it needs a leader, and a majority of the new set)."""
    if not sim.quorum_up():
        raise Skip("the quorum has no leader")
    running = sorted(c for c, s in sim.observers.items() if s == RUNNING)
    controller = step.controller if step.controller is not None else next(iter(running), None)
    if controller is None:
        raise Skip("every running controller votes")
    if controller in sim.voters:
        why = "its old incarnation still votes" if controller in sim.gone else "it votes"
        raise Skip(f"controller {controller} cannot be added: {why}")
    if sim.observers.get(controller) != RUNNING:
        raise Skip(f"controller {controller} is not running")
    if not _majority_after(sim, set(sim.voters) | {controller}):
        raise Skip("a majority of the new voter set is not up")
    was_up = sim.quorum_up()
    sim.voters[controller] = sim.observers.pop(controller)
    return {"controller": controller, **_changed(sim, was_up, f"controller {controller} added")}


@rule(RemoveVoter)
def remove_voter(sim: Simulator, step: RemoveVoter) -> dict[str, Any]:
    """A voter leaves the voters once the leader commits the change on a majority of the
    set without it; a leader that removed itself resigns then. The controller runs on, as an
    observer (a voter whose disk was lost: its old incarnation goes, its new one stays)."""
    if not sim.quorum_up():
        raise Skip("the quorum has no leader")
    voter = sim.quorum_leader if step.voter == ACTIVE else step.voter
    if voter is None or voter not in sim.voters:
        raise Skip(f"controller {voter} does not vote")
    rest = set(sim.voters) - {voter}
    if not rest:
        raise Skip("the last voter cannot be removed")
    if not _majority_after(sim, rest):
        raise Skip("a majority of the new voter set is not up")
    was_up = sim.quorum_up()
    state = sim.voters.pop(voter)
    if voter in sim.gone:
        sim.gone.discard(voter)  # the incarnation that lost its disk; the new one observes
    else:
        sim.observers[voter] = state
    return {"voter": voter, **_changed(sim, was_up, f"voter {voter} removed")}


@rule(WipeVoter)
def wipe_voter(sim: Simulator, step: WipeVoter) -> dict[str, Any]:
    """A running voter loses its metadata disk and starts again, formatted anew. Dynamic:
    as an observer with a new directory id, its voting incarnation gone for good. Static:
    as the same voter with an empty log, which the model cannot follow (STATIC_WIPE)."""
    voter = _voter(sim, step.voter)
    if sim.voters[voter] != RUNNING:
        raise Skip(f"voter {voter} is {sim.voters[voter]}")
    was_up = sim.quorum_up()
    if sim.cluster.dynamic:
        sim.gone.add(voter)
        sim.observers[voter] = RUNNING
    elif STATIC_WIPE not in sim.cannot_predict:
        sim.cannot_predict.append(STATIC_WIPE)
    if sim.quorum_leader == voter:
        sim.quorum_leader = None
    return {"voter": voter, **_changed(sim, was_up, f"voter {voter} wiped")}
