"""Schedules: a fault schedule as data, its JSON file format, loader and writer.

A schedule is what `logfork replay` runs and `logfork explore` draws, simulates and shrinks:
a format version, the cluster shape (release-independent: the release comes from the
command line), a seed, and a list of steps. Steps use the vocabulary the scripted scenarios
prove (suites/scenarios/): produce to the current leader, hold a follower back, cut and heal
links, expire a session, elections, kill and restart, pause and resume, power loss, wait.
Each step names its targets by role, resolved when its turn comes, or by broker id. The
file format is documented in docs/schedules.md.

Loading never stops at the first problem: every bad field is reported with its path
(``steps[3].count: must be a positive integer``) and the file it came from.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar

from fixtures.errors import LogforkError

FORMAT = 1  # the version this logfork reads and writes

MODES = ("zk", "kraft")
MAX_BROKERS = 9
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


# The other end of a cut that is not a broker: ZooKeeper in ZooKeeper mode, the controller
# quorum in KRaft mode. A broker cut from it loses its session (is fenced) once the session
# timeout passes.
QUORUM = "quorum"

Target = Role | int
Endpoint = Role | int | str  # a Target, or QUORUM


class ScheduleError(LogforkError):
    """A schedule file or object that cannot be used; every problem names its field."""

    def __init__(self, problems: list[tuple[str, str]], source: str | None = None) -> None:
        self.problems = problems
        self.source = source
        where = f"{source}: " if source else ""
        lines = [
            f"{where}{path}: {message}" if path else f"{where}{message}"
            for path, message in problems
        ]
        head = "bad schedule" + (f" {source}" if source else "")
        super().__init__(lines[0] if len(lines) == 1 else f"{head}:\n  " + "\n  ".join(lines))


# --------------------------------------------------------------------------------------
# Cluster shape


@dataclass(frozen=True)
class TopicConfig:
    """The partition's topic configs (Kafka's names in the file)."""

    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    flush_messages: int | None = None  # None: Kafka's default, never flush on count


@dataclass(frozen=True)
class BrokerConfig:
    """Broker configs the protocol model depends on. None: the mode's default."""

    replica_lag_time_max_ms: int | None = None
    session_timeout_ms: int | None = None  # zookeeper.session.timeout.ms / broker.session...
    hw_checkpoint_interval_ms: int | None = None  # replica.high.watermark.checkpoint...


# Defaults are written out in every file the writer produces, so a schedule never depends on
# the release's defaults (several changed in 2.5, KIP-537).
DEFAULT_LAG_MS = 10000  # replica.lag.time.max.ms before 2.5
DEFAULT_SESSION_MS = {"zk": 6000, "kraft": 9000}  # zookeeper... before 2.5; broker.session...
DEFAULT_CHECKPOINT_MS = 5000  # replica.high.watermark.checkpoint.interval.ms


def session_key(mode: str) -> str:
    return "broker.session.timeout.ms" if mode == "kraft" else "zookeeper.session.timeout.ms"


@dataclass(frozen=True)
class Cluster:
    """The cluster and its one partition, whatever the release."""

    mode: str = "zk"
    brokers: int = 3
    replication_factor: int = 2
    replicas: tuple[int, ...] = ()  # assignment order, the first is preferred; () = 1..RF
    controller: int | None = None  # ZooKeeper mode: the broker kept as controller
    controllers: int = 1  # KRaft mode: controller nodes (dedicated)
    topic_config: TopicConfig = field(default_factory=TopicConfig)
    broker_config: BrokerConfig = field(default_factory=BrokerConfig)
    node_config: dict[int, BrokerConfig] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.replicas:
            object.__setattr__(self, "replicas", tuple(range(1, self.replication_factor + 1)))
        # The cluster-wide settings are always explicit (the mode's defaults filled in), so
        # that a schedule built in code equals the same schedule read back from its file.
        b = self.broker_config
        full = BrokerConfig(
            b.replica_lag_time_max_ms or DEFAULT_LAG_MS,
            b.session_timeout_ms or DEFAULT_SESSION_MS.get(self.mode, 6000),
            b.hw_checkpoint_interval_ms or DEFAULT_CHECKPOINT_MS,
        )
        object.__setattr__(self, "broker_config", full)

    @property
    def broker_ids(self) -> list[int]:
        return list(range(1, self.brokers + 1))

    def _broker(self, broker: int, name: str, default: int) -> int:
        node = self.node_config.get(broker)
        for value in (getattr(node, name, None), getattr(self.broker_config, name)):
            if value is not None:
                return value
        return default

    def lag_time_ms(self, broker: int) -> int:
        return self._broker(broker, "replica_lag_time_max_ms", DEFAULT_LAG_MS)

    def session_timeout_ms(self, broker: int) -> int:
        return self._broker(broker, "session_timeout_ms", DEFAULT_SESSION_MS[self.mode])

    def checkpoint_interval_ms(self, broker: int) -> int:
        return self._broker(broker, "hw_checkpoint_interval_ms", DEFAULT_CHECKPOINT_MS)


