"""The KRaft controller quorum's faults, as a schedule's `quorum` step runs them on real
nodes (runrecord.steps.quorum.Quorum; the model's side: checkers.simulate.rules.quorum)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from faults import controller as controller_faults
from faults import network, process
from faults.voters import reachable_voters
from fixtures.cluster import Cluster
from fixtures.nodes import Node
from observe.controller import active_controller
from runrecord.schedule_roles import Skip
from runrecord.steps.quorum import ACTIVE, Quorum
from suites.explore.live.registry import action

if TYPE_CHECKING:
    from suites.explore.live.context import Live


def quorum_fault(
    cluster: Cluster, step: Quorum, voter_cuts: dict[str, network.LinkCut]
) -> dict[str, Any]:
    """A fault of the KRaft quorum, proven: a kill, pause or isolation of the active
    controller is followed by another voter leading (while a majority is left); a
    restart or resume by the voter running again."""
    voters = {controller_number(n): n for n in cluster.voter_nodes if not cluster.voter_gone(n)}
    leader = active_controller(cluster)
    number = controller_number(leader) if step.voter == ACTIVE else int(step.voter)
    if number not in voters:
        raise Skip(f"controller {number} does not vote")
    node = voters[number]
    status = node.status()
    wanted = {"restart": "exited", "resume": "paused"}.get(step.action, "running")
    if status != wanted and not (wanted == "exited" and status in ("created", "dead")):
        raise Skip(f"voter {number} ({node.name}) is {status}")
    if step.action == "isolate" and node.name in voter_cuts:
        raise Skip(f"voter {number} ({node.name}) is already isolated")
    up = [
        n
        for n in voters.values()
        if n.status() == "running" and n is not node and n.name not in voter_cuts
    ]
    majority = len(up) >= len(voters) // 2 + 1
    if step.action == "kill":
        process.kill(cluster, node)
    elif step.action == "pause":
        process.pause(cluster, node)
    elif step.action == "isolate":
        others = [n for n in voters.values() if n is not node]
        voter_cuts[node.name] = network.isolate(cluster, node, others)
    elif step.action == "restart":
        process.restart(cluster, node)
    else:
        process.resume(cluster, node)
    now = leader
    if node is leader and step.action in ("kill", "pause", "isolate") and majority:
        now = controller_faults.await_successor(cluster, leader)
    return {"voter": number, "quorum_leader": now.name}


def controller_number(node: Node) -> int:
    """A controller's number in a schedule: 1 is c1 (a combined node: its broker id)."""
    return int(node.name[1:])


def majority_up(cluster: Cluster, voter_cuts: dict[str, network.LinkCut]) -> bool:
    """Whether a majority of the KRaft voters runs and reaches the others (ZooKeeper mode:
    always; a schedule never stops ZooKeeper). Without one nobody unfences a broker. A
    voter whose voting incarnation lost its disk counts, as one that never answers."""
    if cluster.mode != "kraft":
        return True
    up = reachable_voters(cluster, voter_cuts)
    return len(up) >= len(cluster.voter_nodes) // 2 + 1


@action(Quorum)
def quorum(live: Live, step: Quorum) -> tuple[dict[str, Any], float]:
    return quorum_fault(live.cluster, step, live.voter_cuts), 0.0
