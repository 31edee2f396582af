"""Elections in a script: Kafka's kafka-leader-election.sh (KIP-460), preferred or unclean,
for partition 0; the tool answers once the controller has elected."""

from __future__ import annotations

from runrecord.steps.elections import ElectPreferred, ElectUnclean
from suites.explore.export.registry import Ran, exporter


def _elect(kind: str) -> list[str]:
    return [
        f'tool "$ELECT" --bootstrap-server "$BOOT" --election-type {kind} --topic "$TOPIC" '
        '--partition 0 || true  # "no election needed" exits non-zero too',
        'wait_until "partition 0 has a leader" 60 has_leader',
    ]


@exporter(ElectPreferred)
def preferred(step: ElectPreferred, ran: Ran) -> list[str]:
    return _elect("PREFERRED")


@exporter(ElectUnclean)
def unclean(step: ElectUnclean, ran: Ran) -> list[str]:
    return _elect("UNCLEAN")
