"""A broker's process and machine: killed (a crash, or a controlled shutdown), restarted,
paused and resumed, and its power lost, alone or with every other broker's (an outage)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from runrecord.power import CUT, FS_MODELS, POWER_MODELS, UNSYNCED
from runrecord.schedule_fields import is_int
from runrecord.steps.base import (
    Role,
    StepKind,
    Target,
    check_flag,
    check_seed,
    checked,
    role_name,
    target_field,
)

if TYPE_CHECKING:
    from runrecord.schedule_cluster import Cluster


def _check_signal(value: Any) -> tuple[Any, str | None]:
    if value in ("SIGKILL", "SIGTERM"):
        return value, None
    return None, 'must be "SIGKILL" or "SIGTERM"'


def _check_lose(value: Any) -> tuple[Any, str | None]:
    if value is None or (is_int(value) and value >= 1):
        return value, None
    return None, "must be a positive integer (batches) or null (everything unflushed)"


def _check_power_model(value: Any) -> tuple[Any, str | None]:
    if value in POWER_MODELS:
        return value, None
    return None, f"must be one of {', '.join(POWER_MODELS)}"


def _check_fs_model(value: Any) -> tuple[Any, str | None]:
    if value in FS_MODELS:
        return value, None
    return None, f"must be one of {', '.join(FS_MODELS)} (a filesystem model)"


@dataclass(frozen=True)
class Kill(StepKind):
    """SIGKILL (a crash) or SIGTERM (controlled shutdown) a broker; with `restart`, start it
    again at once (a fast restart), without waiting for the cluster to notice: back before
    its session ends, where the controller lets it register again."""

    KIND: ClassVar[str] = "kill"
    target: Target = field(default=Role.LEADER, metadata=target_field())
    signal: str = field(default="SIGKILL", metadata=checked(_check_signal))
    restart: bool | None = field(default=None, metadata=checked(check_flag))

    @property
    def crashes(self) -> bool:
        return self.signal == "SIGKILL"

    def describe(self) -> str:
        again = " and restart it at once" if self.restart else ""
        return f"{self.signal} {role_name(self.target)}{again}"


@dataclass(frozen=True)
class Restart(StepKind):
    """Start a stopped broker again on its own data."""

    KIND: ClassVar[str] = "restart"
    target: Target = field(default=Role.ANY_BROKER, metadata=target_field())

    def describe(self) -> str:
        return f"restart {role_name(self.target)}"


@dataclass(frozen=True)
class Pause(StepKind):
    """Freeze a broker (SIGSTOP-like): no fetching, no serving, no session heartbeats."""

    KIND: ClassVar[str] = "pause"
    target: Target = field(default=Role.LEADER, metadata=target_field())

    def describe(self) -> str:
        return f"pause {role_name(self.target)}"


@dataclass(frozen=True)
class Resume(StepKind):
    KIND: ClassVar[str] = "resume"
    target: Target = field(default=Role.ANY_BROKER, metadata=target_field())

    def describe(self) -> str:
        return f"resume {role_name(self.target)}"


@dataclass(frozen=True)
class PowerLoss(StepKind):
    """Kill a broker and drop what its disk had not made durable. Under the "cut" model
    (null: the default) `lose` trailing batches (never below its flush point), or with null
    everything above the flush point; under a filesystem model (runrecord.power) whatever
    no fsync made durable, in every file, `seed` drawing what "torn", "reorder" and
    "ordered" keep."""

    KIND: ClassVar[str] = "power-loss"
    target: Target = field(default=Role.LEADER, metadata=target_field())
    lose: int | None = field(default=None, metadata=checked(_check_lose))
    model: str | None = field(default=None, metadata=checked(_check_power_model))
    seed: int | None = field(default=None, metadata=checked(check_seed))

    @property
    def power_model(self) -> str:
        return self.model or CUT

    @property
    def crashes(self) -> bool:
        return True

    @property
    def needs_disks(self) -> bool:
        return self.power_model != CUT

    def problems(self, cluster: Cluster | None) -> Iterator[tuple[str, str]]:
        if self.power_model != CUT and self.lose is not None:
            yield "lose", f"the {self.model} model decides what is lost: no lose"

    def describe(self) -> str:
        if self.power_model != CUT:
            how = f"{self.power_model}, seed {self.seed or 0}"
            return f"power loss on {role_name(self.target)} ({how})"
        lost = "its unflushed tail" if self.lose is None else f"up to {self.lose} batch(es)"
        return f"power loss on {role_name(self.target)}, losing {lost}"


@dataclass(frozen=True)
class Outage(StepKind):
    """Every running broker loses power at once (a rack's or a datacenter's power cut): all
    frozen first, so that none writes or fsyncs after another lost power, then each disk
    rolled back under the filesystem model (broker i's seed is `seed` + 100 i) and each
    broker killed. KRaft's controllers, on their own nodes, keep their power. Only a
    filesystem model can say what several disks lose together: the cut model's batches
    are one broker's."""

    KIND: ClassVar[str] = "outage"
    model: str = field(default=UNSYNCED, metadata=checked(_check_fs_model))
    seed: int | None = field(default=None, metadata=checked(check_seed))

    @property
    def crashes(self) -> bool:
        return True

    @property
    def needs_disks(self) -> bool:
        return True

    def describe(self) -> str:
        return f"power cut of every running broker at once ({self.model}, seed {self.seed or 0})"
