"""A whole schedule on the simulated cluster: `simulate` runs its steps, heals and predicts;
`checkpoint_variants` predicts again for each set of its crashes that may have come after a
high watermark checkpoint its steps outran."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Iterator

from basics.protocol import Protocol
from checkers.simulate.prediction import Prediction
from checkers.simulate.simulator import Simulator
from checkers.simulate.state import SimOptions, SimulationError
from runrecord.schedule import Cluster, Schedule
from runrecord.steps.base import Step


def simulate(
    schedule: Schedule | Iterable[Step],
    protocol: Protocol | str,
    *,
    cluster: Cluster | None = None,
    options: SimOptions | None = None,
) -> Prediction:
    """Run every step of a schedule, heal, converge, and predict the outcome."""
    if isinstance(schedule, Schedule):
        cluster, steps = schedule.cluster, list(schedule.steps)
    else:
        steps = list(schedule)
        if cluster is None:
            raise SimulationError("steps without a schedule need a cluster")
    sim = Simulator(cluster, protocol, options)
    for step in steps:
        sim.apply(step)
    return sim.finish()


# Crashes varied by `checkpoint_variants`: 2**n simulations; a schedule with more crashes
# has its first ones varied.
MAX_VARIED_CRASHES = 6


def checkpoint_variants(
    schedule: Schedule, protocol: Protocol | str, *, options: SimOptions | None = None
) -> Iterator[tuple[tuple[int, ...], Prediction]]:
    """The schedule simulated again for each non-empty set of its crashes (SIGKILL, power
    loss) that come with a high watermark checkpoint caught up with the high watermark, as
    when the steps before a crash took longer than replica.high.watermark.checkpoint.
    interval.ms. Those are outcomes Kafka may reach as well as `simulate`'s: which one it
    reaches is timing the schedule does not control. A crash whose checkpoint a run read
    on disk (`SimOptions.hw_checkpoint_at`) is not varied: the run told which it was."""
    base = options or SimOptions()
    told = {i for i, _, _ in base.hw_checkpoint_at}
    crashes = [i for i, step in enumerate(schedule.steps) if i not in told and step.crashes][
        :MAX_VARIED_CRASHES
    ]
    for size in range(1, len(crashes) + 1):
        for chosen in itertools.combinations(crashes, size):
            varied = dataclasses.replace(base, checkpoint_before=frozenset(chosen))
            yield chosen, simulate(schedule, protocol, options=varied)
