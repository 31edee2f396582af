"""A reassignment on the simulated cluster (KIP-455, as the KRaft controller runs it).

It starts with the target replicas first, then those it removes, as the replica list; the
new replicas follow the leader, catch up and join the ISR like any follower. It completes
in the controller's next change of the partition whose ISR, less the removed replicas,
holds what the release requires (`completes`): the removed replicas leave the replica list
and the ISR, a removed leader gives way to the first target replica in that ISR, and the
leader epoch is bumped since replicas were removed (PartitionChangeBuilder.
triggerLeaderEpochBumpForReplicaReassignmentIfNeeded). Adding replicas alone, or a new
order, bumps nothing; a reassignment that adds nothing completes at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from checkers.simulate.state import Replica
from runrecord.schedule_roles import Skip, View, reassignment
from runrecord.steps.reassign import Reassign

if TYPE_CHECKING:
    from checkers.simulate.simulator import Simulator


@dataclass
class InFlight:
    target: list[int]
    adding: list[int]
    removing: list[int]
    original: list[int]


class Reassignments:
    """The controller's side of a reassignment: a part of the simulator
    (`Simulator.reassignments`), beside the control plane."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.reassignment: InFlight | None = None

    def reassign_step(self, step: Reassign, view: View) -> dict[str, Any]:
        """A reassign step against the cluster as `view` has it; Skip where it cannot run."""
        if not self.sim.quorum_up():
            raise Skip("the quorum has no leader")

        def running(b: int) -> str | None:
            fits = self.sim.alive(b) and self.sim.registered(b)
            return None if fits else self.sim._describe_broker(b)

        in_flight = self.reassignment.target if self.reassignment is not None else None
        target, chosen = reassignment(step, view, running, in_flight)
        self._reassign(target)
        self.sim.control.settle()
        return {**chosen, "replicas": target, "in_flight": self.reassignment is not None}

    def _reassign(self, target: list[int]) -> None:
        current = list(self.sim.assignment)
        adding = [b for b in target if b not in current]
        removing = [b for b in current if b not in target]
        self.sim.assignment = [*target, *removing]
        for b in adding:
            self.sim.replicas[b] = Replica(b)
        self.reassignment = InFlight(list(target), adding, removing, current)
        self.sim._event(
            f"reassignment to {target}: replicas {self.sim.assignment}, adding {adding}"
        )
        self._complete_reassignment()

    def _completes(self, ra: InFlight, isr: list[int]) -> bool:
        """Whether the ISR less the removed replicas lets the reassignment complete. Before
        3.8 the added replicas must be in it; from 3.8 every target replica (KAFKA-15665);
        from 4.3 again only the added ones, unless the target is smaller than the replica
        list it replaces (KAFKA-19975, merged 2025-12: in 4.3, 4.2 not checked)."""
        if not isr:
            return False
        whole = all(b in isr for b in ra.target)
        if self.sim.reassign_rule == "target" or (
            self.sim.reassign_rule == "shrinking" and len(ra.target) < len(ra.original)
        ):
            return whole
        return all(b in isr for b in ra.adding)

    def _complete_reassignment(self) -> bool:
        ra, ctl = self.reassignment, self.sim.ctl
        if ra is None or not self.sim.quorum_up():
            return False
        isr = [b for b in ctl.isr if b not in ra.removing]
        if not self._completes(ra, isr):
            return False
        self.reassignment = None
        self.sim.assignment = list(ra.target)
        ctl.isr = [b for b in ra.target if b in isr]
        ctl.elr = [b for b in ctl.elr if b in ra.target]
        for b in ra.removing:
            r = self.sim.replicas.pop(b)
            r.role = None  # its broker stops and deletes it (StopReplica, the metadata)
        if ctl.leader in ra.removing:
            # The first target replica in the ISR whose broker is unfenced (LeaderAcceptor).
            ctl.leader = next((b for b in ctl.isr if self.sim.registered(b)), None)
        if ra.removing or ctl.leader is None:
            self.sim.control._bump()
        self.sim._event(
            f"reassignment complete: replicas {self.sim.assignment}, ISR {ctl.isr}, leader "
            f"{ctl.leader} (epoch {ctl.epoch})"
        )
        return True

    def _reassignment_acts(self) -> bool:
        return self._complete_reassignment()
