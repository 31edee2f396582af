"""A schedule's cluster: its shape and the configs the protocol model depends on, how the
schedule file states them (`load_cluster`), and how the writer writes them
(`cluster_to_dict`). The shape is release-independent: the release comes from the command
line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runrecord.schedule_fields import (
    Problems,
    an_object,
    is_int,
    positive_int,
    unknown_fields,
)

MODES = ("zk", "kraft")
MAX_BROKERS = 9
MAX_VOTERS = 5  # a quorum's voters at format time
# KRaft: a static quorum's voters are controller.quorum.voters (kraft.version 0); a dynamic
# one's are in its metadata log and change at run time (KIP-853, 3.9+).
QUORUMS = ("static", "dynamic")
MAX_SPARES = 2  # dynamic: controllers formatted with --no-initial-controllers
# The features a schedule may format a KRaft cluster with: those the model depends on.
ELR_FEATURE = "eligible.leader.replicas.version"  # KIP-966: 1 = ELR on
FEATURES = {ELR_FEATURE: (0, 1)}


@dataclass(frozen=True)
class TopicConfig:
    """The partition's topic configs (Kafka's names in the file)."""

    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    flush_messages: int | None = None  # None: Kafka's default, never flush on count

    def kafka_configs(self) -> dict[str, object]:
        """The topic configs as Kafka names them, for the topic's creation."""
        configs: dict[str, object] = {
            "min.insync.replicas": self.min_insync_replicas,
            "unclean.leader.election.enable": self.unclean_leader_election_enable,
        }
        if self.flush_messages is not None:
            configs["flush.messages"] = self.flush_messages
        return configs


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
    controllers: int = 1  # KRaft mode: the voters it is formatted with (dedicated nodes)
    quorum: str = "static"  # KRaft mode: QUORUMS
    # A dynamic quorum's controllers that are not voters at first (c<controllers+1>, ...):
    # observers until an add-voter step adds one.
    spare_controllers: int = 0
    topic_config: TopicConfig = field(default_factory=TopicConfig)
    broker_config: BrokerConfig = field(default_factory=BrokerConfig)
    node_config: dict[int, BrokerConfig] = field(default_factory=dict)
    # KRaft: feature levels the cluster is formatted with (FEATURES): on 4.0 eligible
    # leader replicas (KIP-966) are on only when formatted with level 1.
    features: dict[str, int] = field(default_factory=dict)
    # Partitions 1..N of the schedule's topic take the background workload; partition k
    # has the schedule's replicas rotated by k - 1, so that from 2 on their leaders differ
    # and one broker's death or a controller failover moves several leaders at once.
    background_partitions: int = 1
    # Log dirs per broker: 2 for JBOD steps (a replica moved between a broker's log dirs).
    log_dirs: int = 1

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
    def partitions(self) -> tuple[int, ...]:
        """Every partition of the schedule's topic: 0, the schedule's, then the background's."""
        return tuple(range(self.background_partitions + 1))

    def partition_replicas(self, partition: int) -> list[int]:
        """A partition's assignment, its preferred replica first (`background_partitions`)."""
        turn = max(partition - 1, 0) % len(self.replicas)
        return list(self.replicas[turn:] + self.replicas[:turn])

    @property
    def controller_nodes(self) -> int:
        """Every controller node, voters and spares (numbered 1 up: c1, c2, ...)."""
        return self.controllers + self.spare_controllers

    @property
    def dynamic(self) -> bool:
        return self.quorum == "dynamic"

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
# Loading


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


