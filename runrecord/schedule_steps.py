"""A schedule's steps: the fault vocabulary the scripted scenarios prove (suites/scenarios/),
and how the writer writes one (`step_to_dict`; runrecord.schedule_load reads them).

Produce to the current leader, hold a follower back, cut and heal links, expire a session,
elections, kill and restart, pause and resume, power loss, a move between log dirs or the
loss of one, a reassignment, wait, and a transactional producer's writes, commits and
aborts. Each step names its targets by role, resolved when its turn comes, or by broker id.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, ClassVar

from runrecord.power import CUT, POWER_MODELS
from runrecord.schedule_fields import int_in, is_int, is_number
from runrecord.typed import to_json

MAX_COUNT = 100_000  # records in one produce step
MAX_WAIT_SECONDS = 3600


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


# Every step kind is a frozen dataclass; `KIND` is its name in the file, and each field's
# metadata says how the loader checks it. Defaults mean the field may be left out.


_check_count = int_in(1, MAX_COUNT, f"must be a positive integer (at most {MAX_COUNT})")


def _check_acks(value: Any) -> tuple[Any, str | None]:
    if value in ("all", "1"):
        return value, None
    return None, 'must be "all" or "1"'


def _check_signal(value: Any) -> tuple[Any, str | None]:
    if value in ("SIGKILL", "SIGTERM"):
        return value, None
    return None, 'must be "SIGKILL" or "SIGTERM"'


def _check_flag(value: Any) -> tuple[Any, str | None]:
    if isinstance(value, bool):
        return value or None, None  # false is the default: written as nothing
    return None, "must be true or false"


def _check_lose(value: Any) -> tuple[Any, str | None]:
    if value is None or (is_int(value) and value >= 1):
        return value, None
    return None, "must be a positive integer (batches) or null (everything unflushed)"


def _check_power_model(value: Any) -> tuple[Any, str | None]:
    if value in POWER_MODELS:
        return value, None
    return None, f"must be one of {', '.join(POWER_MODELS)}"


def _check_seed(value: Any) -> tuple[Any, str | None]:
    if is_int(value) and value >= 0:
        return value, None
    return None, "must be a non-negative integer"


QUORUM_ACTIONS = ("kill", "restart", "pause", "resume", "isolate")
ACTIVE = "active"  # the quorum leader when the step runs


def _check_quorum_action(value: Any) -> tuple[Any, str | None]:
    if value in QUORUM_ACTIONS:
        return value, None
    return None, f"must be one of {', '.join(QUORUM_ACTIONS)}"


def _check_voter(value: Any) -> tuple[Any, str | None]:
    if value == ACTIVE or (is_int(value) and 1 <= value <= 3):
        return value, None
    return None, f'must be "{ACTIVE}" or a voter number (1 to 3)'


def _check_seconds(value: Any) -> tuple[Any, str | None]:
    if is_number(value) and 0 < value <= MAX_WAIT_SECONDS:
        return value, None
    return None, f"must be a number of seconds above 0 (at most {MAX_WAIT_SECONDS})"


MAX_FILLER_KB = 900  # under the default max.message.bytes (1 MB), with room for the batch
MAX_RATE = 100_000  # KB/s: beyond what the cluster's bridge is slowed by


_check_filler = int_in(1, MAX_FILLER_KB, f"must be a number of KB from 1 to {MAX_FILLER_KB}")


# Partitions one transactional write may span: the schedule's and every background one
# (runrecord.schedule_cluster.MAX_BACKGROUND_PARTITIONS); the loader checks the cluster has them.
MAX_TXN_PARTITIONS = 7


def _check_txn_partitions(value: Any) -> tuple[Any, str | None]:
    if is_int(value) and 1 <= value <= MAX_TXN_PARTITIONS:
        return (value if value > 1 else None), None  # 1 is the default: written as nothing
    return None, f"must be a number of partitions from 1 to {MAX_TXN_PARTITIONS}"


_check_rate = int_in(1, MAX_RATE, f"must be a rate in KB/s from 1 to {MAX_RATE}")


def _target(check: str = "target") -> Any:
    return {"check": check}


def _meta(check: Callable[[Any], tuple[Any, str | None]]) -> Any:
    return {"check": check}


@dataclass(frozen=True)
class Produce:
    """Write `count` records in one batch to `to` (the current leader), with `acks`. An
    acks=all write the ISR does not complete is answered with a timeout after
    REQUEST_TIMEOUT seconds (the producer's request.timeout.ms, as a replay sends it):
    the step takes that long, and sessions and checkpoints run on meanwhile."""

    REQUEST_TIMEOUT: ClassVar[float] = 8.0

    KIND: ClassVar[str] = "produce"
    count: int = field(metadata=_meta(_check_count))
    acks: str = field(default="all", metadata=_meta(_check_acks))
    to: Target = field(default=Role.LEADER, metadata=_target())
    # KB of one record written first, through the same broker, to the schedule's filler
    # topic: a fetch response that carries it ahead of the batch makes a slow link take
    # that long before the batch's bytes are read from the leader's log.
    filler: int | None = field(default=None, metadata=_meta(_check_filler))

    def describe(self) -> str:
        pad = f" after a {self.filler} KB filler" if self.filler else ""
        return f"produce {self.count} (acks={self.acks}) to {_name(self.to)}{pad}"


@dataclass(frozen=True)
class HoldBack:
    """Cut a follower in the ISR off from the leader; it stays in the ISR as long as
    replica.lag.time.max.ms allows (faults.replication.hold_back)."""

    KIND: ClassVar[str] = "hold-back"
    target: Target = field(default=Role.FOLLOWER_IN_ISR, metadata=_target())

    def describe(self) -> str:
        return f"hold back {_name(self.target)}"


@dataclass(frozen=True)
class HoldAlterPartition:
    """Hold a broker's AlterPartition requests (its ISR changes) on their way to the
    controller until a `heal` of every cut, while the rest of its traffic flows: the
    controller keeps the ISR it had, and the held request lands late, with what it said
    when it was sent (KIP-903's delayed AlterPartition)."""

    KIND: ClassVar[str] = "hold-alter-partition"
    target: Target = field(default=Role.LEADER, metadata=_target())

    def describe(self) -> str:
        return f"hold the AlterPartition requests of {_name(self.target)}"


@dataclass(frozen=True)
class Cut:
    """Cut the link between two nodes, both ways; `b` may be "quorum" (ZooKeeper or the
    KRaft controllers)."""

    KIND: ClassVar[str] = "cut"
    a: Target = field(metadata=_target())
    b: Endpoint = field(metadata=_target("endpoint"))

    def describe(self) -> str:
        return f"cut {_name(self.a)} from {_name(self.b)}"


@dataclass(frozen=True)
class Slow:
    """Shape what broker `a` sends to broker `b` to `rate` KB/s until a heal; nothing is
    lost, only late (faults.slow_link)."""

    KIND: ClassVar[str] = "slow"
    a: Target = field(metadata=_target())
    b: Target = field(metadata=_target())
    rate: int = field(metadata=_meta(_check_rate))

    def describe(self) -> str:
        return f"slow {_name(self.a)} to {_name(self.b)} to {self.rate} KB/s"


@dataclass(frozen=True)
class Heal:
    """Heal the link between `a` and `b`, or with neither, every cut (hold-backs, session
    cuts, slow links and held AlterPartition requests included)."""

    KIND: ClassVar[str] = "heal"
    a: Target | None = field(default=None, metadata=_target())
    b: Endpoint | None = field(default=None, metadata=_target("endpoint"))

    def describe(self) -> str:
        if self.a is None:
            return "heal every cut"
        return f"heal {_name(self.a)} - {_name(self.b)}"


@dataclass(frozen=True)
class ExpireSession:
    """Cut a broker off from ZooKeeper until its session expires (KRaft: until the
    controller fences it); it stays cut off, a zombie, until healed."""

    KIND: ClassVar[str] = "expire-session"
    target: Target = field(default=Role.LEADER, metadata=_target())

    def describe(self) -> str:
        return f"expire the session of {_name(self.target)}"


@dataclass(frozen=True)
class ElectPreferred:
    """Move leadership to the preferred replica (the first of the assignment)."""

    KIND: ClassVar[str] = "elect-preferred"

    def describe(self) -> str:
        return "preferred election"


@dataclass(frozen=True)
class ElectUnclean:
    """Elect an out-of-sync replica while no ISR member is alive. Only in schedules whose
    topic config enables unclean leader election."""

    KIND: ClassVar[str] = "elect-unclean"
    target: Target = field(default=Role.OUT_OF_SYNC, metadata=_target())

    def describe(self) -> str:
        return f"unclean election of {_name(self.target)}"


@dataclass(frozen=True)
class Kill:
    """SIGKILL (a crash) or SIGTERM (controlled shutdown) a broker; with `restart`, start it
    again at once (a fast restart), without waiting for the cluster to notice: back before
    its session ends, where the controller lets it register again."""

    KIND: ClassVar[str] = "kill"
    target: Target = field(default=Role.LEADER, metadata=_target())
    signal: str = field(default="SIGKILL", metadata=_meta(_check_signal))
    restart: bool | None = field(default=None, metadata=_meta(_check_flag))

    def describe(self) -> str:
        again = " and restart it at once" if self.restart else ""
        return f"{self.signal} {_name(self.target)}{again}"


@dataclass(frozen=True)
class Restart:
    """Start a stopped broker again on its own data."""

    KIND: ClassVar[str] = "restart"
    target: Target = field(default=Role.ANY_BROKER, metadata=_target())

    def describe(self) -> str:
        return f"restart {_name(self.target)}"


@dataclass(frozen=True)
class Pause:
    """Freeze a broker (SIGSTOP-like): no fetching, no serving, no session heartbeats."""

    KIND: ClassVar[str] = "pause"
    target: Target = field(default=Role.LEADER, metadata=_target())

    def describe(self) -> str:
        return f"pause {_name(self.target)}"


@dataclass(frozen=True)
class Resume:
    KIND: ClassVar[str] = "resume"
    target: Target = field(default=Role.ANY_BROKER, metadata=_target())

    def describe(self) -> str:
        return f"resume {_name(self.target)}"


@dataclass(frozen=True)
class PowerLoss:
    """Kill a broker and drop what its disk had not made durable. Under the "cut" model
    (null: the default) `lose` trailing batches (never below its flush point), or with null
    everything above the flush point; under a filesystem model (runrecord.power) whatever
    no fsync made durable, in every file, `seed` drawing what "torn" and "reorder" keep."""

    KIND: ClassVar[str] = "power-loss"
    target: Target = field(default=Role.LEADER, metadata=_target())
    lose: int | None = field(default=None, metadata=_meta(_check_lose))
    model: str | None = field(default=None, metadata=_meta(_check_power_model))
    seed: int | None = field(default=None, metadata=_meta(_check_seed))

    @property
    def power_model(self) -> str:
        return self.model or CUT

    def describe(self) -> str:
        if self.power_model != CUT:
            return f"power loss on {_name(self.target)} ({self.power_model}, seed {self.seed or 0})"
        lost = "its unflushed tail" if self.lose is None else f"up to {self.lose} batch(es)"
        return f"power loss on {_name(self.target)}, losing {lost}"


@dataclass(frozen=True)
class MoveDir:
    """Move the target's replica of the schedule's partition into its broker's other log
    dir (KIP-113), waiting for the swap; with `throttle`, the copy capped and not waited
    for. Needs two log dirs per broker (cluster.log_dirs)."""

    KIND: ClassVar[str] = "move-dir"
    target: Target = field(default=Role.FOLLOWER_IN_ISR, metadata=_target())
    throttle: bool | None = field(default=None, metadata=_meta(_check_flag))

    def describe(self) -> str:
        how = ", throttled, not waiting for it" if self.throttle else ""
        return f"move {_name(self.target)}'s replica to its other log dir{how}"


@dataclass(frozen=True)
class FailDir:
    """The log dir holding the target's replica of the schedule's partition fails (EIO)
    while its broker runs on (KIP-112, KIP-858). For the schedule the broker is stopped
    until a `restart` (or the heal) brings the disk back. Needs cluster.log_dirs 2."""

    KIND: ClassVar[str] = "fail-dir"
    target: Target = field(default=Role.FOLLOWER_IN_ISR, metadata=_target())

    def describe(self) -> str:
        return f"fail the log dir of {_name(self.target)}'s replica"


@dataclass(frozen=True)
class Reassign:
    """Reassign the schedule's partition (KIP-455; KRaft): `add` a broker that holds no
    replica (appended last), `remove` a replica, and or `prefer` a replica (moved first,
    the preferred leader). The controller adds the new replicas, which catch up from the
    leader and join the ISR; then it drops the removed ones (a removed leader resigns). The
    step waits for that where the new replicas can catch up, and otherwise leaves it in
    flight. With `throttle`, replication of the partition's replicas is throttled as an
    operator's reassignment is (`kafka-reassign-partitions --throttle`)."""

    KIND: ClassVar[str] = "reassign"
    add: Target | None = field(default=None, metadata=_target())
    remove: Target | None = field(default=None, metadata=_target())
    prefer: Target | None = field(default=None, metadata=_target())
    throttle: bool | None = field(default=None, metadata=_meta(_check_flag))

    def describe(self) -> str:
        parts = [f"{what} {_name(t)}" for what, t in
                 (("add", self.add), ("remove", self.remove), ("prefer", self.prefer))
                 if t is not None]  # fmt: skip
        how = ", throttled" if self.throttle else ""
        return f"reassign: {', '.join(parts)}{how}"


@dataclass(frozen=True)
class Quorum:
    """KRaft: a fault of the controller quorum. `action`: kill (SIGKILL), restart, pause,
    resume, or isolate (cut the voter off from the other voters until a `heal`); `voter`:
    "active" (the quorum leader when the step runs) or a voter by number (1 is c1)."""

    KIND: ClassVar[str] = "quorum"
    action: str = field(metadata=_meta(_check_quorum_action))
    voter: str | int = field(default=ACTIVE, metadata=_meta(_check_voter))

    def describe(self) -> str:
        who = "the active controller" if self.voter == ACTIVE else f"voter {self.voter}"
        return f"{self.action} {who}"


@dataclass(frozen=True)
class Wait:
    """Let time pass: followers may fall out of the ISR, paused brokers' sessions expire,
    and brokers checkpoint their high watermarks (every 5 s by default)."""

    KIND: ClassVar[str] = "wait"
    seconds: float = field(metadata=_meta(_check_seconds))

    def describe(self) -> str:
        return f"wait {self.seconds:g} s"


@dataclass(frozen=True)
class TxnWrite:
    """Write `count` records in one batch to the partition's leader within the schedule's
    transaction, beginning one if none is open (beginning is the client's own business:
    nothing reaches a broker until the first write). acks=all, as every transactional
    write is (KIP-98). With `partitions` n, the same write goes to partitions 0 to n - 1
    (the background partitions, whose leaders differ), one batch each: the transaction
    then spans them, and its coordinator must mark every one."""

    KIND: ClassVar[str] = "txn-write"
    count: int = field(metadata=_meta(_check_count))
    partitions: int | None = field(default=None, metadata=_meta(_check_txn_partitions))

    @property
    def spans(self) -> tuple[int, ...]:
        """The partitions it writes, the schedule's first."""
        return tuple(range(self.partitions or 1))

    def describe(self) -> str:
        spread = f" to each of partitions 0-{self.partitions - 1}" if self.partitions else ""
        return f"transactional write of {self.count}{spread}"


def _held(held: bool | None) -> str:
    return ", its first EndTxn held until a heal" if held else ""


@dataclass(frozen=True)
class TxnCommit:
    """Commit the open transaction: its coordinator writes a COMMIT marker to the partition
    (an ABORT marker where one of its writes failed: the producer can only abort then).
    With `held`, the producer's first EndTxn is held on the wire; its retry ends the
    transaction, and the held one arrives late, at the next heal of every cut
    (KAFKA-17754)."""

    KIND: ClassVar[str] = "txn-commit"
    held: bool | None = field(default=None, metadata=_meta(_check_flag))

    def describe(self) -> str:
        return "commit the transaction" + _held(self.held)


@dataclass(frozen=True)
class TxnAbort:
    """Abort the open transaction: its coordinator writes an ABORT marker to the partition.
    `held` as for a commit."""

    KIND: ClassVar[str] = "txn-abort"
    held: bool | None = field(default=None, metadata=_meta(_check_flag))

    def describe(self) -> str:
        return "abort the transaction" + _held(self.held)


TxnEnd = TxnCommit | TxnAbort

Step = (
    Produce
    | HoldBack
    | HoldAlterPartition
    | Cut
    | Slow
    | Heal
    | ExpireSession
    | ElectPreferred
    | ElectUnclean
    | Kill
    | Restart
    | Pause
    | Resume
    | PowerLoss
    | MoveDir
    | FailDir
    | Reassign
    | Quorum
    | Wait
    | TxnWrite
    | TxnCommit
    | TxnAbort
)

# Every kind once, in the order of the union: the file name of a kind to its class.
STEP_KINDS: dict[str, type] = {cls.KIND: cls for cls in typing.get_args(Step)}


_ROLE_NAMES = {
    Role.LEADER: "the leader",
    Role.FOLLOWER_IN_ISR: "a follower in the ISR",
    Role.OUT_OF_SYNC: "an out-of-sync replica",
    Role.CONTROLLER: "the controller",
    Role.ANY_BROKER: "any broker",
    Role.COORDINATOR: "the transaction coordinator",
}


def _name(target: Endpoint | None) -> str:
    if isinstance(target, bool) or target is None:
        return str(target)
    if isinstance(target, int):
        return f"broker {target}"
    if target == QUORUM:
        return "the quorum"
    return _ROLE_NAMES[Role(target)]


def names_coordinator(step: Step) -> bool:
    return any(target == Role.COORDINATOR for _, target in step_targets(step))


def step_targets(step: Step) -> list[tuple[str, Endpoint]]:
    """(field name, target) of every target a step names."""
    out = []
    for f in fields(step):
        if f.metadata.get("check") in ("target", "endpoint"):
            value = getattr(step, f.name)
            if value is not None:
                out.append((f.name, value))
    return out


# --------------------------------------------------------------------------------------
# Writing (runrecord.schedule_load reads)


def step_to_dict(step: Step) -> dict[str, Any]:
    """A step as the file states it: its kind, then every field that is set (roles by name)."""
    return {"kind": step.KIND, **{k: v for k, v in to_json(step).items() if v is not None}}
