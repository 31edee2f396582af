"""Writes in a script: the release's KafkaProducer in jshell (lib.sh's produce), one batch
of COUNT records to partition 0 with the step's acks, through the broker the step wrote
through in the replay; its filler first, one record of that many KB on the filler topic,
as logfork's (suites.explore.live.writes)."""

from __future__ import annotations

from runrecord.steps.writes import Produce
from suites.explore.export.registry import Ran, exporter


@exporter(Produce, needs=("writer",))
def produce(step: Produce, ran: Ran) -> list[str]:
    return [f"produce {step.acks} {step.count} {step.filler or 0} {int(ran.targets['to'])}"]