def _load_topic_config(value: Any, path: str, problems: Problems, rf: int | None) -> TopicConfig:
    obj = an_object(value, path, problems)
    if obj is None:
        return TopicConfig()
    unknown_fields(obj, TOPIC_KEYS, path, problems)
    kwargs: dict[str, Any] = {}
    if "min.insync.replicas" in obj:
        kwargs["min_insync_replicas"] = (
            positive_int(
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
        kwargs["flush_messages"] = positive_int(
            obj["flush.messages"], f"{path}.flush.messages", problems
        )
    return TopicConfig(**kwargs)


def _load_broker_config(
    value: Any, path: str, problems: Problems, mode: str, *, node: bool = False
) -> BrokerConfig:
    obj = an_object(value, path, problems)
    if obj is None:
        return BrokerConfig()
    keys = _broker_keys(mode)
    other = session_key("zk" if mode == "kraft" else "kraft")
    kwargs: dict[str, Any] = {}
    for key, item in obj.items():
        if node and mode == "kraft" and key == session_key(mode):
            # The active controller fences every broker after its own
            # broker.session.timeout.ms: KRaft has no per-broker session timeout.
            problems.add(
                f"{path}.{key}",
                "KRaft has one session timeout for every broker (the controller's): set it in "
                "cluster.broker_config",
            )
        elif key == other:
            problems.add(
                f"{path}.{key}",
                f"a {'KRaft' if mode == 'zk' else 'ZooKeeper-mode'} setting, but the cluster's "
                f"mode is {mode} (use {session_key(mode)})",
            )
        elif key not in keys:
            problems.add(f"{path}.{key}", f"unknown field (expected one of: {', '.join(keys)})")
        else:
            kwargs[keys[key]] = positive_int(item, f"{path}.{key}", problems)
    return BrokerConfig(**kwargs)


MAX_BACKGROUND_PARTITIONS = 6  # two producers each, on a 2-core machine

CLUSTER_KEYS = (
    "mode",
    "brokers",
    "replication_factor",
    "replicas",
    "controller",
    "controllers",
    "quorum",
    "spare_controllers",
    "topic_config",
    "broker_config",
    "node_config",
    "features",
    "background_partitions",
    "log_dirs",
)
MAX_LOG_DIRS = 2


def load_cluster(value: Any, problems: Problems) -> Cluster | None:
    path = "cluster"
    obj = an_object(value, path, problems)
    if obj is None:
        return None
    unknown_fields(obj, CLUSTER_KEYS, path, problems)
    before = len(problems.items)
    mode = obj.get("mode", "zk")
    if mode not in MODES:
        problems.add(f"{path}.mode", 'must be "zk" or "kraft"')
        mode = "zk"
    brokers = obj.get("brokers", 3)
    brokers = positive_int(brokers, f"{path}.brokers", problems, high=MAX_BROKERS) or 1
    if "replication_factor" not in obj:
        problems.add(f"{path}.replication_factor", "missing")
        rf = 1
    else:
        rf = (
            positive_int(
                obj["replication_factor"], f"{path}.replication_factor", problems, high=brokers
            )
            or 1
        )
    replicas: tuple[int, ...] = ()
    if obj.get("replicas") is not None:
        raw = obj["replicas"]
        if (
            not isinstance(raw, list)
            or not all(is_int(r) and 1 <= r <= brokers for r in raw)
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
            controller = positive_int(controller, f"{path}.controller", problems, high=brokers)
    controllers = obj.get("controllers", 1)
    if mode == "zk" and "controllers" in obj:
        problems.add(f"{path}.controllers", "KRaft mode only (ZooKeeper mode uses controller)")
    elif not is_int(controllers) or not 1 <= controllers <= MAX_VOTERS:
        problems.add(f"{path}.controllers", f"must be an integer from 1 to {MAX_VOTERS}")
        controllers = 1
    quorum = obj.get("quorum", "static")
    if quorum not in QUORUMS:
        problems.add(f"{path}.quorum", 'must be "static" or "dynamic"')
    elif quorum == "dynamic" and mode != "kraft":
        problems.add(f"{path}.quorum", "KRaft mode only")
    spares = obj.get("spare_controllers", 0)
    if not is_int(spares) or not 0 <= spares <= MAX_SPARES:
        problems.add(f"{path}.spare_controllers", f"must be an integer from 0 to {MAX_SPARES}")
    elif spares and quorum != "dynamic":
        problems.add(
            f"{path}.spare_controllers",
            'needs quorum "dynamic": a static quorum\'s voters are fixed (KIP-853)',
        )
    topic = _load_topic_config(obj.get("topic_config", {}), f"{path}.topic_config", problems, rf)
    broker = _load_broker_config(
        obj.get("broker_config", {}), f"{path}.broker_config", problems, mode
    )
    nodes: dict[int, BrokerConfig] = {}
    raw_nodes = an_object(obj.get("node_config", {}), f"{path}.node_config", problems) or {}
    for key, item in raw_nodes.items():
        where = f"{path}.node_config.{key}"
        if not (key.isdigit() and 1 <= int(key) <= brokers):
            problems.add(where, f"keys must be broker ids from 1 to {brokers}")
            continue
        nodes[int(key)] = _load_broker_config(item, where, problems, mode, node=True)
    features: dict[str, int] = {}
    raw_features = an_object(obj.get("features", {}), f"{path}.features", problems) or {}
    if raw_features and mode != "kraft":
        problems.add(f"{path}.features", "KRaft mode only (set when the storage is formatted)")
    for name, level in raw_features.items():
        if name not in FEATURES:
            problems.add(f"{path}.features.{name}", f"unknown (known: {', '.join(FEATURES)})")
        elif level not in FEATURES[name] or not is_int(level):
            problems.add(f"{path}.features.{name}", f"must be one of {FEATURES[name]}")
        else:
            features[name] = level
    background = obj.get("background_partitions", 1)
    if not is_int(background) or not 1 <= background <= MAX_BACKGROUND_PARTITIONS:
        problems.add(
            f"{path}.background_partitions",
            f"must be an integer from 1 to {MAX_BACKGROUND_PARTITIONS}",
        )
    log_dirs = obj.get("log_dirs", 1)
    if not is_int(log_dirs) or not 1 <= log_dirs <= MAX_LOG_DIRS:
        problems.add(f"{path}.log_dirs", f"must be an integer from 1 to {MAX_LOG_DIRS}")
    if len(problems.items) > before:
        return None
    return Cluster(
        mode=mode,
        brokers=brokers,
        replication_factor=rf,
        replicas=replicas,
        controller=controller,
        controllers=controllers,
        quorum=quorum,
        spare_controllers=spares,
        topic_config=topic,
        broker_config=broker,
        node_config=dict(sorted(nodes.items())),
        features=dict(sorted(features.items())),
        background_partitions=background,
        log_dirs=log_dirs,
    )


# --------------------------------------------------------------------------------------
# Writing


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
        if cluster.dynamic:
            out["quorum"] = cluster.quorum
        if cluster.spare_controllers:
            out["spare_controllers"] = cluster.spare_controllers
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
    if cluster.features:
        out["features"] = dict(cluster.features)
    if cluster.background_partitions != 1:
        out["background_partitions"] = cluster.background_partitions
    if cluster.log_dirs != 1:
        out["log_dirs"] = cluster.log_dirs
    return out