# --------------------------------------------------------------------------------------
# Steps
#
# Every step kind is a frozen dataclass; `KIND` is its name in the file, and each field's
# metadata says how the loader checks it. Defaults mean the field may be left out.


def _check_count(value: Any) -> tuple[Any, str | None]:
    if _is_int(value) and 1 <= value <= MAX_COUNT:
        return value, None
    return None, f"must be a positive integer (at most {MAX_COUNT})"


def _check_acks(value: Any) -> tuple[Any, str | None]:
    if value in ("all", "1"):
        return value, None
    return None, 'must be "all" or "1"'


def _check_signal(value: Any) -> tuple[Any, str | None]:
    if value in ("SIGKILL", "SIGTERM"):
        return value, None
    return None, 'must be "SIGKILL" or "SIGTERM"'


def _check_lose(value: Any) -> tuple[Any, str | None]:
    if value is None or (_is_int(value) and value >= 1):
        return value, None
    return None, "must be a positive integer (batches) or null (everything unflushed)"


def _check_seconds(value: Any) -> tuple[Any, str | None]:
    if _is_number(value) and 0 < value <= MAX_WAIT_SECONDS:
        return value, None
    return None, f"must be a number of seconds above 0 (at most {MAX_WAIT_SECONDS})"


def _target(check: str = "target") -> Any:
    return {"check": check}


def _meta(check: Callable[[Any], tuple[Any, str | None]]) -> Any:
    return {"check": check}


@dataclass(frozen=True)
class Produce:
    """Write `count` records in one batch to `to` (the current leader), with `acks`."""

    KIND: ClassVar[str] = "produce"
    count: int = field(metadata=_meta(_check_count))
    acks: str = field(default="all", metadata=_meta(_check_acks))
    to: Target = field(default=Role.LEADER, metadata=_target())

    def describe(self) -> str:
        return f"produce {self.count} (acks={self.acks}) to {_name(self.to)}"


@dataclass(frozen=True)
class HoldBack:
    """Cut a follower in the ISR off from the leader; it stays in the ISR as long as
    replica.lag.time.max.ms allows (faults.replication.hold_back)."""

    KIND: ClassVar[str] = "hold-back"
    target: Target = field(default=Role.FOLLOWER_IN_ISR, metadata=_target())

    def describe(self) -> str:
        return f"hold back {_name(self.target)}"


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
class Heal:
    """Heal the link between `a` and `b`, or with neither, every cut (hold-backs and session
    cuts included)."""

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
    """SIGKILL (a crash) or SIGTERM (controlled shutdown) a broker."""

    KIND: ClassVar[str] = "kill"
    target: Target = field(default=Role.LEADER, metadata=_target())
    signal: str = field(default="SIGKILL", metadata=_meta(_check_signal))

    def describe(self) -> str:
        return f"{self.signal} {_name(self.target)}"


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
    """Kill a broker and drop what its disk had not flushed: `lose` trailing batches
    (never below its flush point), or with null everything above the flush point."""

    KIND: ClassVar[str] = "power-loss"
    target: Target = field(default=Role.LEADER, metadata=_target())
    lose: int | None = field(default=None, metadata=_meta(_check_lose))

    def describe(self) -> str:
        lost = "its unflushed tail" if self.lose is None else f"up to {self.lose} batch(es)"
        return f"power loss on {_name(self.target)}, losing {lost}"


@dataclass(frozen=True)
class Wait:
    """Let time pass: followers may fall out of the ISR, paused brokers' sessions expire,
    and brokers checkpoint their high watermarks (every 5 s by default)."""

    KIND: ClassVar[str] = "wait"
    seconds: float = field(metadata=_meta(_check_seconds))

    def describe(self) -> str:
        return f"wait {self.seconds:g} s"


