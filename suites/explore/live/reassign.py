"""A schedule's reassignment step on real brokers (KRaft): the target resolved by the rule
the model follows (runrecord.schedule_roles.reassignment), the request sent through a
broker, proven started in the metadata log, and given a moment to complete."""

from __future__ import annotations

from typing import Any

from basics.errors import NotReached
from faults import reassign as reassignments
from runrecord import schedule_roles as roles
from runrecord.schedule_roles import Skip
from runrecord.steps.base import QUORUM
from runrecord.steps.reassign import Reassign
from suites.explore.live.quorum import majority_up
from suites.explore.live.registry import action

# A new replica of a schedule's partition (a few batches) catches up within a fetch or two;
# one that has not by then cannot (its broker cut off, or down), and the reassignment stays
# in flight, which the step says.
COMPLETE_WAIT = 10.0


@action(Reassign)
def reassign(run: Any, step: Reassign) -> tuple[dict[str, Any], float]:
    """`run`: the schedule's runner (suites.explore.live.context.Live)."""
    cluster = run.cluster
    if not majority_up(cluster, run.voter_cuts):
        raise Skip("the quorum has no leader")
    view = run.view()

    def running(b: int) -> str | None:
        return None if run.alive(b) and run.registered(b) else run.describe(b)

    done = list(view.assignment) == run.reassigning and not run.adding
    pending = None if done else run.reassigning
    target, chosen = roles.reassignment(step, view, running, pending)
    # Forwarded to the controller (KIP-590) by any broker that reaches it.
    via = next(
        (b for b in sorted(cluster.brokers) if running(b) is None and run.linked(b, QUORUM)),
        None,
    )
    if via is None:
        raise Skip("no running broker reaches the quorum to forward the reassignment")
    if step.throttle:
        reassignments.throttle(cluster, run.topic, 0, sorted({*view.assignment, *target}))
    reassignments.reassign(cluster, run.node(via), run.topic, 0, list(view.assignment), target)
    run.reassigning = target
    try:
        reassignments.await_reassigned(cluster, run.topic, 0, target, timeout=COMPLETE_WAIT)
        done = True
    except NotReached:
        done = False
    run.view()  # the replica list as it stands now
    return {**chosen, "replicas": target, "in_flight": not done, "via": via}, 0.0
