"""Writes in a script: the release's KafkaProducer in jshell (lib.sh's produce), COUNT
records to partition 0 with the step's acks, each awaited; a filler pads each value to its
size, as logfork's does."""

from __future__ import annotations

from runrecord.steps.writes import Produce
from suites.explore.export.registry import Ran, exporter


@exporter(Produce)
def produce(step: Produce, ran: Ran) -> list[str]:
    return [f"produce {step.acks} {step.count} {step.filler or 0}"]
