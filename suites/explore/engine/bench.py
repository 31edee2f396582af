"""The cluster schedules run on, kept from one schedule to the next where that is safe.

A schedule's cluster shape (mode, brokers, the ZooKeeper controller, the KRaft controllers,
broker configs) is the cluster's; its replicas and topic configs are its topic's. So
schedules of one shape share a cluster: each gets a fresh topic, which is deleted once
its evidence is copied out, and the cluster's health is checked before the next one
(`check`). A cluster that fails the check, or a schedule of another shape, gets a fresh
cluster, and the reason is recorded (`boots`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from basics.errors import LogforkError, NotReached, SetupError
from basics.releases import Release
from faults import elections, network
from fixtures.admin import ask_controller
from fixtures.cluster import BootError, Cluster, ClusterSpec
from fixtures.progress import note
from fixtures.releases import resolve
from fixtures.waiting import WaitTimeout, wait_until
from observe.controller import active_controller
from observe.state import partitions
from runrecord.power import CUT, UNSYNCED
from runrecord.schedule import Cluster as Shape
from runrecord.schedule import Schedule, session_key
from suites.broker_logs import dead_fetcher, log_mark
from suites.explore.live import txn

# A ZooKeeper-mode controller sends each broker one request at a time and waits for its
# answer (ControllerChannelManager's RequestSendThread, with request.timeout.ms; connecting
# waits controller.socket.timeout.ms). A request caught by a cut whose packets are dropped
# waits out that timeout, 30 s by default, even after the heal, and the broker leads on in
# its old leader epoch meanwhile, which the model does not (a new epoch reaches a healed
# broker at once). 5 s bounds that lag.
CONTROLLER_CHANNEL = {"request.timeout.ms": 5000, "controller.socket.timeout.ms": 5000}
# A broker told to follow another leader shuts down its idle fetcher thread first, and the
# thread finishes its fetch before it stops: a fetch to a SIGKILLed or cut-off leader hangs
# until replica.socket.timeout.ms (30 s by default), and every LeaderAndIsr queues behind it.
# Seen on 0.10.2.2: broker 3's fetcher to a killed broker 2 stopped 32 s after the kill, and
# five queued LeaderAndIsr requests were applied at once; the model has a broker learn its
# new role at once. 5 s bounds that lag, as CONTROLLER_CHANNEL bounds the controller's.
FETCHER_SOCKET = {"replica.socket.timeout.ms": 5000}
# A ZooKeeper-mode broker's SIGTERM asks the controller to move its leaderships away, and
# retries controlled.shutdown.max.retries (3) times, controlled.shutdown.retry.backoff.ms
# (5 s) apart, while a partition it leads has no other ISR member, before it shuts down
# anyway (KafkaServer.controlledShutdown): 15 s of waiting for the same end. Explore draws
# SIGTERMs of lone leaders often; 1 s apart, the retries take 3 s.
CONTROLLED_SHUTDOWN = {"controlled.shutdown.retry.backoff.ms": 1000}
# A boot can fail on a race of the release's own (KAFKA-20839 with three controllers): the
# schedule gets one more cluster before it ends setup-failed.
BOOT_ATTEMPTS = 2


def cluster_spec(
    kafka: str, shape: Shape, base_image: str | None = None, disks: bool = False
) -> ClusterSpec:
    """The cluster a schedule's shape asks for. Elections are the schedule's alone:
    unclean ones only where its topic enables them (logfork's brokers never rebalance
    leaders on their own, fixtures.config). `disks`: log dirs on crash-simulating
    filesystems, for power losses under a filesystem model."""
    key = session_key(shape.mode)

    def configs(config: Any) -> dict[str, Any]:
        values = {
            "replica.lag.time.max.ms": config.replica_lag_time_max_ms,
            key: config.session_timeout_ms,
            "replica.high.watermark.checkpoint.interval.ms": config.hw_checkpoint_interval_ms,
        }
        return {k: v for k, v in values.items() if v is not None}

    nodes = {f"b{b}": configs(c) for b, c in shape.node_config.items()}
    if shape.mode == "kraft":
        # The active controller fences a broker after its own broker.session.timeout.ms.
        fence = {key: shape.broker_config.session_timeout_ms}
        nodes.update({f"c{i}": fence for i in range(1, shape.controller_nodes + 1)})
    broker_config = {
        **configs(shape.broker_config),
        "unclean.leader.election.enable": False,
        **FETCHER_SOCKET,
        **txn.BROKER_CONFIG,
    }
    if shape.mode == "zk":
        broker_config.update(CONTROLLER_CHANNEL)
        broker_config.update(CONTROLLED_SHUTDOWN)
    return ClusterSpec(
        kafka,
        shape.mode,
        brokers=shape.brokers,
        controllers=shape.controllers if shape.mode == "kraft" else 1,
        quorum=shape.quorum,
        spare_controllers=shape.spare_controllers,
        controller=shape.controller if shape.mode == "zk" else None,
        broker_config=broker_config,
        node_config=nodes,
        base_image=base_image,
        features=dict(shape.features),
        log_dirs={f"b{b}": shape.log_dirs for b in shape.broker_ids} if shape.log_dirs > 1 else {},
        # The mounts serve every filesystem model; each power loss names its own.
        power_model=UNSYNCED if disks else CUT,
    )


def needs_disks(schedule: Schedule) -> bool:
    """Whether a schedule's power losses, or a disk that fails, need crash-simulating
    filesystems."""
    return any(s.needs_disks for s in schedule.steps)


def shape_key(shape: Shape) -> tuple[Any, ...]:
    """What two schedules must share to share a cluster."""
    return (
        shape.mode,
        shape.brokers,
        shape.controller,
        shape.controllers,
        shape.quorum,
        shape.spare_controllers,
        shape.broker_config,
        tuple(sorted(shape.node_config.items())),
        tuple(sorted(shape.features.items())),
        shape.log_dirs,
    )


@dataclass
class Boot:
    """One cluster started: why, and for which schedule."""

    reason: str
    schedule: str
    seconds: float
    run_dir: str


@dataclass
class Bench:
    kafka: str
    root: Path  # clusters go to root/clusters/<run id>/
    base_image: str | None = None
    reuse: bool = True
    disks: bool = False  # every cluster on crash-simulating filesystems (explore's choice)
    cluster: Cluster | None = None
    boots: list[Boot] = field(default_factory=list)
    _key: tuple[Any, ...] | None = None
    _retire: str | None = None  # why the running cluster must not be used again
    _release: Release | None = None
    # With explore --parallel a worker thread uses the bench while the main thread may
    # close it (Ctrl-C): a closed bench starts no cluster.
    _lock: threading.RLock = field(default_factory=threading.RLock)
    closed: bool = False

    @property
    def release(self) -> Release:
        """The release (resolved once: an unknown one raises SetupError here)."""
        if self._release is None:
            self._release = resolve(self.kafka).release
        return self._release

    def __enter__(self) -> Bench:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self.closed = True
            if self.cluster is not None:
                cluster, self.cluster = self.cluster, None
                cluster.close()

    def retire(self, reason: str) -> None:
        """The running cluster is not used again; the next schedule gets a fresh one."""
        self._retire = self._retire or reason

    def acquire(
        self, shape: Shape, schedule: str, disks: bool = False
    ) -> tuple[Cluster, str | None]:
        """A cluster of the shape (`disks`: on crash-simulating filesystems, or whatever
        the bench's own choice is): the running one if it may serve, else a fresh one.
        Returns it and, for a fresh one, why it was started."""
        with self._lock:
            if self.closed:
                raise SetupError("the bench was closed (explore stopped)")
            return self._acquire(shape, schedule, disks)

    def _acquire(self, shape: Shape, schedule: str, disks: bool) -> tuple[Cluster, str | None]:
        disks = disks or self.disks
        key = (*shape_key(shape), disks)
        reason = None
        if self.cluster is None:
            reason = "first schedule"
        elif not self.reuse:
            reason = "no reuse (--fresh)"
        elif self._retire is not None:
            reason = self._retire
        elif key != self._key:
            reason = "another cluster shape"
        if reason is None:
            assert self.cluster is not None
            return self.cluster, None
        if self.cluster is not None:
            cluster, self.cluster = self.cluster, None
            cluster.close()
        self._retire, self._key = None, key
        started = time.monotonic()
        for attempt in range(1, BOOT_ATTEMPTS + 1):
            cluster = Cluster(cluster_spec(self.kafka, shape, self.base_image, disks))
            cluster.run_dir = (self.root / "clusters" / cluster.run_id).resolve()
            try:
                cluster.__enter__()  # closes itself if it fails to boot
                break
            except BootError as exc:
                if attempt == BOOT_ATTEMPTS:
                    raise
                note(f"{exc}; booting another cluster")
        self.cluster = cluster
        self.boots.append(Boot(reason, schedule, time.monotonic() - started, str(cluster.run_dir)))
        return cluster, reason

    def marks(self) -> dict[int, int]:
        """Where each broker's log ends now: what a schedule logs comes after."""
        assert self.cluster is not None
        return {b: log_mark(node) for b, node in self.cluster.brokers.items()}

    def put_away(self, topic: str, marks: dict[int, int], timeout: float = 60.0) -> None:
        """After a schedule: delete its topic, then check the cluster's health; a cluster
        that fails is retired, with the reason."""
        cluster = self.cluster
        if cluster is None or self._retire is not None:
            return
        try:
            ask_controller(
                cluster,
                lambda admin: admin.delete_topics([topic], operation_timeout=30)[topic],
                timeout,
            )
            wait_until(
                lambda: [tp for tp in partitions(cluster) if tp[0] == topic],
                lambda left: not left,
                what=f"topic {topic} deleted",
                timeout=timeout,
            )
        except (WaitTimeout, LogforkError, OSError) as exc:
            self.retire(f"topic {topic} could not be deleted: {exc}")
            return
        except Exception as exc:  # noqa: BLE001 - KafkaException carries the broker's reason
            self.retire(f"topic {topic} could not be deleted: {exc}")
            return
        reason = check(cluster, marks)
        if reason is not None:
            self.retire(reason)


def check(cluster: Cluster, marks: dict[int, int], timeout: float = 30.0) -> str | None:
    """Why the cluster may not serve the next schedule, or None: every broker running and
    registered, no cut left, the controller where the shape put it, and (before 2.3) no
    follower whose replication stopped: KAFKA-6361 kills the fetcher thread of every
    partition it fetches from that leader, so later topics would never replicate; from
    2.3 only the partition is marked failed (KIP-461), and it goes with its topic."""
    for b, node in sorted(cluster.brokers.items()):
        if node.status() != "running":
            return f"broker {b} is {node.status()}"
    for voter in cluster.controllers:  # a schedule's quorum faults are healed too
        if voter.status() != "running":
            return f"controller {voter.name} is {voter.status()}"
    try:
        wait_until(
            cluster.registered_brokers,
            lambda ids: ids >= set(cluster.brokers),
            what="every broker registered",
            timeout=timeout,
            describe=sorted,
        )
    except WaitTimeout as exc:
        return str(exc)
    for node in cluster.nodes.values():
        if network.rules_in(node):
            return f"{node.name} still holds iptables rules: {network.rules_in(node)}"
    wanted = cluster.spec.controller
    try:
        controller = active_controller(cluster)
    except Exception as exc:  # noqa: BLE001 - no controller at all
        return f"no active controller: {exc}"
    if cluster.mode == "zk" and wanted is not None and controller.node_id != wanted:
        try:
            elections.move_controller(cluster, wanted)
        except (NotReached, WaitTimeout) as exc:
            return f"the controller moved from broker {wanted} to {controller.name}: {exc}"
    found = dead_fetcher(cluster, sorted(cluster.brokers), None, marks)
    if found is not None:
        return f"broker {found[0]}'s replication stopped: {found[1]}"
    return None
