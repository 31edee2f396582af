"""Writes on the simulated cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from checkers.simulate.rules.registry import rule
from runrecord.steps.writes import Produce

if TYPE_CHECKING:
    from checkers.simulate.simulator import Simulator


@rule(Produce)
def produce(sim: Simulator, step: Produce) -> dict[str, Any]:
    done = sim._write(step.count, step.acks, step.to)
    sim.slow.filler_written(step.filler, done)
    return done
