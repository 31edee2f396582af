"""The exporter of each step kind: the shell lines that do what the step did in the replay,
to the brokers its roles resolved to there. A step kind with no exporter cannot be
exported (a power loss needs logfork's crash filesystem), and says so."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from basics.errors import SetupError
from runrecord.steps.base import StepKind


@dataclass(frozen=True)
class Ran:
    """What a step met in the replay: the brokers its roles resolved to there."""

    targets: dict[str, Any]

    @property
    def broker(self) -> int:
        return int(self.targets["broker"])


# (the step, what it met in the replay) -> shell lines
Exporter = Callable[[Any, Ran], list[str]]
E = TypeVar("E", bound=Exporter)

EXPORTERS: dict[type[StepKind], Exporter] = {}
# A step kind that cannot be exported, with why.
CANNOT: dict[type[StepKind], str] = {}


class ExportError(SetupError):
    """The schedule has a step, a mode or a release no script can reproduce."""


def exporter(kind: type[StepKind]) -> Callable[[E], E]:
    """Register the decorated function as the exporter of `kind`."""

    def register(fn: E) -> E:
        if kind in EXPORTERS:
            raise TypeError(f"two exporters for {kind.KIND!r}")
        EXPORTERS[kind] = fn
        return fn

    return register


def cannot_export(kind: type[StepKind], why: str) -> None:
    CANNOT[kind] = why


def lines_for(step: StepKind, ran: Ran) -> list[str]:
    fn = EXPORTERS.get(type(step))
    if fn is None:
        why = CANNOT.get(type(step), "no exporter is written for it yet")
        raise ExportError(f"a {step.KIND!r} step cannot be exported to a script: {why}")
    return fn(step, ran)
