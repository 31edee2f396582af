"""Elections in a script: Kafka's kafka-leader-election.sh (KIP-460), preferred or unclean,
for partition 0, asked again through brokers that reach the controllers until the metadata
log names the broker the replay elected (lib.sh's elect)."""

from __future__ import annotations

from runrecord.steps.elections import ElectPreferred, ElectUnclean
from suites.explore.export.registry import Ran, exporter


def _elect(kind: str, leader: int) -> list[str]:
    return [f"elect {kind} {leader}"]


@exporter(ElectPreferred)
def preferred(step: ElectPreferred, ran: Ran) -> list[str]:
    return _elect("PREFERRED", int(ran.targets["leader"]))


@exporter(ElectUnclean)
def unclean(step: ElectUnclean, ran: Ran) -> list[str]:
    return _elect("UNCLEAN", int(ran.targets["leader"]))
