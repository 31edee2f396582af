"""Which broker a step's target names when its turn comes: the rule a schedule's roles
follow, shared by the simulator (checkers.simulate) and the runner on real brokers
(suites.explore.engine.schedule_run), so that both resolve a role the same way.

A role is resolved against a `View` of the cluster: the partition's leader and ISR as the
controller has them, its assignment, and (ZooKeeper mode) the controller broker. Several
brokers may fit; the step takes the lowest broker id among those that also satisfy its
precondition. When none does, the step is skipped, saying what was observed (`Skip`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from runrecord.steps.base import QUORUM, Endpoint, Role


class Skip(Exception):
    """A step whose precondition does not hold: `observed` says what held instead."""

    def __init__(self, observed: str) -> None:
        super().__init__(observed)
        self.observed = observed


class Unserved(Skip):
    """A step skipped for a reason the model does not follow: the transaction coordinator
    could not serve it, or a background partition a transactional write spans could not
    take it. A run tells the model which steps (SimOptions.unserved)."""


class Rejected(Exception):
    """A step that ran but that the cluster refused (an acks=all write below
    min.insync.replicas): nothing was written."""


@dataclass(frozen=True)
class View:
    """What roles are resolved against."""

    mode: str
    brokers: Sequence[int]  # every broker id
    assignment: Sequence[int]  # the partition's replicas, the preferred first
    leader: int | None  # as the controller has it; None: offline
    isr: Sequence[int]
    controller: int | None = None  # ZooKeeper mode: the controller broker, if any
    coordinator: int | None = None  # the transaction coordinator, where it is known

    @classmethod
    def of_state(
        cls,
        state: Any,
        *,
        mode: str,
        brokers: Sequence[int],
        assignment: Sequence[int],
        controller: int | None = None,
        coordinator: int | None = None,
    ) -> View:
        """The view from an observed partition state (observe.state.PartitionState, or a
        recorded runrecord.states.StateRecord): its leader (-1: none) and ISR."""
        leader = None if state.leader is None or state.leader < 0 else state.leader
        return cls(mode, brokers, assignment, leader, tuple(state.isr), controller, coordinator)


def candidates(target: Endpoint, view: View) -> list[Any]:
    """Every broker (or QUORUM) the target may name now, lowest id first."""
    if isinstance(target, int) and not isinstance(target, bool):
        return [target]
    if target == QUORUM:
        return [QUORUM]
    role = Role(target)
    if role is Role.LEADER:
        return [view.leader] if view.leader is not None else []
    if role is Role.FOLLOWER_IN_ISR:
        return sorted(b for b in view.isr if b != view.leader)
    if role is Role.OUT_OF_SYNC:
        return sorted(b for b in view.assignment if b not in view.isr)
    if role is Role.CONTROLLER:
        if view.mode == "kraft":
            return [QUORUM]
        return [view.controller] if view.controller is not None else []
    if role is Role.COORDINATOR:
        return [view.coordinator] if view.coordinator is not None else []
    return sorted(view.brokers)


# What `slow` needs of its pair, for pick_pair's Skip: both run, and that way round the link
# is not slow already.
SLOWABLE = "that both run, whose link is not slow already"


def pick_pair(
    a: Endpoint, b: Endpoint, view: View, ok: Callable[[Any, Any], bool], what: str
) -> tuple[Any, Any]:
    """The first pair of two different brokers, `a`'s candidates then `b`'s (lowest ids
    first), that `ok` accepts; else Skip, saying `what` no pair was."""
    for x in candidates(a, view):
        for y in candidates(b, view):
            if x != y and ok(x, y):
                return x, y
    raise Skip(f"no pair {a} -> {b} {what}")


def pick(target: Endpoint, view: View, ok: Callable[[Any], str | None], what: str) -> Any:
    """The first candidate of `target` (lowest id) that `ok` accepts (returns None for);
    else Skip, saying why each candidate did not fit."""
    found = candidates(target, view)
    if not found:
        raise Skip(f"no {target} to {what}")
    reasons = []
    for c in found:
        why = ok(c)
        if why is None:
            return c
        reasons.append(why)
    raise Skip("; ".join(reasons))


def cannot_register(broker: int, linked: Callable[[Any, Any], bool]) -> str | None:
    """Why a broker started now (a restart, or a kill's restart at once) could not register,
    or None: cut off from the quorum, a KRaft broker gives up after
    initial.broker.registration.timeout.ms (60 s) and exits (seen on 4.4.0), and a
    ZooKeeper-mode one once zookeeper.connection.timeout.ms passes."""
    if not linked(broker, QUORUM):
        return f"broker {broker} is cut off from the quorum: started, it could not register"
    return None


def cannot_shut_down(
    broker: int, controller: int | None, linked: Callable[[Any, Any], bool]
) -> str | None:
    """Why SIGTERM would not end the broker, or None. A controlled shutdown asks the
    controller to move the broker's leaderships first; cut off from the quorum or from the
    controller, the broker waits for an answer that never comes (1.1.1 blocks looking the
    controller up in ZooKeeper)."""
    if not linked(broker, QUORUM):
        return f"broker {broker} is cut off from the quorum: its controlled shutdown would hang"
    if controller is not None and controller != broker and not linked(broker, controller):
        return (
            f"broker {broker} is cut off from controller {controller}: its controlled "
            "shutdown would hang"
        )
    return None


def cannot_hold_alter_partition(
    broker: int, assignment: Sequence[int], running: str | None, held: Collection[int]
) -> str | None:
    """Why a broker's AlterPartition requests cannot be held, or None. `running`: why it
    does not run (None: it does). Only a broker with a replica of the partition asks the
    controller to change its ISR."""
    if broker not in assignment:
        return f"broker {broker} holds no replica"
    if running is not None:
        return running
    if broker in held:
        return f"broker {broker}'s AlterPartition requests are already held"
    return None


NO_ALTER_PARTITION = (
    "no AlterPartition before 2.7 (KIP-497): the leader writes the ISR to ZooKeeper itself"
)


def cannot_use_log_dir(
    broker: int, view: View, running: str | None, *, failing: bool, quorum: bool = True
) -> str | None:
    """Why a move-dir step (`failing` False) or a fail-dir step (True) cannot act on the
    broker's replica, or None. `running`: why it does not run (None: it does); `quorum`:
    whether it reaches a KRaft controller quorum that has a leader. A ZooKeeper-mode
    controller's session, and its role, outlive a failed dir, which the model would hand
    on: fail-dir leaves it alone. A move sets or lifts the broker's move throttle, a
    dynamic broker config that a KRaft broker forwards to the controller (KIP-590): one
    cut off from the quorum cannot."""
    if broker not in view.assignment:
        return f"broker {broker} holds no replica"
    if failing and view.mode == "zk" and broker == view.controller:
        return f"broker {broker} is the controller"
    if running is None and not failing and view.mode == "kraft" and not quorum:
        return f"broker {broker} cannot reach the controller quorum to set its move throttle"
    return running


def reassignment(
    step: Any, view: View, running: Callable[[int], str | None], in_flight: Sequence[int] | None
) -> tuple[list[int], dict[str, int]]:
    """The replicas a reassign step asks for (runrecord.steps.reassign.Reassign), and the
    brokers its roles resolved to; Skip where it cannot run. `running`: why a broker does
    not run and hold a session (None: it does); `in_flight`: the target of a reassignment
    not yet complete. A removal keeps an ISR member in the target, as the controller
    completes a reassignment only with one (PartitionReassignmentReplicas)."""
    if in_flight is not None:
        raise Skip(f"a reassignment to {list(in_flight)} is in flight")
    if view.leader is None:
        raise Skip("the partition has no leader (offline)")
    current = list(view.assignment)
    target, chosen = list(current), {}
    if step.remove is not None:

        def removable(b: int) -> str | None:
            if b not in current:
                return f"broker {b} holds no replica"
            if not [x for x in view.isr if x != b]:
                return f"broker {b} is the ISR's last member {list(view.isr)}"
            return None

        chosen["remove"] = pick(step.remove, view, removable, "remove")
        target.remove(chosen["remove"])
    if step.add is not None:

        def addable(b: int) -> str | None:
            return f"broker {b} holds a replica" if b in current else running(b)

        chosen["add"] = pick(step.add, view, addable, "add")
        target.append(chosen["add"])
    if step.prefer is not None:

        def preferable(b: int) -> str | None:
            return None if b in target else f"broker {b} holds no replica"

        chosen["prefer"] = pick(step.prefer, view, preferable, "prefer")
        target.remove(chosen["prefer"])
        target.insert(0, chosen["prefer"])
    if target == current:
        raise Skip(f"the replicas are {current} already")
    if len(target) < 2:
        # The model follows two replicas or more (checkers.simulate.state): KIP-966's rules
        # for a lone replica restarted uncleanly are not in it.
        raise Skip(f"a reassignment to {target} leaves one replica")
    return target, chosen
