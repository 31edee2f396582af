"""The election steps of a schedule: each checks its precondition first and is skipped,
saying what it saw, where the precondition does not hold."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from basics.errors import NotReached
from faults import elections
from runrecord import schedule_roles as roles
from runrecord.schedule_roles import Skip
from runrecord.steps.elections import ElectPreferred, ElectUnclean
from suites.explore.live.registry import action

if TYPE_CHECKING:
    from suites.explore.live.context import Live

# The controller's answers to a preferred election whose preconditions no longer held.
_LOST_RACE = ("PREFERRED_LEADER_NOT_AVAILABLE", "ELECTION_NOT_NEEDED")


@action(ElectPreferred)
def preferred(live: Live, step: ElectPreferred) -> tuple[dict[str, Any], float]:
    """Move leadership to the preferred replica, where it is in the ISR and does not lead."""
    view = live.view()
    preferred = live.assignment[0]
    if view.leader == preferred:
        raise Skip(f"preferred replica {preferred} already leads")
    if not live.registered(preferred):
        raise Skip(live.describe(preferred))
    if preferred not in view.isr:
        raise Skip(f"preferred replica {preferred} is not in the ISR {list(view.isr)}")
    if live.cluster.mode == "zk" and view.controller is None:
        raise Skip("no controller")
    try:
        elections.elect_preferred(live.cluster, live.topic)
    except NotReached as exc:
        # The precondition held when looked at, and no longer when the controller acted:
        # a held-back follower left the ISR meanwhile, or another election made it leader
        # (the controller's PREFERRED_LEADER_NOT_AVAILABLE, ELECTION_NOT_NEEDED). Nothing
        # was elected, so nothing happened: the step is skipped, with what was seen.
        if not any(code in str(exc) for code in _LOST_RACE):
            raise
        now = live.view()
        if preferred in now.isr and live.registered(preferred) and now.leader != preferred:
            raise
        seen = f"leader {now.leader}, ISR {list(now.isr)}"
        raise Skip(f"the controller elected no one ({exc}); by then {seen}") from None
    return {"leader": preferred}, 0.0


@action(ElectUnclean)
def unclean(live: Live, step: ElectUnclean) -> tuple[dict[str, Any], float]:
    """Elect an out-of-sync replica the step names, while no ISR member is alive."""
    view = live.view()
    live_isr = [b for b in view.isr if live.registered(b)]
    if live_isr:
        raise Skip(f"ISR member(s) {live_isr} alive: that would be a clean election")

    def ok(b: Any) -> str | None:
        if b not in live.assignment:
            return f"broker {b} holds no replica"
        if b in view.isr:
            return f"broker {b} is in the ISR {list(view.isr)}"
        if not live.registered(b):
            return live.describe(b)
        return None

    b = roles.pick(step.target, view, ok, "elect")
    # The schedule's topic enables unclean elections (the loader refuses the step
    # otherwise): only the controller has to look at the partition again.
    elections.elect_unclean(live.cluster, live.topic, to=b, enabled=True)
    return {"leader": b}, 0.0
