"""Elections in a script: Kafka's kafka-leader-election.sh (KIP-460), preferred or unclean,
for partition 0, awaited until the metadata log names the broker the replay elected."""

from __future__ import annotations

from runrecord.steps.elections import ElectPreferred, ElectUnclean
from suites.explore.export.registry import Ran, exporter


def _elect(kind: str, leader: int) -> list[str]:
    # Through brokers that reach the controllers: one cut off from them holds the request
    # until the tool gives up (kafka-leader-election.sh's "Timeout waiting for election
    # results"); done once the metadata log names the leader the replay elected.
    return [
        f'tool "$ELECT" --bootstrap-server "$(quorum_boot)" --election-type {kind} '
        '--topic "$TOPIC" --partition 0 || true  # "no election needed" exits non-zero too',
        f'wait_until "broker {leader} elected leader of partition 0" 60 leads {leader}',
    ]


@exporter(ElectPreferred)
def preferred(step: ElectPreferred, ran: Ran) -> list[str]:
    return _elect("PREFERRED", int(ran.targets["leader"]))


@exporter(ElectUnclean)
def unclean(step: ElectUnclean, ran: Ran) -> list[str]:
    return _elect("UNCLEAN", int(ran.targets["leader"]))
