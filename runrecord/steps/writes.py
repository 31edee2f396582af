"""Writes to the schedule's partition: a batch of records, through the leader or any replica
(a zombie, maybe), with an optional filler ahead of it for a slow link to hold back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from runrecord.schedule_fields import int_in
from runrecord.steps.base import (
    Role,
    StepKind,
    Target,
    check_count,
    checked,
    role_name,
    target_field,
)

if TYPE_CHECKING:
    pass

MAX_FILLER_KB = 900  # under the default max.message.bytes (1 MB), with room for the batch


def _check_acks(value: Any) -> tuple[Any, str | None]:
    if value in ("all", "1"):
        return value, None
    return None, 'must be "all" or "1"'


_check_filler = int_in(1, MAX_FILLER_KB, f"must be a number of KB from 1 to {MAX_FILLER_KB}")


# An acks=all write the ISR does not complete is answered with a timeout after this long:
# the producer's request.timeout.ms, as a replay sends it.
REQUEST_TIMEOUT = 8.0


@dataclass(frozen=True)
class Produce(StepKind):
    """Write `count` records in one batch to `to` (the current leader), with `acks`. An
    acks=all write the ISR does not complete is answered with a timeout after
    REQUEST_TIMEOUT seconds (the producer's request.timeout.ms, as a replay sends it):
    the step takes that long, and sessions and checkpoints run on meanwhile."""

    REQUEST_TIMEOUT: ClassVar[float] = REQUEST_TIMEOUT

    KIND: ClassVar[str] = "produce"
    count: int = field(metadata=checked(check_count))
    acks: str = field(default="all", metadata=checked(_check_acks))
    to: Target = field(default=Role.LEADER, metadata=target_field())
    # KB of one record written first, through the same broker, to the schedule's filler
    # topic: a fetch response that carries it ahead of the batch makes a slow link take
    # that long before the batch's bytes are read from the leader's log.
    filler: int | None = field(default=None, metadata=checked(_check_filler))

    def describe(self) -> str:
        pad = f" after a {self.filler} KB filler" if self.filler else ""
        return f"produce {self.count} (acks={self.acks}) to {role_name(self.to)}{pad}"