Step = (
    Produce
    | HoldBack
    | Cut
    | Heal
    | ExpireSession
    | ElectPreferred
    | ElectUnclean
    | Kill
    | Restart
    | Pause
    | Resume
    | PowerLoss
    | Wait
)

STEP_KINDS: dict[str, type] = {
    cls.KIND: cls
    for cls in (
        Produce,
        HoldBack,
        Cut,
        Heal,
        ExpireSession,
        ElectPreferred,
        ElectUnclean,
        Kill,
        Restart,
        Pause,
        Resume,
        PowerLoss,
        Wait,
    )
}


_ROLE_NAMES = {
    Role.LEADER: "the leader",
    Role.FOLLOWER_IN_ISR: "a follower in the ISR",
    Role.OUT_OF_SYNC: "an out-of-sync replica",
    Role.CONTROLLER: "the controller",
    Role.ANY_BROKER: "any broker",
}


def _name(target: Endpoint | None) -> str:
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
    for f in fields(step):
        if f.metadata.get("check") in ("target", "endpoint"):
            value = getattr(step, f.name)
            if value is not None:
                out.append((f.name, value))
    return out


# --------------------------------------------------------------------------------------
# The schedule


@dataclass(frozen=True)
class Schedule:
    cluster: Cluster
    seed: int = 0
    steps: tuple[Step, ...] = ()
    origin: dict[str, Any] = field(default_factory=dict)  # provenance, free-form scalars

    def with_steps(self, steps: Iterable[Step]) -> Schedule:
        return replace(self, steps=tuple(steps))

    def describe(self) -> list[str]:
        return [f"{i}: {s.describe()}" for i, s in enumerate(self.steps)]


# --------------------------------------------------------------------------------------
# Loading


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Problems:
    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def add(self, path: str, message: str) -> None:
        self.items.append((path, message))


def _object(value: Any, path: str, problems: _Problems) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        problems.add(path, f"must be an object, not {_json_type(value)}")
        return None
    return value


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _unknown(obj: Mapping[str, Any], known: Iterable[str], path: str, problems: _Problems) -> None:
    known = list(known)
    for key in obj:
        if key not in known:
            problems.add(
                f"{path}.{key}" if path else key,
                f"unknown field (expected one of: {', '.join(known)})",
            )


def _positive_int(
    value: Any, path: str, problems: _Problems, *, low: int = 1, high: int | None = None
) -> int | None:
    if _is_int(value) and value >= low and (high is None or value <= high):
        return value
    bound = (
        f" from {low} to {high}"
        if high is not None
        else (" (positive)" if low == 1 else f" of at least {low}")
    )
    problems.add(path, f"must be an integer{bound}")
    return None


TOPIC_KEYS = {
    "min.insync.replicas": "min_insync_replicas",
    "unclean.leader.election.enable": "unclean_leader_election_enable",
    "flush.messages": "flush_messages",
}


def _broker_keys(mode: str) -> dict[str, str]:
    return {
        "replica.lag.time.max.ms": "replica_lag_time_max_ms",
        session_key(mode): "session_timeout_ms",
        "replica.high.watermark.checkpoint.interval.ms": "hw_checkpoint_interval_ms",
    }


def _load_topic_config(value: Any, path: str, problems: _Problems, rf: int | None) -> TopicConfig:
    obj = _object(value, path, problems)
    if obj is None:
        return TopicConfig()
    _unknown(obj, TOPIC_KEYS, path, problems)
    kwargs: dict[str, Any] = {}
    if "min.insync.replicas" in obj:
        kwargs["min_insync_replicas"] = (
            _positive_int(
                obj["min.insync.replicas"], f"{path}.min.insync.replicas", problems, high=rf
            )
            or 1
        )
    if "unclean.leader.election.enable" in obj:
        flag = obj["unclean.leader.election.enable"]
        if isinstance(flag, bool):
            kwargs["unclean_leader_election_enable"] = flag
        else:
            problems.add(f"{path}.unclean.leader.election.enable", "must be true or false")
    if obj.get("flush.messages") is not None:
        kwargs["flush_messages"] = _positive_int(
            obj["flush.messages"], f"{path}.flush.messages", problems
        )
    return TopicConfig(**kwargs)


