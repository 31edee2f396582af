"""The cluster a schedule's steps run on, as they see it: each step kind is mapped to the
fault that proves its effect (faults/), its targets resolved from the partition's state as
the controller has it (observe.state) by the rule the simulator follows
(runrecord.schedule_roles), and its precondition checked first: a step that cannot run is
skipped, saying what was observed.

`Live` is the real counterpart of checkers.simulate.Simulator: `apply` runs a step by the
live action its family registered (suites.explore.live.registry); suites.explore.live.heal
ends the schedule as the simulator's `finish` does.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kazoo.exceptions import NoNodeError

from basics.errors import NotReached
from checkers.checkpoints import REPLICATION_OFFSET_CHECKPOINT, read_offset_checkpoint
from checkers.errors import LogReadError
from checkers.simulate import Simulator
from faults import network, process, session
from faults.slow_link import SlowLink
from fixtures.config import zookeeper_config
from fixtures.nodes import Node
from fixtures.waiting import WaitTimeout, wait_until
from observe.controller import active_controller
from observe.state import PartitionState, partition_state
from runrecord.events import EventKind
from runrecord.replay import DONE, REJECTED, SKIPPED, RunHistory, StepResult
from runrecord.schedule import Schedule
from runrecord.schedule_roles import Rejected, Skip, Unserved, View
from runrecord.steps.base import QUORUM, Step, names_coordinator
from suites.broker_logs import log_mark
from suites.explore.live import disks, txn, writes
from suites.explore.live.alter_partition import Holds
from suites.explore.live.quorum import majority_up
from suites.explore.live.registry import ACTIONS
from suites.explore.live.settle import settle
from suites.scenario import RunContext

REQUEST_TIMEOUT = writes.REQUEST_TIMEOUT
LEADER_SEEN_TIMEOUT = 15.0  # for a new leader to learn that it leads


@dataclass
class Link:
    """A cut between two ends (brokers, or a broker and the quorum) made by a step."""

    a: int
    b: Any  # a broker id or QUORUM
    kind: str  # "hold-back", "cut", "session" or "slow"
    cut: network.LinkCut | SlowLink
    expiry: session.Expiry | None = None

    def joins(self, x: Any, y: Any) -> bool:
        return {x, y} == {self.a, self.b}


def took_effect(events: list[Any], started: float) -> float:
    """Seconds from a step's start to its first fault or heal in the timeline (a cut: its
    first rule, `effective_mono`), 0 where it records none: a write, a wait or an election
    acts as it starts."""
    first = next((e for e in events if e.kind in (EventKind.FAULT, EventKind.HEAL)), None)
    if first is None:
        return 0.0
    return max(0.0, (first.data.get("effective_mono") or first.mono) - started)


def checkpointed_hw(log_dirs: list[Path], topic: str) -> int | None:
    """The high watermark of the topic's partition 0 that a broker starting on these log
    dirs reads from the replication-offset-checkpoint of the one holding the partition: 0
    where the file or its entry is missing, as Kafka takes it (Partition.
    updateHighWatermark). None where no log dir holds the partition, or the file cannot be
    read: nothing to tell."""
    held = [d for d in log_dirs if (d / f"{topic}-0").is_dir()]
    if len(held) != 1:
        return None
    path = held[0] / REPLICATION_OFFSET_CHECKPOINT
    if not path.exists():
        return 0
    try:
        return read_offset_checkpoint(path).get((topic, 0), 0)
    except LogReadError:
        return None


class Live:
    """The cluster a schedule runs on, as its steps see it. With a simulator (`sim`)
    following the same steps, each step that ran is given time to settle where the model
    says the cluster settles: the same leader and ISR, the same log end offsets on the
    live replicas (the model lets the cluster act until nothing changes after every step;
    brokers need a moment to fetch and to widen the ISR). A cluster that does not get there
    within settle.SETTLE_TIMEOUT goes on as it is, and the step says where it stood.

    `marks`: where each broker's log stood when the schedule began (suites.broker_logs)."""

    def __init__(
        self,
        ctx: RunContext,
        schedule: Schedule,
        topic: str,
        sim: Simulator | None = None,
        marks: dict[int, int] | None = None,
    ) -> None:
        self.ctx = ctx
        self.sim = sim
        self.cluster = ctx.cluster
        self.schedule = schedule
        self.topic = topic
        self.assignment = list(schedule.cluster.replicas)  # the replica list, as it stands
        # The target of the last reassignment (reassign steps), which the replica list
        # becomes once it completes: what the partition converges to after the heal.
        self.reassigning = list(schedule.cluster.replicas)
        self.adding: list[int] = []  # the replicas a reassignment in flight adds
        self.links: list[Link] = []
        # What the steps did and what the run saw that the model cannot decide for itself,
        # filled as the steps run: the comparison's input.
        self.history = RunHistory()
        self.exited: dict[int, str] = {}  # brokers that did not come back after the heal
        self._coordinator: int | None = None  # the coordinator for the step running
        self.voter_cuts: dict[str, network.LinkCut] = {}  # KRaft voters cut off from the others
        self.holds = Holds(self.cluster)  # brokers whose AlterPartition requests are held
        self.txn = txn.Transactional(
            topic, REQUEST_TIMEOUT + 5, REQUEST_TIMEOUT, unknown=self.history.unknown
        )
        self._registered: set[int] = set()
        # Brokers whose log dir holding the partition failed (fail-dir): stopped, for the
        # schedule, until a restart brings the disk back.
        self.failed_dirs: dict[int, disks.FailedDir] = {}
        # Brokers seen holding a replica of their offline dir current in another of their
        # dirs (KIP-112 rules that out while a dir is bad; KAFKA-16234), in words.
        self.recreated: dict[int, str] = {}
        # Brokers whose replica, swapped in by a move between log dirs, lost leader epochs
        # its predecessor had cached (KAFKA-20961), in words.
        self.epochs_lost: dict[int, str] = {}
        self.dir_throttled: set[int] = set()  # brokers whose moves between dirs are capped
        self._since = dict(marks or {})  # broker -> its log's mark at its last start

    # -- what the steps see -----------------------------------------------------------------

    def state(self) -> PartitionState:
        return partition_state(self.cluster, self.topic, 0)

    def controller(self) -> int | None:
        """ZooKeeper mode: the controller broker, if one holds the role with a session."""
        if self.cluster.mode != "zk":
            return None
        try:
            node = active_controller(self.cluster)
        except NoNodeError:  # no /controller znode: no controller. Anything else is an
            return None  # observation that failed, never "no controller"
        return node.node_id if node.node_id in self._registered else None

    def view(self) -> View:
        self._registered = self.cluster.registered_brokers()
        state = self.state()
        if state.replicas:  # KRaft: a reassignment changes it
            self.assignment = list(state.replicas)
        self.adding = list(state.adding)
        return View.of_state(
            state,
            mode=self.cluster.mode,
            brokers=sorted(self.cluster.brokers),
            assignment=self.assignment,
            controller=self.controller(),
            coordinator=self._coordinator,
        )

    def node(self, broker: int) -> Node:
        return self.cluster.broker(broker)

    def status(self, broker: int) -> str:
        if broker in self.failed_dirs:
            return "stopped"  # its replica is: the dir that held it is offline
        status = self.node(broker).status()
        return "stopped" if status in ("exited", "created", "dead") else status

    def alive(self, broker: Any) -> bool:
        return broker == QUORUM or self.status(broker) == "running"

    def registered(self, broker: int) -> bool:
        return broker in self._registered and broker not in self.failed_dirs

    def describe(self, broker: int) -> str:
        session_ = "" if self.registered(broker) else " without a session"
        return f"broker {broker} is {self.status(broker)}{session_}"

    def linked(self, a: Any, b: Any) -> bool:
        # A slow link still carries everything.
        return not any(link.joins(a, b) and link.kind != "slow" for link in self.links)

    def nodes_of(self, end: Any) -> list[Node]:
        if end != QUORUM:
            return [self.node(end)]
        return [self.cluster.zookeeper] if self.cluster.mode == "zk" else self.cluster.controllers

    def session_wait(self, broker: int, since: float) -> float:
        """The protocol's wait for a lost session, as it came: from the fault (at `since`)
        to the controller acting on the loss, at most the timeout plus one ZooKeeper tick
        (ZooKeeper checks sessions once per tick). Its last heartbeat may come before the
        fault, so the loss often comes sooner than the timeout."""
        tick = zookeeper_config()["tickTime"] / 1000 if self.cluster.mode == "zk" else 0
        most = self.schedule.cluster.session_timeout_ms(broker) / 1000 + float(tick)  # type: ignore[arg-type]
        return min(time.monotonic() - since, most)

    # -- running a step ---------------------------------------------------------------------

    def apply(self, index: int, step: Step) -> StepResult:
        """Run one step; a skipped or rejected step changes nothing. Faults that do not
        take effect raise NotReached, as in every scenario."""
        result = StepResult(index, step.describe(), step.KIND, DONE, began=time.time())
        started = time.monotonic()
        recorded = len(self.ctx.timeline.events)
        handler = ACTIONS[type(step)]
        try:
            self._see_coordinator(index, step)
            targets, waits = handler(self, step)
            result.targets, result.waits = targets, waits
        except Skip as skip:
            result.status, result.observed = SKIPPED, skip.observed
            result.unserved = isinstance(skip, Unserved)
        except Rejected as rejected:
            result.status, result.observed = REJECTED, str(rejected)
        if self.sim is not None and result.status != SKIPPED:
            self._follow_controller(index)
            self.sim.apply(step)
            settling = time.monotonic()
            result.unsettled = settle(self.cluster, self.topic, self.sim, self._since)
            result.settling = time.monotonic() - settling
        result.seconds = time.monotonic() - started
        result.lead = took_effect(self.ctx.timeline.events[recorded:], started)
        self.history.steps.append(result)
        self.ctx.timeline.record(
            EventKind.STEP,
            step.KIND,
            index=index,
            step=result.step,
            status=result.status,
            targets=result.targets,
            observed=result.observed,
            unsettled=result.unsettled,
        )
        return result

    def _see_coordinator(self, index: int, step: Step) -> None:
        """For a step naming the transaction coordinator: find it, note it, and tell the
        simulator (SimOptions.coordinator_at), which does not follow the coordinator's log;
        Unserved when there is none."""
        self._coordinator = None
        if not names_coordinator(step):
            # A transactional step talks to the coordinator: the model follows who it was
            # (a broker cut off from the quorum later stays the producer's coordinator).
            if step.transactional:
                self._tell_coordinator(index, txn.coordinator(self.cluster))
            return
        self._coordinator = txn.coordinator(self.cluster)
        if self._coordinator is None:  # the model would guess one: it is told to skip
            raise Unserved("no transaction coordinator: its log has no leader (or none yet)")
        self._tell_coordinator(index, self._coordinator)

    def _tell_coordinator(self, index: int, coordinator: int | None) -> None:
        if coordinator is None:
            return
        self.history.coordinator_at.append((index, coordinator))
        if self.sim is not None:
            told = tuple(self.history.coordinator_at)
            self.sim.options = dataclasses.replace(self.sim.options, coordinator_at=told)

    def note_hw_checkpoint(self, b: int) -> None:
        """Right after a crash of broker `b`, before it starts again: read the high
        watermark checkpoint it restarts from, and tell the simulator, whose clock cannot
        say whether the checkpoint had caught up (SimOptions.hw_checkpoint_at)."""
        offset = checkpointed_hw(self.node(b).log_dirs, self.topic)
        if offset is None:
            return
        self.history.hw_checkpoints.append((len(self.history.steps), b, offset))
        if self.sim is not None:
            told = tuple(self.history.hw_checkpoints)
            self.sim.options = dataclasses.replace(self.sim.options, hw_checkpoint_at=told)

    def _follow_controller(self, index: int) -> None:
        """Note which broker the controller election of this step (if any) went to, and
        let the simulator know: it cannot call that race (SimOptions.controller_after)."""
        assert self.sim is not None
        if self.cluster.mode != "zk":
            return
        self._registered = self.cluster.registered_brokers()
        now = self.controller()
        moved = self.history.controller_after
        last = moved[-1][1] if moved else self.schedule.cluster.controller
        if now is None or now == last:
            return
        moved.append((index, now))
        self.sim.options = dataclasses.replace(self.sim.options, controller_after=tuple(moved))

    def own_leader(self, b: int, partition: int = 0) -> int | None:
        """The leader broker `b` names in its own metadata for the partition, once it names
        itself (waiting a little: a new leader learns it leads moments after the controller
        elects it)."""
        try:
            return wait_until(
                lambda: self.cluster.leader_seen_by(b, self.topic, partition),
                lambda leader: leader == b,
                what=f"broker {b} to see itself lead",
                timeout=LEADER_SEEN_TIMEOUT,
            )
        except WaitTimeout as exc:
            return exc.last if isinstance(exc.last, int) else None

    def slow_first(self) -> list[Link]:
        """The links in the order a heal of every cut heals them: slow ones first, so that
        what they held back arrives before any cut heals (faults.slow_link), as the model
        has it (checkers.simulate.slow_links)."""
        return sorted(self.links, key=lambda link: link.kind != "slow")

    def heal_link(self, link: Link) -> None:
        """Heal one link (a slow one records what it shaped in the timeline)."""
        broker = self.node(link.a)
        # The broker registers again, where a quorum is there to take it.
        up = majority_up(self.cluster, self.voter_cuts)
        if link.expiry is not None and broker.status() == "running" and up:
            link.expiry.heal()
        elif isinstance(link.cut, network.LinkCut):
            a, b = link.a, link.b
            link.cut.heal(shaped=any(x.kind == "slow" and x.joins(a, b) for x in self.links))
        else:
            link.cut.heal()
        self.links.remove(link)

    def heal_voters(self) -> None:
        for name, cut in list(self.voter_cuts.items()):
            cut.heal()
            del self.voter_cuts[name]

    def running(self, b: Any) -> str | None:
        return None if self.alive(b) else self.describe(b)

    def crash(self, b: int, kill: Any) -> float:
        """Kill a broker without a shutdown, then wait as long as the protocol makes the
        cluster wait: until its session ends and the controller acts on its partitions."""
        if not self.registered(b):
            kill()
            return 0.0
        before = session.states_in_isr(self.cluster, b)
        controller = session.zk_controller(self.cluster)
        since = time.monotonic()
        kill()
        what = f"the cluster to notice broker {b}'s crash"
        try:
            session.await_loss(self.cluster, b, before, what, controller=controller)
        except WaitTimeout as exc:
            raise NotReached(exc.what, str(exc.last)) from None
        return self.session_wait(b, since)

    def start_broker(self, b: int, *, serving: bool = True) -> None:
        def restore() -> None:
            for link in self.links:
                if b in (link.a, link.b):
                    link.cut.restore()  # its side of the cut went with its old namespace
            self.holds.restore(b)

        def start() -> None:
            process.restart(self.cluster, self.node(b), serving=serving, on_running=restore)

        self._since[b] = log_mark(self.node(b))
        disks.restart(self, b, start)
