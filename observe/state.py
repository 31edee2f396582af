"""A partition's state (leader, leader epoch, ISR, leader recovery state) from its source of
truth, waits on it, and its recorded history (states.jsonl).

ZooKeeper mode reads the partition's state znode, keeping the znode version so that a missed
write shows up as a gap. KRaft mode reads the controllers' metadata log from disk: its
PartitionRecord and PartitionChangeRecord entries are the state's history.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from basics.errors import NotYet
from basics.protocol import RecoveryState
from checkers.metadata_log import PartitionStateEvent
from fixtures.waiting import NOT_YET, wait_until
from observe import kraft
from runrecord.events import EventKind
from runrecord.states import StateRecord
from runrecord.typed import JsonLines

if TYPE_CHECKING:
    from fixtures.cluster import Cluster


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int  # -1 when the partition has no leader
    leader_epoch: int | None
    isr: tuple[int, ...]
    recovery_state: RecoveryState  # KIP-704; a missing field reads RECOVERED
    version: int | None  # znode version (ZooKeeper) or metadata log offset (KRaft)
    source: str
    elr: tuple[int, ...] = ()  # KIP-966 eligible leader replicas (KRaft, ELR enabled)
    last_known_elr: tuple[int, ...] = ()
    # KRaft: the replica list, in assignment order (during a reassignment, the target's
    # replicas first, then those it removes); () where the source does not say (ZooKeeper's
    # state znode)
    replicas: tuple[int, ...] = ()
    adding: tuple[int, ...] = ()  # KRaft: replicas a reassignment in flight adds (KIP-455)

    @property
    def recovering(self) -> bool:
        return self.recovery_state == RecoveryState.RECOVERING

    def record(self, wall: float | None = None) -> StateRecord:
        return StateRecord(
            self.topic,
            self.partition,
            self.leader,
            self.leader_epoch,
            list(self.isr),
            self.recovery_state,
            self.version,
            self.source,
            wall,
            list(self.elr),
            list(self.last_known_elr),
        )

    def __str__(self) -> str:
        elr = ""
        if self.elr or self.last_known_elr:
            elr = f" elr {list(self.elr)} last-known-elr {list(self.last_known_elr)}"
        return (
            f"{self.topic}-{self.partition}: leader {self.leader} epoch {self.leader_epoch} "
            f"isr {list(self.isr)}{elr} {self.recovery_state} (v{self.version}, {self.source})"
        )


def state_path(topic: str, partition: int) -> str:
    return f"/brokers/topics/{topic}/partitions/{partition}/state"


def parse_zk_state(topic: str, partition: int, data: bytes, version: int) -> PartitionState:
    state = json.loads(data)
    # KIP-704 as implemented writes "leader_recovery_state": 1 only while RECOVERING; an
    # absent field means RECOVERED (KAFKA-13587).
    return PartitionState(
        topic,
        partition,
        int(state["leader"]),
        int(state["leader_epoch"]),
        tuple(sorted(state["isr"])),
        RecoveryState(state.get("leader_recovery_state", RecoveryState.RECOVERED)),
        version,
        "zk",
    )


def from_event(event: PartitionStateEvent, topic: str) -> PartitionState:
    """A KRaft partition state, from the metadata record that set it."""
    return PartitionState(
        topic,
        event.partition,
        event.leader,
        event.leader_epoch,
        tuple(sorted(event.isr)),
        event.leader_recovery_state,
        event.offset,
        "kraft",
        tuple(event.elr),
        tuple(event.last_known_elr),
        tuple(event.replicas),
        tuple(event.adding),
    )


def partitions(cluster: Cluster) -> list[tuple[str, int]]:
    """Every partition of the cluster's user topics, from the source of truth (clients may
    be cut off from some brokers, so their metadata is no guide)."""
    if cluster.mode == "zk":
        zk = cluster.zk_client()
        return sorted(
            (t, int(p))
            for t in zk.get_children("/brokers/topics")
            if not t.startswith("__")
            for p in zk.get_children(f"/brokers/topics/{t}/partitions")
        )
    log = kraft.metadata_log(cluster.controllers)
    return sorted(tp for tp in log.live_partitions() if not tp[0].startswith("__"))


def assignment(cluster: Cluster, topic: str, partition: int = 0) -> list[int]:
    """The partition's replicas in assignment order (the first is the preferred leader),
    from the source of truth."""
    if cluster.mode == "zk":
        data, _ = cluster.zk_client().get(f"/brokers/topics/{topic}")
        return [int(b) for b in json.loads(data)["partitions"][str(partition)]]
    event = kraft.metadata_log(cluster.controllers).current(topic, partition)
    if event is None:
        raise LookupError(f"{topic}-{partition} is not in the metadata log")
    return list(event.replicas)


def partition_state(cluster: Cluster, topic: str, partition: int = 0) -> PartitionState:
    if cluster.mode == "zk":
        data, stat = cluster.zk_client().get(state_path(topic, partition))
        return parse_zk_state(topic, partition, data, stat.version)
    log = kraft.metadata_log(cluster.controllers)
    event = log.current(topic, partition)
    if event is None:
        raise NotYet(f"{topic}-{partition} is not in the metadata log ({log.path})")
    return from_event(event, topic)


def history(cluster: Cluster, topic: str, partition: int = 0) -> list[PartitionState]:
    """Every state the KRaft metadata log records for the partition, in order."""
    log = kraft.metadata_log(cluster.controllers)
    return [from_event(e, topic) for e in log.history(topic, partition)]


def wait_state(
    cluster: Cluster,
    topic: str,
    ok: Callable[[PartitionState], bool],
    *,
    what: str,
    partition: int = 0,
    timeout: float = 60.0,
) -> PartitionState:
    return wait_until(
        lambda: partition_state(cluster, topic, partition),
        ok,
        what=f"{topic}-{partition}: {what}",
        timeout=timeout,
        describe=str,
    )


class StateRecorder:
    """Every observed state of one partition, appended to states.jsonl (when given a
    writer) and to the cluster's timeline.

    ZooKeeper mode watches the state znode, so each write the watch sees is recorded with
    its znode version; a jump of more than one version is a write the watch missed (a
    watch fires once per registration), which the history keeps visible rather than hides.
    KRaft polls the metadata log, whose offsets play the role of versions.
    """

    def __init__(
        self,
        cluster: Cluster,
        topic: str,
        partition: int = 0,
        writer: JsonLines | None = None,
        interval: float = 0.25,
    ) -> None:
        self.cluster, self.topic, self.partition = cluster, topic, partition
        self.writer = writer
        self.interval = interval
        self.states: list[PartitionState] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None  # what stopped the polling, raised by stop()

    def _record(self, state: PartitionState) -> None:
        with self._lock:
            if self.states and self.states[-1].version == state.version:
                return
            self.states.append(state)
            if self.writer is not None:
                self.writer.append(state.record(time.time()))
        self.cluster.timeline.record(
            EventKind.STATE,
            "partition",
            topic=state.topic,
            partition=state.partition,
            leader=state.leader,
            epoch=state.leader_epoch,
            state=str(state),
            isr=list(state.isr),
            recovery_state=str(state.recovery_state),
        )

    def start(self) -> StateRecorder:
        if self.cluster.mode == "zk":
            from kazoo.recipe.watchers import DataWatch

            def on_change(data: bytes | None, stat: Any) -> bool:
                if self._stop.is_set():
                    return False  # ends the watch
                if data is not None:
                    self._record(parse_zk_state(self.topic, self.partition, data, stat.version))
                return True

            DataWatch(self.cluster.zk_client(), state_path(self.topic, self.partition), on_change)
        else:
            self._thread = threading.Thread(
                target=self._poll, daemon=True, name=f"states-{self.topic}"
            )
            self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._record(partition_state(self.cluster, self.topic, self.partition))
            except NOT_YET:  # the controller may be mid-failover; poll again
                continue
            except Exception as exc:  # noqa: BLE001 - logfork's own bug, raised by stop()
                self._error = exc
                return

    def stop(self) -> list[PartitionState]:
        """The states recorded; a bug that stopped the polling is raised here, not lost
        with the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._error is not None:
            raise self._error
        return list(self.states)

    def __enter__(self) -> StateRecorder:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        try:
            self.stop()
        except Exception:
            if kind is None:  # else the error in flight is the one to see
                raise
