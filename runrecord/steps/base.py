"""The schedule language's shared words: the roles a step names its targets by, how a step's
fields are checked as a file is loaded, and `StepKind`, the base of every step kind.

Every step kind is a frozen dataclass deriving from `StepKind`, in its family's module
(runrecord.steps): `KIND` is its name in the file, and each field's metadata says how the
loader checks it; defaults mean the field may be left out. Deriving registers the kind
(`STEP_KINDS`), so nothing outside its module needs to know it to load, write or describe
one; what a step needs of the cluster it says itself (`StepKind.problems`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import fields
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar

from runrecord.schedule_fields import int_in, is_int
from runrecord.typed import to_json

if TYPE_CHECKING:
    from runrecord.schedule_cluster import Cluster

MAX_COUNT = 100_000  # records in one write step


class Role(StrEnum):
    """A target named by what it is when the step's turn comes, not by who it was when the
    schedule was written. Several brokers may fit; the step takes the lowest broker id among
    those that also satisfy its precondition."""

    LEADER = "leader"  # the partition's leader as the controller has it
    FOLLOWER_IN_ISR = "follower-in-isr"  # a replica in the ISR other than the leader
    OUT_OF_SYNC = "out-of-sync-replica"  # a replica outside the ISR
    CONTROLLER = "controller"  # ZooKeeper mode: the controller broker; KRaft: the quorum
    ANY_BROKER = "any-broker"  # any broker of the cluster, replica or not
    # The transaction coordinator: the leader of its log's partition (__transaction_state-0)
    # when the step runs. The model does not follow that log: a run tells it.
    COORDINATOR = "coordinator"


# The other end of a cut that is not a broker: ZooKeeper in ZooKeeper mode, the controller
# quorum in KRaft mode. A broker cut from it loses its session (is fenced) once the session
# timeout passes.
QUORUM = "quorum"

Target = Role | int
Endpoint = Role | int | str  # a Target, or QUORUM

# kind -> its class, every kind once, in the order their families define them.
STEP_KINDS: dict[str, type[StepKind]] = {}


class StepKind:
    """What every step is. A subclass that sets `KIND` is a step kind, registered by it."""

    KIND: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "KIND" in cls.__dict__:
            if cls.KIND in STEP_KINDS:
                raise TypeError(f"two step kinds named {cls.KIND!r}")
            STEP_KINDS[cls.KIND] = cls

    def describe(self) -> str:
        raise NotImplementedError(type(self).__name__)

    def problems(self, cluster: Cluster | None) -> Iterator[tuple[str, str]]:
        """What is wrong with the step in this cluster (None: in none yet): (the field, ""
        for the step as a whole, and the message). Its fields are each valid by then."""
        return iter(())

    @property
    def crashes(self) -> bool:
        """Its broker stops without a shutdown, checkpointing nothing (a SIGKILL, a power
        loss): where the model asks whether its high watermark checkpoint had caught up."""
        return False

    @property
    def transactional(self) -> bool:
        """It is the schedule's transactional producer's, and talks to its coordinator."""
        return False

    @property
    def needs_disks(self) -> bool:
        """It needs the crash-simulating filesystems under the log dirs."""
        return False

    @property
    def leaves_behind(self) -> str | None:
        """What it leaves on a cluster that another schedule must not inherit (a throttle, a
        copy in flight), in words; None when the cluster can serve the next one."""
        return None


Step = StepKind


# -- how the loader checks a field: each a function of the raw value, returning the value
# to keep and a message when it is wrong.


def check_flag(value: Any) -> tuple[Any, str | None]:
    if isinstance(value, bool):
        return value or None, None  # false is the default: written as nothing
    return None, "must be true or false"


def check_seed(value: Any) -> tuple[Any, str | None]:
    if is_int(value) and value >= 0:
        return value, None
    return None, "must be a non-negative integer"


check_count = int_in(1, MAX_COUNT, f"must be a positive integer (at most {MAX_COUNT})")


def target_field(check: str = "target") -> Any:
    """The metadata of a field naming a broker by id or role ("endpoint": or the quorum)."""
    return {"check": check}


def checked(check: Callable[[Any], tuple[Any, str | None]]) -> Any:
    """The metadata of a field the loader checks with `check`."""
    return {"check": check}


_ROLE_NAMES = {
    Role.LEADER: "the leader",
    Role.FOLLOWER_IN_ISR: "a follower in the ISR",
    Role.OUT_OF_SYNC: "an out-of-sync replica",
    Role.CONTROLLER: "the controller",
    Role.ANY_BROKER: "any broker",
    Role.COORDINATOR: "the transaction coordinator",
}


def role_name(target: Endpoint | None) -> str:
    """A target in words."""
    if isinstance(target, bool) or target is None:
        return str(target)
    if isinstance(target, int):
        return f"broker {target}"
    if target == QUORUM:
        return "the quorum"
    return _ROLE_NAMES[Role(target)]


def step_targets(step: Step) -> list[tuple[str, Endpoint]]:
    """(field name, target) of every target a step names."""
    out = []
    for f in fields(step):  # type: ignore[arg-type]
        if f.metadata.get("check") in ("target", "endpoint"):
            value = getattr(step, f.name)
            if value is not None:
                out.append((f.name, value))
    return out


def names_coordinator(step: Step) -> bool:
    return any(t == Role.COORDINATOR for _, t in step_targets(step))


def step_to_dict(step: Step) -> dict[str, Any]:
    """A step as the file states it: its kind, then every field that is set (roles by name)."""
    return {"kind": step.KIND, **{k: v for k, v in to_json(step).items() if v is not None}}
