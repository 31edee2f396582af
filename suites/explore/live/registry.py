"""The live action of each step kind: what its family's module registers, and what `Live.apply`
runs. An action takes the live cluster and the step, and returns the brokers its roles
resolved to and the seconds the protocol made it wait; it raises Skip, Unserved or Rejected
(runrecord.schedule_roles) where the step cannot run."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from runrecord.steps.base import StepKind

if TYPE_CHECKING:
    from suites.explore.live.context import Live

Action = Callable[["Live", Any], tuple[dict[str, Any], float]]
A = TypeVar("A", bound=Action)

ACTIONS: dict[type[StepKind], Action] = {}


def action(kind: type[StepKind]) -> Callable[[A], A]:
    """Register the decorated function as the live action of `kind`."""

    def register(fn: A) -> A:
        if kind in ACTIONS:
            raise TypeError(f"two live actions for {kind.KIND!r}")
        ACTIONS[kind] = fn
        return fn

    return register