def _load_broker_config(value: Any, path: str, problems: _Problems, mode: str) -> BrokerConfig:
    obj = _object(value, path, problems)
    if obj is None:
        return BrokerConfig()
    keys = _broker_keys(mode)
    other = session_key("zk" if mode == "kraft" else "kraft")
    kwargs: dict[str, Any] = {}
    for key, item in obj.items():
        if key == other:
            problems.add(
                f"{path}.{key}",
                f"a {'KRaft' if mode == 'zk' else 'ZooKeeper-mode'} setting, but the cluster's "
                f"mode is {mode} (use {session_key(mode)})",
            )
        elif key not in keys:
            problems.add(f"{path}.{key}", f"unknown field (expected one of: {', '.join(keys)})")
        else:
            kwargs[keys[key]] = _positive_int(item, f"{path}.{key}", problems)
    return BrokerConfig(**kwargs)


CLUSTER_KEYS = (
    "mode",
    "brokers",
    "replication_factor",
    "replicas",
    "controller",
    "controllers",
    "topic_config",
    "broker_config",
    "node_config",
)


def _load_cluster(value: Any, problems: _Problems) -> Cluster | None:
    path = "cluster"
    obj = _object(value, path, problems)
    if obj is None:
        return None
    _unknown(obj, CLUSTER_KEYS, path, problems)
    before = len(problems.items)
    mode = obj.get("mode", "zk")
    if mode not in MODES:
        problems.add(f"{path}.mode", 'must be "zk" or "kraft"')
        mode = "zk"
    brokers = obj.get("brokers", 3)
    brokers = _positive_int(brokers, f"{path}.brokers", problems, high=MAX_BROKERS) or 1
    if "replication_factor" not in obj:
        problems.add(f"{path}.replication_factor", "missing")
        rf = 1
    else:
        rf = (
            _positive_int(
                obj["replication_factor"], f"{path}.replication_factor", problems, high=brokers
            )
            or 1
        )
    replicas: tuple[int, ...] = ()
    if obj.get("replicas") is not None:
        raw = obj["replicas"]
        if (
            not isinstance(raw, list)
            or not all(_is_int(r) and 1 <= r <= brokers for r in raw)
            or len(set(raw)) != len(raw)
        ):
            problems.add(
                f"{path}.replicas", f"must be a list of distinct broker ids from 1 to {brokers}"
            )
        elif len(raw) != rf:
            problems.add(
                f"{path}.replicas", f"must list replication_factor ({rf}) brokers, not {len(raw)}"
            )
        else:
            replicas = tuple(raw)
    controller = obj.get("controller")
    if controller is not None:
        if mode == "kraft":
            problems.add(f"{path}.controller", "ZooKeeper mode only (KRaft uses controllers)")
            controller = None
        else:
            controller = _positive_int(controller, f"{path}.controller", problems, high=brokers)
    controllers = obj.get("controllers", 1)
    if mode == "zk" and "controllers" in obj:
        problems.add(f"{path}.controllers", "KRaft mode only (ZooKeeper mode uses controller)")
    elif controllers not in (1, 3) or not _is_int(controllers):
        problems.add(f"{path}.controllers", "must be 1 or 3")
        controllers = 1
    topic = _load_topic_config(obj.get("topic_config", {}), f"{path}.topic_config", problems, rf)
    broker = _load_broker_config(
        obj.get("broker_config", {}), f"{path}.broker_config", problems, mode
    )
    nodes: dict[int, BrokerConfig] = {}
    raw_nodes = _object(obj.get("node_config", {}), f"{path}.node_config", problems) or {}
    for key, item in raw_nodes.items():
        where = f"{path}.node_config.{key}"
        if not (key.isdigit() and 1 <= int(key) <= brokers):
            problems.add(where, f"keys must be broker ids from 1 to {brokers}")
            continue
        nodes[int(key)] = _load_broker_config(item, where, problems, mode)
    if len(problems.items) > before:
        return None
    return Cluster(
        mode=mode,
        brokers=brokers,
        replication_factor=rf,
        replicas=replicas,
        controller=controller,
        controllers=controllers,
        topic_config=topic,
        broker_config=broker,
        node_config=dict(sorted(nodes.items())),
    )


