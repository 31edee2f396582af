"""What each family of step kinds tells the drawing, the breeding and the shrinking about
its kinds (a `Drawing` per kind) and the moves it draws as one (a `Move`). Families
register here; the drawing core (generate, guide, shrink) knows no kind by name.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from runrecord.schedule import Cluster
from runrecord.steps.base import Step, StepKind
from suites.explore.drawing.options import DrawOptions

# A change to a step the shrinker may try, in words: (the new step, what changed).
Change = tuple[Step, str]


def _never(_options: DrawOptions) -> bool:
    return True


def _nothing(_step: Step) -> list[Change]:
    return []


@dataclass(frozen=True)
class Drawing:
    """One step kind, as explore draws, breeds and shrinks it.

    - `draw`: a step of the kind for the cluster, with what the options add to it;
    - `allowed`: whether the options draw the kind at all;
    - `reduce`: smaller versions of a step (fewer records, no throttle, ...), in order;
    - `simplify`: simpler versions of a step beside simpler targets (SIGTERM to SIGKILL);
    - `merge`: one step standing for two adjacent steps of the kind, or None;
    - `widen`: the step made to cover more (a heal of one link to a heal of every cut);
    - `mutations`: the guide's mutations that apply to a step of the kind, by name, and
      `mutate` makes one.
    """

    kind: type[StepKind]
    draw: Callable[[random.Random, Cluster, DrawOptions], Step]
    allowed: Callable[[DrawOptions], bool] = _never
    reduce: Callable[[Step], list[Change]] = _nothing
    simplify: Callable[[Step], list[Change]] = _nothing
    merge: Callable[[Step, Step], Change | None] | None = None
    widen: Callable[[Step], Change | None] | None = None
    mutations: tuple[str, ...] = ()
    mutate: Callable[[Step, str, random.Random], Step] | None = None


@dataclass(frozen=True)
class Move:
    """Steps that operators and failures produce together, drawn as one: `draw` makes them,
    and `pin` names in a later step the broker an earlier step of the move resolved to (its
    targets, as the model ran it), so that the move stays one move whatever roles do."""

    name: str
    draw: Callable[[random.Random, Cluster], list[Step]]
    pin: Callable[[Step, dict], Step]
    allowed: Callable[[DrawOptions], bool] = _never


DRAWINGS: dict[str, Drawing] = {}  # by kind name
MOVES: dict[str, Move] = {}  # by move name


def register(*drawings: Drawing) -> None:
    for d in drawings:
        if d.kind.KIND in DRAWINGS:
            raise TypeError(f"step kind {d.kind.KIND!r} registered twice")
        DRAWINGS[d.kind.KIND] = d


def register_move(move: Move) -> None:
    if move.name in MOVES:
        raise TypeError(f"move {move.name!r} registered twice")
    MOVES[move.name] = move


def drawing_of(step: Step) -> Drawing:
    return DRAWINGS[step.KIND]
