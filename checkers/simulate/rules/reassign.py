"""Reassignments on the simulated cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from checkers.simulate.rules.registry import rule
from runrecord.steps.reassign import Reassign

if TYPE_CHECKING:
    from checkers.simulate.simulator import Simulator


@rule(Reassign)
def reassign(sim: Simulator, step: Reassign) -> dict[str, Any]:
    return sim.reassignments.reassign_step(step, sim.view())
