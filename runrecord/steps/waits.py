"""Time passing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from runrecord.schedule_fields import is_number
from runrecord.steps.base import (
    StepKind,
    checked,
)

if TYPE_CHECKING:
    pass

MAX_WAIT_SECONDS = 3600


def _check_seconds(value: Any) -> tuple[Any, str | None]:
    if is_number(value) and 0 < value <= MAX_WAIT_SECONDS:
        return value, None
    return None, f"must be a number of seconds above 0 (at most {MAX_WAIT_SECONDS})"


@dataclass(frozen=True)
class Wait(StepKind):
    """Let time pass: followers may fall out of the ISR, paused brokers' sessions expire,
    and brokers checkpoint their high watermarks (every 5 s by default)."""

    KIND: ClassVar[str] = "wait"
    seconds: float = field(metadata=checked(_check_seconds))

    def describe(self) -> str:
        return f"wait {self.seconds:g} s"
