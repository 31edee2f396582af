"""The clusters an explore runs its schedules on: how many at once, and their benches.
One rule for `logfork explore` and for each shard of `explore --spark-master`, which chooses
on its own worker's machine."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from fixtures.capacity import default_parallel
from runrecord.power import CUT
from suites.explore.drawing.generate import DrawOptions
from suites.explore.engine.bench import Bench
from suites.explore.engine.explorer import ExploreOptions


def cluster_count(
    options: ExploreOptions, drawing: DrawOptions, schedules: int | None, say: Callable[[str], None]
) -> int:
    """--parallel, else the machine's default (printed); never more than the schedules."""
    clusters = options.parallel
    if clusters is None:
        jvms = drawing.brokers + (drawing.controllers if drawing.mode == "kraft" else 1)
        choice = default_parallel(jvms)
        say(choice.describe())
        clusters = choice.clusters
    return min(clusters, schedules) if schedules is not None else clusters


def open_benches(
    stack: contextlib.ExitStack, options: ExploreOptions, out: Path, count: int
) -> list[Bench]:
    """`count` benches, closed with `stack`; crash-simulating disks where a power model
    other than the cut may be drawn, or a log dir may fail (--jbod)."""
    disks = options.jbod or any(m != CUT for m in options.power_models)
    return [
        stack.enter_context(
            Bench(
                options.kafka, out, base_image=options.base_image, reuse=options.reuse, disks=disks
            )
        )
        for _ in range(count)
    ]