def _load_target(
    value: Any, path: str, problems: _Problems, cluster: Cluster | None, endpoint: bool
) -> Any:
    if _is_int(value):
        if cluster is not None and not 1 <= value <= cluster.brokers:
            problems.add(
                path, f"broker {value} does not exist (brokers are 1 to {cluster.brokers})"
            )
            return None
        if value < 1:
            problems.add(path, "broker ids start at 1")
            return None
        return value
    if endpoint and value == QUORUM:
        return QUORUM
    try:
        role = Role(value)
    except ValueError:
        roles = ", ".join(r.value for r in Role) + (f", {QUORUM}" if endpoint else "")
        problems.add(path, f"must be a broker id or one of: {roles}")
        return None
    if role is Role.CONTROLLER and cluster is not None and cluster.mode == "kraft" and not endpoint:
        problems.add(path, "in KRaft mode the controller is not a broker; only cuts may name it")
        return None
    return role


def _load_step(value: Any, path: str, problems: _Problems, cluster: Cluster | None) -> Step | None:
    obj = _object(value, path, problems)
    if obj is None:
        return None
    kind = obj.get("kind")
    if kind is None:
        problems.add(f"{path}.kind", "missing")
        return None
    cls = STEP_KINDS.get(kind)
    if cls is None:
        problems.add(f"{path}.kind", f"unknown step kind {kind!r} (kinds: {', '.join(STEP_KINDS)})")
        return None
    specs = {f.name: f for f in fields(cls)}
    _unknown(obj, ["kind", *specs], path, problems)
    before = len(problems.items)
    kwargs: dict[str, Any] = {}
    for name, spec in specs.items():
        where = f"{path}.{name}"
        check = spec.metadata["check"]
        if name not in obj:
            if spec.default is MISSING:
                problems.add(where, "missing")
            continue
        raw = obj[name]
        if raw is None and spec.default is None:
            continue
        if check in ("target", "endpoint"):
            kwargs[name] = _load_target(raw, where, problems, cluster, check == "endpoint")
        else:
            converted, message = check(raw)
            if message:
                problems.add(where, message)
            kwargs[name] = converted
    if len(problems.items) > before:
        return None
    step = cls(**kwargs)
    _check_step(step, path, problems, cluster)
    return step


def _check_step(step: Step, path: str, problems: _Problems, cluster: Cluster | None) -> None:
    if isinstance(step, Heal) and (step.a is None) != (step.b is None):
        problems.add(path, "a heal names both ends of a link (a and b) or neither (heal every cut)")
    if isinstance(step, Cut | Heal) and step.a is not None and step.a == step.b:
        problems.add(f"{path}.b", "a link needs two different ends")
    unclean = cluster is None or cluster.topic_config.unclean_leader_election_enable
    if isinstance(step, ElectUnclean) and not unclean:
        problems.add(
            f"{path}.kind",
            "an unclean election needs cluster.topic_config."
            "unclean.leader.election.enable set to true",
        )


def parse_schedule(data: Any, source: str | None = None) -> Schedule:
    """A Schedule from the decoded JSON of a schedule file; ScheduleError names every bad
    field."""
    problems = _Problems()
    if not isinstance(data, dict):
        raise ScheduleError([("", f"a schedule is a JSON object, not {_json_type(data)}")], source)
    version = data.get("format")
    if version is None:
        raise ScheduleError([("format", f"missing (this logfork reads format {FORMAT})")], source)
    if version != FORMAT or not _is_int(version):
        raise ScheduleError(
            [
                (
                    "format",
                    f"unknown format version {version!r}: this logfork reads version {FORMAT} "
                    "only (a newer logfork wrote this file?)",
                )
            ],
            source,
        )
    _unknown(data, ("format", "seed", "cluster", "steps", "origin"), "", problems)
    seed = data.get("seed", 0)
    if not (_is_int(seed) and seed >= 0):
        problems.add("seed", "must be a non-negative integer")
        seed = 0
    if "cluster" not in data:
        problems.add("cluster", "missing")
        cluster = None
    else:
        cluster = _load_cluster(data["cluster"], problems)
    steps: list[Step] = []
    raw_steps = data.get("steps")
    if raw_steps is None:
        problems.add("steps", "missing")
    elif not isinstance(raw_steps, list):
        problems.add("steps", f"must be a list, not {_json_type(raw_steps)}")
    else:
        for i, raw in enumerate(raw_steps):
            step = _load_step(raw, f"steps[{i}]", problems, cluster)
            if step is not None:
                steps.append(step)
    origin = data.get("origin", {})
    if not isinstance(origin, dict) or not all(
        isinstance(v, str | int | float | bool) or v is None for v in origin.values()
    ):
        problems.add("origin", "must be an object of plain values (strings, numbers)")
        origin = {}
    if problems.items or cluster is None:
        raise ScheduleError(problems.items or [("cluster", "invalid")], source)
    return Schedule(cluster, seed, tuple(steps), dict(origin))


