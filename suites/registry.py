"""Every scenario by id, for `logfork run <id>` and the pytest suites."""

from __future__ import annotations

from basics.errors import SetupError
from suites.scenario import Scenario
from suites.scenarios import (
    bootstrap_power_cut,
    clean_shutdown_marker,
    kafka_7128,
    kafka_16541,
    kafka_17754,
    kafka_20716,
    kip_101,
    kip_279_s1,
    kip_279_s3,
    kip_359,
    kip_595,
    kip_704,
    kip_903,
    kip_966,
    lagging_compacted,
    new_partition_outage,
    production_mix,
    smoke,
)

SCENARIOS: dict[str, Scenario] = {
    s.id: s
    for s in (
        smoke.SCENARIO,
        kip_101.S1_SCENARIO,
        kip_101.S2_SCENARIO,
        kip_279_s1.SHORT,
        kip_279_s1.EQUAL,
        kip_279_s1.LONG,
        kip_279_s3.SCENARIO,
        kip_704.SCENARIO,
        kip_966.SCENARIO,
        kip_966.ELR_SWITCHED_ON,
        kip_966.LAST_KNOWN_LEADER,
        kip_903.SCENARIO,
        kafka_7128.SCENARIO,
        kafka_16541.SCENARIO,
        kafka_17754.SCENARIO,
        kafka_17754.JAVA_CLIENT,
        kafka_20716.SCENARIO,
        clean_shutdown_marker.SCENARIO,
        new_partition_outage.SCENARIO,
        bootstrap_power_cut.SCENARIO,
        kip_359.SCENARIO,
        kip_595.FAILOVER,
        kip_595.MISMATCH,
        production_mix.SCENARIO,
        lagging_compacted.SCENARIO,
    )
}


def get(scenario_id: str) -> Scenario:
    try:
        return SCENARIOS[scenario_id]
    except KeyError:
        known = ", ".join(SCENARIOS)
        raise SetupError(f"There is no scenario '{scenario_id}'. Scenarios: {known}.") from None
