"""Time passing, on real brokers: followers may fall out of the ISR, paused brokers'
sessions expire, brokers checkpoint their high watermarks."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from runrecord.steps.waits import Wait
from suites.explore.live.registry import action

if TYPE_CHECKING:
    from suites.explore.live.context import Live


@action(Wait)
def wait(live: Live, step: Wait) -> tuple[dict[str, Any], float]:
    time.sleep(step.seconds)  # the step is time passing: nothing to wait for but it
    return {}, float(step.seconds)