def load_schedule(path: Path | str) -> Schedule:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ScheduleError(
            [("", f"cannot read the file: {exc.strerror or exc}")], str(path)
        ) from None
    return loads(text, str(path))


def loads(text: str, source: str | None = None) -> Schedule:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScheduleError(
            [("", f"not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}")], source
        ) from None
    return parse_schedule(data, source)


def validate(schedule: Schedule) -> Schedule:
    """Check a Schedule built in code by writing and reading it back."""
    return parse_schedule(to_dict(schedule))


# --------------------------------------------------------------------------------------
# Writing


def _target_json(value: Any) -> Any:
    return value.value if isinstance(value, Role) else value


def step_to_dict(step: Step) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": step.KIND}
    for f in fields(step):
        value = getattr(step, f.name)
        if value is None:
            continue
        out[f.name] = _target_json(value)
    return out


def _broker_config_dict(config: BrokerConfig, mode: str, *, full: bool) -> dict[str, Any]:
    values = {
        "replica.lag.time.max.ms": (config.replica_lag_time_max_ms, DEFAULT_LAG_MS),
        session_key(mode): (config.session_timeout_ms, DEFAULT_SESSION_MS[mode]),
        "replica.high.watermark.checkpoint.interval.ms": (
            config.hw_checkpoint_interval_ms,
            DEFAULT_CHECKPOINT_MS,
        ),
    }
    out = {}
    for key, (value, default) in values.items():
        if value is not None:
            out[key] = value
        elif full:
            out[key] = default
    return out


def cluster_to_dict(cluster: Cluster) -> dict[str, Any]:
    out: dict[str, Any] = {
        "mode": cluster.mode,
        "brokers": cluster.brokers,
        "replication_factor": cluster.replication_factor,
        "replicas": list(cluster.replicas),
    }
    if cluster.mode == "zk":
        if cluster.controller is not None:
            out["controller"] = cluster.controller
    else:
        out["controllers"] = cluster.controllers
    topic = cluster.topic_config
    out["topic_config"] = {
        "min.insync.replicas": topic.min_insync_replicas,
        "unclean.leader.election.enable": topic.unclean_leader_election_enable,
    }
    if topic.flush_messages is not None:
        out["topic_config"]["flush.messages"] = topic.flush_messages
    out["broker_config"] = _broker_config_dict(cluster.broker_config, cluster.mode, full=True)
    if cluster.node_config:
        out["node_config"] = {
            str(b): _broker_config_dict(c, cluster.mode, full=False)
            for b, c in sorted(cluster.node_config.items())
        }
    return out


def to_dict(schedule: Schedule) -> dict[str, Any]:
    out: dict[str, Any] = {
        "format": FORMAT,
        "seed": schedule.seed,
        "cluster": cluster_to_dict(schedule.cluster),
        "steps": [step_to_dict(s) for s in schedule.steps],
    }
    if schedule.origin:
        out["origin"] = dict(schedule.origin)
    return out


def _one_line(value: Any) -> str:
    return json.dumps(value, separators=(", ", ": "))


def dumps(schedule: Schedule) -> str:
    """Stable, pretty JSON: one line per cluster field and per step, so that two schedules
    diff step by step and a file can be pasted into an issue."""
    data = to_dict(schedule)
    lines = ["{", f'  "format": {data["format"]},', f'  "seed": {data["seed"]},', '  "cluster": {']
    cluster = data["cluster"]
    items = [f"    {json.dumps(k)}: {_one_line(v)}" for k, v in cluster.items()]
    lines.append(",\n".join(items))
    lines.append("  },")
    steps = data["steps"]
    tail = "," if "origin" in data else ""
    if steps:
        lines.append('  "steps": [')
        lines.append(",\n".join(f"    {_one_line(s)}" for s in steps))
        lines.append(f"  ]{tail}")
    else:
        lines.append(f'  "steps": []{tail}')
    if "origin" in data:
        lines.append(f'  "origin": {_one_line(data["origin"])}')
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_schedule(path: Path | str, schedule: Schedule) -> Path:
    path = Path(path)
    path.write_text(dumps(schedule))
    return path
