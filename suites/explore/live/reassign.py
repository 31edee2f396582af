"""A schedule's reassignment step on real brokers (KRaft): the target resolved by the rule
the model follows (runrecord.schedule_roles.reassignment), the request sent through a
broker, proven started in the metadata log, and given a moment to complete."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from basics.errors import NotReached
from faults import reassign as reassignments
from runrecord import schedule_roles as roles
from runrecord.schedule_roles import Skip
from runrecord.steps.base import QUORUM
from runrecord.steps.reassign import Reassign
from suites.explore.live.quorum import majority_up
from suites.explore.live.registry import action

if TYPE_CHECKING:
    from suites.explore.live.context import Live

# A new replica of a schedule's partition (a few batches) catches up within a fetch or two;
# one that has not by then cannot (its broker cut off, or down), and the reassignment stays
# in flight, which the step says.
COMPLETE_WAIT = 10.0


@action(Reassign)
def reassign(live: Live, step: Reassign) -> tuple[dict[str, Any], float]:

    cluster = live.cluster
    if not majority_up(cluster, live.voter_cuts):
        raise Skip("the quorum has no leader")
    view = live.view()

    def running(b: int) -> str | None:
        return None if live.alive(b) and live.registered(b) else live.describe(b)

    done = list(view.assignment) == live.reassigning and not live.adding
    pending = None if done else live.reassigning
    target, chosen = roles.reassignment(step, view, running, pending)
    # Forwarded to the controller (KIP-590) by any broker that reaches it.
    via = next(
        (b for b in sorted(cluster.brokers) if running(b) is None and live.linked(b, QUORUM)),
        None,
    )
    if via is None:
        raise Skip("no running broker reaches the quorum to forward the reassignment")
    if step.throttle:
        reassignments.throttle(cluster, live.topic, 0, sorted({*view.assignment, *target}))
    reassignments.reassign(cluster, live.node(via), live.topic, 0, list(view.assignment), target)
    live.reassigning = target
    try:
        reassignments.await_reassigned(cluster, live.topic, 0, target, timeout=COMPLETE_WAIT)
        done = True
    except NotReached:
        done = False
    live.view()  # the replica list as it stands now
    return {**chosen, "replicas": target, "in_flight": not done, "via": via}, 0.0
