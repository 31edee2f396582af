"""The KRaft quorum's membership steps on real controllers (runrecord.steps.voters; the
model's side: checkers.simulate.rules.voters; the faults: faults.voters)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from faults import voters as membership
from fixtures.nodes import Node
from observe.controller import active_controller
from runrecord.schedule_roles import Skip
from runrecord.steps.quorum import ACTIVE
from runrecord.steps.voters import AddVoter, RemoveVoter, WipeVoter
from suites.explore.live.quorum import controller_number, majority_up
from suites.explore.live.registry import action

if TYPE_CHECKING:
    from suites.explore.live.context import Live


def _voter(live: Live, named: Any) -> Node:
    """The voting controller a step names (the model's `_voter`: checkers.simulate.rules)."""
    cluster = live.cluster
    node = active_controller(cluster) if named == ACTIVE else cluster.node(f"c{named}")
    if node.name not in cluster.voter_dirs or cluster.voter_gone(node):
        raise Skip(f"controller {controller_number(node)} does not vote")
    return node


def _needs_leader(live: Live) -> None:
    if not majority_up(live.cluster, live.voter_cuts):
        raise Skip("the quorum has no leader")


def _majority_after(live: Live, voters: list[Node]) -> None:
    up = membership.reachable_voters(live.cluster, live.voter_cuts)
    if len([n for n in voters if n in up or n.name not in live.cluster.voter_dirs]) < (
        len(voters) // 2 + 1
    ):
        raise Skip("a majority of the new voter set is not up")


@action(AddVoter)
def add_voter(live: Live, step: AddVoter) -> tuple[dict[str, Any], float]:
    cluster = live.cluster
    _needs_leader(live)
    observers = [n for n in cluster.controllers if n.name not in cluster.voter_dirs]
    running = [n for n in observers if n.status() == "running"]
    if step.controller is None:
        if not running:
            raise Skip("every running controller votes")
        node = running[0]
    else:
        node = cluster.node(f"c{step.controller}")
        if node.name in cluster.voter_dirs:
            gone = cluster.voter_gone(node)
            why = "its old incarnation still votes" if gone else "it votes"
            raise Skip(f"controller {step.controller} cannot be added: {why}")
        if node not in running:
            raise Skip(f"controller {step.controller} is not running")
    _majority_after(live, [*cluster.voter_nodes, node])
    done = membership.add_voter(cluster, node, live.voter_cuts)
    return {"controller": controller_number(node), **done}, 0.0


@action(RemoveVoter)
def remove_voter(live: Live, step: RemoveVoter) -> tuple[dict[str, Any], float]:
    cluster = live.cluster
    _needs_leader(live)
    node = active_controller(cluster) if step.voter == ACTIVE else cluster.node(f"c{step.voter}")
    if node.name not in cluster.voter_dirs:
        raise Skip(f"controller {controller_number(node)} does not vote")
    rest = [n for n in cluster.voter_nodes if n is not node]
    if not rest:
        raise Skip("the last voter cannot be removed")
    _majority_after(live, rest)
    done = membership.remove_voter(cluster, node, live.voter_cuts)
    return {"voter": controller_number(node), **done}, 0.0


@action(WipeVoter)
def wipe_voter(live: Live, step: WipeVoter) -> tuple[dict[str, Any], float]:
    node = _voter(live, step.voter)
    if node.status() != "running":
        raise Skip(f"voter {controller_number(node)} is {node.status()}")
    if node.name in live.voter_cuts:  # its new container namespace would lose the cut
        live.voter_cuts.pop(node.name).heal()
    return {"voter": controller_number(node), **membership.wipe_voter(live.cluster, node)}, 0.0
