"""Writes, as explore draws, breeds and shrinks them."""

from __future__ import annotations

import random
from dataclasses import replace

from runrecord.schedule import Cluster
from runrecord.steps.base import Role
from runrecord.steps.writes import Produce
from suites.explore.drawing.choices import COUNTS, smaller, sometimes
from suites.explore.drawing.options import DrawOptions
from suites.explore.drawing.registry import Change, Drawing, register

FILLERS = [300, 700]  # KB: what a produce step may write first, with slow links
FILLED = 0.3  # of the produce steps drawn with slow links, those that write a filler


def draw_produce(rng: random.Random, c: Cluster) -> Produce:
    to = Role.LEADER if rng.random() < 0.9 else rng.choice(c.replicas)  # a zombie, maybe
    return Produce(rng.choice(COUNTS), rng.choice(["all", "1"]), to)


def _draw(rng: random.Random, c: Cluster, options: DrawOptions) -> Produce:
    step = draw_produce(rng, c)
    if options.slow_links and sometimes(rng, FILLED):  # a filler first, for a slow link
        step = replace(step, filler=rng.choice(FILLERS))
    return step


def _reduce(step: Produce) -> list[Change]:
    options: list[Change] = [
        (replace(step, count=c), f"count {step.count} -> {c}") for c in smaller(step.count)
    ]
    if step.filler:
        options.append((replace(step, filler=None), "filler dropped"))
    return options


def _merge(a: Produce, b: Produce) -> Change | None:
    # b's filler would no longer go first; a's, if any, still does.
    if (a.acks, a.to) != (b.acks, b.to) or b.filler:
        return None
    return replace(a, count=a.count + b.count), "merge the produces"


def _mutate(step: Produce, op: str, rng: random.Random) -> Produce:
    if op == "recount":
        return replace(step, count=rng.choice(COUNTS))
    return replace(step, acks="1" if step.acks == "all" else "all")


register(
    Drawing(
        Produce,
        _draw,
        reduce=_reduce,  # type: ignore[arg-type]
        merge=_merge,  # type: ignore[arg-type]
        mutations=("recount", "acks"),
        mutate=_mutate,  # type: ignore[arg-type]
    )
)
