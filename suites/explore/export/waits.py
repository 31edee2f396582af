"""A schedule's own wait: the one sleep a script has, because the schedule asks for time to
pass (a lock, a session or a timeout to run out), not for a condition."""

from __future__ import annotations

from runrecord.steps.waits import Wait
from suites.explore.export.registry import Ran, exporter


@exporter(Wait)
def wait(step: Wait, ran: Ran) -> list[str]:
    return [f"sleep {step.seconds:g}  # the schedule's own wait"]
