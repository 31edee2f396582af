"""Time passing on the simulated cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from checkers.simulate.rules.registry import rule
from runrecord.steps.waits import Wait

if TYPE_CHECKING:
    from checkers.simulate.simulator import Simulator


@rule(Wait)
def wait(sim: Simulator, step: Wait) -> dict[str, Any]:
    sim._pass_time(step.seconds)
    return {}
