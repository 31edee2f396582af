"""The exporter of each step kind: the shell lines that do what the step did in the replay,
to the brokers its roles resolved to there. A step kind with no exporter cannot be
exported (a power loss needs logfork's crash filesystem), and says so."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from basics.errors import SetupError
from runrecord.steps.base import QUORUM, StepKind


@dataclass(frozen=True)
class Ran:
    """What a step met in the replay: the brokers its roles resolved to there."""

    targets: dict[str, Any]

    @property
    def broker(self) -> int:
        return int(self.targets["broker"])

    def node(self, key: str) -> str:
        """The script's name for the node a target resolved to: a broker's by its id, the
        controllers together for "quorum"."""
        value = self.targets[key]
        return "quorum" if value == QUORUM else f"${{NODE_OF[{int(value)}]}}"


# (the step, what it met in the replay) -> shell lines
Exporter = Callable[[Any, Ran], list[str]]
E = TypeVar("E", bound=Exporter)

EXPORTERS: dict[type[StepKind], Exporter] = {}
# A step kind that cannot be exported, with why.
CANNOT: dict[type[StepKind], str] = {}
# What a step kind's lines need the script to set up first: "network", each node in a
# network namespace of its own (lib.sh's make_network), for lines that cut or shape links;
# "writer", the shell whose producers plain writes go through (lib.sh's start_writer).
NEEDS: dict[type[StepKind], frozenset[str]] = {}


class ExportError(SetupError):
    """The schedule has a step, a mode or a release no script can reproduce."""


def exporter(kind: type[StepKind], *, needs: tuple[str, ...] = ()) -> Callable[[E], E]:
    """Register the decorated function as the exporter of `kind`; `needs`: what its lines
    need set up (NEEDS)."""

    def register(fn: E) -> E:
        if kind in EXPORTERS:
            raise TypeError(f"two exporters for {kind.KIND!r}")
        EXPORTERS[kind] = fn
        NEEDS[kind] = frozenset(needs)
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
