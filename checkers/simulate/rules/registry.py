"""The rule of each step kind on the simulated cluster: what its family's module registers,
and what `Simulator.apply` runs. A rule takes the simulator and the step, and returns the
brokers its roles resolved to; it raises Skip or Rejected (runrecord.schedule_roles) where
the step cannot run."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from runrecord.steps.base import StepKind

if TYPE_CHECKING:
    from checkers.simulate.simulator import Simulator

Rule = Callable[["Simulator", Any], dict[str, Any] | None]
R = TypeVar("R", bound=Rule)

RULES: dict[type[StepKind], Rule] = {}


def rule(kind: type[StepKind]) -> Callable[[R], R]:
    """Register the decorated function as the rule of `kind` on the simulated cluster."""

    def register(fn: R) -> R:
        if kind in RULES:
            raise TypeError(f"two rules for {kind.KIND!r}")
        RULES[kind] = fn
        return fn

    return register
