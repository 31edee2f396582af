"""Every scenario by id, for `logfork run <id>` and the pytest suites."""

from __future__ import annotations

from fixtures.errors import SetupError
from suites.scenario import Scenario
from suites.scenarios import smoke

SCENARIOS: dict[str, Scenario] = {s.id: s for s in (smoke.SCENARIO,)}


def get(scenario_id: str) -> Scenario:
    try:
        return SCENARIOS[scenario_id]
    except KeyError:
        known = ", ".join(SCENARIOS)
        raise SetupError(f"There is no scenario '{scenario_id}'. Scenarios: {known}.") from None
