"""Simulate a fault schedule on abstract replicas of one partition, under a release's rules.

The simulator predicts what a schedule (suites/explore/schedule.py) does to a partition
with two or three replicas, without a cluster: where every replica's log ends up once
everything is healed and has converged (consistent, diverged at an offset, or a follower
stuck) and which acknowledged writes are gone. It is deterministic: the same schedule and
protocol always give the same prediction, step by step.

What it models, per replica: its log (batches tagged with the write they came from and the
leader epoch that wrote them), log end offset, high watermark and the high watermark's
checkpoint, leader epoch cache, flush point; per broker: running, stopped or paused, its
ZooKeeper session (KRaft: not fenced), its links to the other brokers and to the quorum;
and the controller's view of the partition: leader, leader epoch, ISR. Truncation is
`checkers.model.truncate_follower` on lineages built from the abstract logs, so the four
protocol generations are the model's; fetching, the high watermark, the ISR, elections and
power loss are modelled here.

Time: a step takes no time, except `wait` (its seconds), and the steps that wait for a
session to end (`expire-session`, SIGKILL `kill`, `power-loss`: the broker's session
timeout). Followers that stop catching up leave the ISR after replica.lag.time.max.ms of
that time; a paused broker, or one cut off from the quorum, loses its session after its
session timeout. High watermark checkpoints are written by `wait` steps at least as long as
replica.high.watermark.checkpoint.interval.ms and by clean shutdowns only: steps are
assumed to follow each other faster than the checkpoint interval (the scripted scenarios
wait explicitly wherever they need a checkpoint, e.g. KIP-101 scenario 1).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from checkers.abstract import from_spec
from checkers.lineage import EpochStarts, Lineage
from checkers.model import Fate, truncate_follower
from checkers.protocol import Protocol
from checkers.verdict import DIVERGED, PartitionVerdict, judge_partition
from suites.explore.schedule import (
    QUORUM,
    Cluster,
    Cut,
    ElectPreferred,
    ElectUnclean,
    Endpoint,
    ExpireSession,
    Heal,
    HoldBack,
    Kill,
    Pause,
    PowerLoss,
    Produce,
    Restart,
    Resume,
    Role,
    Schedule,
    Step,
    Wait,
)

RUNNING, STOPPED, PAUSED = "running", "stopped", "paused"
LEADER, FOLLOWER = "leader", "follower"


class SimulationError(Exception):
    """The schedule is outside what the simulator models."""


@dataclass(frozen=True)
class SimOptions:
    # KAFKA-7415 (2.1): a new leader records its epoch in its epoch cache when elected, not
    # with its first write. None: from KIP-279 rules on (2.0.x, which did not, departs).
    epoch_on_election: bool | None = None
    # The ZooKeeper-mode controller bumps the leader epoch when it drops a failed follower
    # from the ISR (LeaderAndIsr.newLeaderAndIsr); KRaft did too before 3.6 (KAFKA-15021).
    bump_epoch_on_isr_shrink: bool = True


@dataclass(frozen=True)
class SimBatch:
    base: int
    last: int
    epoch: int  # -1 for message format v1 (no leader epochs, before 0.11)
    tag: str  # the write it came from: equal tags, equal batches

    @property
    def span(self) -> str:
        return f"[{self.base}, {self.last}]"


@dataclass
class Replica:
    """One broker's replica of the partition, and what that broker believes about it."""

    broker: int
    batches: list[SimBatch] = field(default_factory=list)
    leo: int = 0
    epochs: EpochStarts = field(default_factory=list)  # the leader epoch cache
    hw: int = 0
    hw_checkpoint: int = 0  # replication-offset-checkpoint
    flushed: int = 0  # everything below is on disk (the recovery point)
    role: str | None = None  # LEADER or FOLLOWER, as this broker believes
    leader: int | None = None  # the leader it follows
    epoch: int = -1  # the leader epoch it knows
    isr: list[int] = field(default_factory=list)  # as leader: its view of the ISR
    needs_truncation: bool = False
    stuck: str | None = None  # why its fetching stopped for good
    fetched: dict[int, int] = field(default_factory=dict)  # as leader: follower -> its LEO
    lag: dict[int, float] = field(default_factory=dict)  # as leader: follower -> seconds

    def spans(self) -> list[tuple[int, int, int]]:
        return [(b.base, b.last, b.epoch) for b in self.batches]


@dataclass
class Node:
    broker: int
    status: str = RUNNING
    registered: bool = True  # holds a session (ZooKeeper) / is unfenced (KRaft)
    disconnected: float = 0.0  # seconds its session has gone without heartbeats


@dataclass
class ControllerView:
    leader: int | None
    epoch: int
    isr: list[int]


@dataclass
class Write:
    id: int
    acks: str
    broker: int
    epoch: int
    batches: list[tuple[int, int, str]]  # (base, last, tag)
    acknowledged: bool
    step: int

    @property
    def first(self) -> int:
        return self.batches[0][0]

    @property
    def last(self) -> int:
        return self.batches[-1][1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "acks": self.acks,
            "broker": self.broker,
            "epoch": self.epoch,
            "offsets": [self.first, self.last],
            "acknowledged": self.acknowledged,
            "step": self.step,
        }


@dataclass
class StepRecord:
    index: int
    step: str
    status: str  # "done", "skipped" or "rejected"
    targets: dict[str, Any] = field(default_factory=dict)
    note: str = ""  # what was observed when skipped or rejected
    events: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "step": self.step,
            "status": self.status,
            "targets": self.targets,
            "note": self.note,
            "events": self.events,
        }


@dataclass
class Prediction:
    protocol: Protocol
    outcome: Fate
    diverged_at: int | None
    below_high_watermark: bool
    stuck: dict[int, str]
    lost_acknowledged: list[Write]  # acknowledged acks=all writes missing from the leader
    lost_acks1: list[Write]  # acknowledged acks=1 writes missing from the leader
    unclean_elections: int
    power_losses: int
    leader: int | None
    leader_epoch: int
    isr: list[int]
    logs: dict[int, list[tuple[int, int, int]]]
    log_end_offsets: dict[int, int]
    high_watermarks: dict[int, int]
    steps: list[StepRecord]
    events: list[str]
    verdict: PartitionVerdict
    # Near misses, for ranking schedules: the most versions of one offset the replicas held
    # at once; the most pairs of ISR members that held different data at one offset after
    # a step (either could be elected cleanly: KAFKA-6361's precondition); whether a
    # follower in the ISR that could not fetch lacked the leader's data after a step.
    max_divergent_replicas: int = 0
    max_isr_divergence: int = 0
    isr_gap: bool = False
    risky_elections: int = 0  # clean elections leaving an ISR member that can't truncate
    clean_elections: int = 0  # leader changes within the ISR (preferred, failover, shutdown)
    divergent_failovers: int = 0  # ... to a leader whose data differs from a cut-off replica's

    @property
    def executed(self) -> int:
        return sum(1 for s in self.steps if s.status != "skipped")

    @property
    def skipped(self) -> int:
        return sum(1 for s in self.steps if s.status == "skipped")

    def failure(self) -> str | None:
        """What the run would be a finding for, by the invariants `logfork replay` judges:
        replicas converge; nothing stays stuck; with no unclean election (and no power
        loss, where KIP-966's rules decide instead) no acknowledged acks=all write is lost.
        None: the schedule passes."""
        if self.outcome is Fate.STUCK:
            return "stuck"
        if self.outcome is Fate.DIVERGED:
            return "diverged"
        if self.lost_acknowledged and not self.unclean_elections and not self.power_losses:
            return "lost-acknowledged"
        return None

    def summary(self) -> str:
        if self.outcome is Fate.STUCK:
            who = ", ".join(f"broker {b} ({why})" for b, why in sorted(self.stuck.items()))
            head = f"stuck: {who}"
        elif self.outcome is Fate.DIVERGED:
            where = "below" if self.below_high_watermark else "above"
            head = f"diverged at offset {self.diverged_at} ({where} the high watermark)"
        else:
            head = "consistent"
        lost = [w.id for w in self.lost_acknowledged]
        if lost:
            head += f"; acknowledged acks=all writes lost: {lost}"
        return f"{head} ({self.protocol.rules})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "protocol": self.protocol.value,
            "outcome": self.outcome.value,
            "failure": self.failure(),
            "summary": self.summary(),
            "diverged_at": self.diverged_at,
            "below_high_watermark": self.below_high_watermark,
            "stuck": {str(b): why for b, why in self.stuck.items()},
            "lost_acknowledged": [w.to_dict() for w in self.lost_acknowledged],
            "lost_acks1": [w.to_dict() for w in self.lost_acks1],
            "unclean_elections": self.unclean_elections,
            "power_losses": self.power_losses,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "isr": self.isr,
            "logs": {str(b): [list(x) for x in log] for b, log in self.logs.items()},
            "log_end_offsets": {str(b): v for b, v in self.log_end_offsets.items()},
            "high_watermarks": {str(b): v for b, v in self.high_watermarks.items()},
            "steps": [s.to_dict() for s in self.steps],
        }


def _differ(a: Replica, b: Replica) -> bool:
    """Do two replicas hold different batches at some offset both hold?"""
    j = 0
    for x in a.batches:
        while j < len(b.batches) and b.batches[j].last < x.base:
            j += 1
        if j == len(b.batches):
            return False
        y = b.batches[j]
        if y.base <= x.last and (x.base, x.last, x.tag) != (y.base, y.last, y.tag):
            return True
    return False


class _Skip(Exception):
    def __init__(self, observed: str) -> None:
        super().__init__(observed)
        self.observed = observed


class _Rejected(Exception):
    pass


class Simulator:
    """A cluster in the state a schedule's steps have left it in. `apply` runs one step,
    `finish` heals everything, lets the replicas converge and predicts the outcome."""

    def __init__(
        self, cluster: Cluster, protocol: Protocol, options: SimOptions | None = None
    ) -> None:
        if cluster.replication_factor not in (2, 3):
            raise SimulationError(
                f"the simulator models replication factors 2 and 3, not "
                f"{cluster.replication_factor}"
            )
        self.cluster = cluster
        self.protocol = protocol
        self.options = options or SimOptions()
        self.v1 = protocol is Protocol.HIGH_WATERMARK  # message format v1: no epochs
        eoe = self.options.epoch_on_election
        self.epoch_on_election = (
            protocol in (Protocol.KIP_279, Protocol.DIVERGING_EPOCH) if eoe is None else eoe
        )
        self.assignment = list(cluster.replicas)
        self.nodes = {b: Node(b) for b in cluster.broker_ids}
        self.replicas = {b: Replica(b) for b in self.assignment}
        self.ctl = ControllerView(None, -1, list(self.assignment))
        self.controller_id = cluster.controller or next(
            (b for b in cluster.broker_ids if b not in self.assignment), 1
        )
        self.cuts: set[frozenset[Any]] = set()
        self.time = 0.0
        self.writes: list[Write] = []
        self.records: list[StepRecord] = []
        self.events: list[str] = []
        self.unclean_elections = 0
        self._failed: set[int] = set()  # brokers whose session ended, for the controller
        self.power_losses = 0
        self.max_divergent = 0
        self.max_isr_divergence = 0
        self.isr_gap = False
        self.risky_elections = 0
        self.clean_elections = 0
        self.divergent_failovers = 0
        self._step = -1
        # Topic creation: the first replica of the assignment leads epoch 0 (KIP-101: every
        # leader gets an epoch; the controller starts at 0).
        self.ctl.leader = self.assignment[0]
        self.ctl.epoch = 0
        self.settle()

    # -- the cluster's topology -----------------------------------------------------------

    def _event(self, text: str) -> None:
        prefix = f"step {self._step}: " if self._step >= 0 else ""
        self.events.append(prefix + text)

    def alive(self, node: Any) -> bool:
        """Running and not paused (QUORUM always is)."""
        return node == QUORUM or self.nodes[node].status == RUNNING

    def linked(self, a: Any, b: Any) -> bool:
        return frozenset((a, b)) not in self.cuts

    def can_talk(self, a: Any, b: Any) -> bool:
        return a == b or (self.alive(a) and self.alive(b) and self.linked(a, b))

    def registered(self, broker: int) -> bool:
        return self.nodes[broker].registered

    def _controller_broker(self) -> int | None:
        """ZooKeeper mode: the broker acting as controller. It keeps the role until its
        session ends; then the lowest registered broker takes over (model's choice: in
        Kafka the first to create /controller wins)."""
        if self.cluster.mode == "kraft":
            return None
        if not self.registered(self.controller_id):
            successor = next((b for b in self.cluster.broker_ids if self.registered(b)), None)
            if successor is not None and successor != self.controller_id:
                self._event(f"broker {successor} becomes the controller")
                self.controller_id = successor
        return self.controller_id if self.registered(self.controller_id) else None

    def _reaches_controller(self, broker: int) -> bool:
        """Can the controller's LeaderAndIsr (KRaft: the metadata log) reach the broker?"""
        if self.cluster.mode == "kraft":
            return self.can_talk(broker, QUORUM)
        ctl = self._controller_broker()
        return ctl is not None and self.can_talk(broker, ctl)

    def _can_write_isr(self, broker: int) -> bool:
        """A leader changes the ISR by writing to ZooKeeper (KRaft: AlterPartition to the
        controller); it needs its session and the link."""
        return self.registered(broker) and self.can_talk(broker, QUORUM)

    def _session_timeout(self, broker: int) -> float:
        return self.cluster.session_timeout_ms(broker) / 1000

    # -- logs -----------------------------------------------------------------------------

    def lineage(self, r: Replica) -> Lineage:
        return from_spec(
            r.broker,
            [(b.base, b.last, b.epoch, b.tag) for b in r.batches],
            high_watermark=r.hw,
            log_end_offset=r.leo,
            log_start_offset=0,
            epochs=None if self.v1 else list(r.epochs),
        )

    def _assign_epoch(self, r: Replica, epoch: int, start: int) -> None:
        """LeaderEpochFileCache.assign: a new latest entry; entries it contradicts (same or
        later epoch, same or later start) go."""
        if epoch < 0 or (r.epochs and r.epochs[-1] == (epoch, start)):
            return
        if r.epochs and r.epochs[-1][0] == epoch and r.epochs[-1][1] <= start:
            return
        r.epochs = [(e, s) for e, s in r.epochs if e < epoch and s < start]
        r.epochs.append((epoch, start))

    def _append(self, r: Replica, batches: list[SimBatch]) -> None:
        for b in batches:
            r.batches.append(b)
            r.leo = b.last + 1
            if not r.epochs or b.epoch > r.epochs[-1][0]:
                self._assign_epoch(r, b.epoch, b.base)
        flush = self.cluster.topic_config.flush_messages
        if flush is not None and r.leo - r.flushed >= flush:
            r.flushed = r.leo
        self._measure_divergence()

    def _truncate_log(self, r: Replica, offset: int, *, to_target: bool) -> list[SimBatch]:
        """Truncate to `offset`; a batch holding it goes whole. With `to_target` the log end
        offset becomes `offset` itself even then, as Log.truncateTo did before 2.0 (the
        MID_BATCH departure of suites/scenarios/kip_279_s1.py)."""
        kept = [b for b in r.batches if b.last < offset]
        removed = r.batches[len(kept) :]
        if to_target and offset < r.leo:
            r.leo = offset
        elif removed:
            r.leo = min(offset, removed[0].base)
        else:
            r.leo = min(offset, r.leo)
        r.batches = kept
        r.epochs = [(e, s) for e, s in r.epochs if s < r.leo]
        r.hw = min(r.hw, r.leo)
        r.flushed = min(r.flushed, r.leo)
        return removed

    def _measure_divergence(self) -> None:
        """Track the most versions of one offset the replicas held at once (for ranking:
        a divergence that later heals is still a near miss)."""
        seen: dict[int, set[str]] = {}
        for r in self.replicas.values():
            for b in r.batches:
                seen.setdefault(b.base, set()).add(b.tag)
        self.max_divergent = max([self.max_divergent, *(len(v) for v in seen.values())])

    # -- the controller -------------------------------------------------------------------

    def _bump(self) -> None:
        self.ctl.epoch += 1

    def _note_clean_election(self, leaving: int | None = None) -> None:
        """A near miss worth ranking: the new leader lacks a batch that another live ISR
        member holds, and that member cannot reach it to truncate (KIP-279 scenario 1,
        steps 2 and 3: both brokers still in the ISR, cut off from each other)."""
        leader = self.replicas[self.ctl.leader] if self.ctl.leader is not None else None
        if leader is None:
            return
        self.clean_elections += 1
        for r in self.replicas.values():
            reachable = self.alive(r.broker) and self.can_talk(r.broker, leader.broker)
            if r is not leader and not reachable and _differ(leader, r):
                # KIP-279 scenario 1, step 3: the new leader and a replica that cannot
                # truncate yet hold different data at the same offsets.
                self.divergent_failovers += 1
                break
        held = {(x.base, x.last, x.tag) for x in leader.batches}
        for b in self.ctl.isr:
            if b in (leader.broker, leaving) or not self.alive(b):
                continue
            if self.can_talk(b, leader.broker):
                continue  # it will truncate what the new leader lacks: an ordinary failover
            if any((x.base, x.last, x.tag) not in held for x in self.replicas[b].batches):
                self.risky_elections += 1
                return

    def _controller_reacts(self) -> bool:
        """The controller acts on brokers that lost their session: failed followers leave
        the ISR, a failed leader is replaced (from the ISR; out of it only where unclean
        election is enabled), an offline partition gets a leader when one comes back."""
        ctl, changed = self.ctl, False
        if self.cluster.mode == "zk" and self._controller_broker() is None:
            return False  # no broker holds a session: nobody can act
        # Once per failure, as the controller's broker-failure event does: a ZooKeeper-mode
        # leader may add a follower that still fetches straight back (faults/session.py).
        failed, self._failed = self._failed, set()
        for b in sorted(failed):
            if b in ctl.isr and b != ctl.leader and not self.registered(b) and len(ctl.isr) > 1:
                ctl.isr.remove(b)
                if self.options.bump_epoch_on_isr_shrink:
                    self._bump()
                self._event(f"controller removes failed broker {b} from the ISR {ctl.isr}")
                changed = True
        if ctl.leader is not None and self.registered(ctl.leader):
            return changed
        old = ctl.leader
        clean = [b for b in self.assignment if b in ctl.isr and self.registered(b)]
        unclean = [b for b in self.assignment if self.registered(b)]
        if clean:
            ctl.leader = clean[0]
            ctl.isr = [b for b in ctl.isr if self.registered(b)]
            self._bump()
            self._note_clean_election()
            self._event(
                f"controller elects broker {ctl.leader} from the ISR (epoch {ctl.epoch}, "
                f"ISR {ctl.isr})"
            )
            return True
        if unclean and self.cluster.topic_config.unclean_leader_election_enable:
            self._elect_unclean(unclean[0])
            return True
        if old is not None:
            ctl.leader = None
            self._event(f"partition offline: no live replica in the ISR {ctl.isr}")
            return True
        return changed

    def _elect_unclean(self, broker: int) -> None:
        self.ctl.leader = broker
        self.ctl.isr = [broker]
        self._bump()
        self.unclean_elections += 1
        self._event(
            f"controller elects out-of-sync broker {broker} (unclean, epoch {self.ctl.epoch})"
        )

    def _registrations(self) -> bool:
        changed = False
        for node in self.nodes.values():
            b = node.broker
            if not node.registered and self.alive(b) and self.linked(b, QUORUM):
                node.registered = True
                node.disconnected = 0.0
                self._event(f"broker {b} registers (new session)")
                changed = True
        return changed

    def _deliver(self) -> bool:
        """LeaderAndIsr: brokers the controller can reach learn the partition's state."""
        ctl, changed = self.ctl, False
        if ctl.leader is None:
            return False
        for b, r in sorted(self.replicas.items()):
            if not (self.alive(b) and self.registered(b) and self._reaches_controller(b)):
                continue
            if ctl.leader == b:
                if r.role != LEADER or r.epoch != ctl.epoch:
                    self._become_leader(r)
                    changed = True
                elif r.isr != ctl.isr:
                    r.isr = list(ctl.isr)
                    changed = True
            elif r.role != FOLLOWER or r.leader != ctl.leader or r.epoch != ctl.epoch:
                self._become_follower(r, ctl.leader)
                changed = True
        return changed

    def _become_leader(self, r: Replica) -> None:
        r.role, r.leader, r.epoch = LEADER, r.broker, self.ctl.epoch
        r.isr = list(self.ctl.isr)
        r.needs_truncation, r.stuck = False, None
        r.fetched, r.lag = {}, {}
        if self.epoch_on_election and not self.v1:
            self._assign_epoch(r, r.epoch, r.leo)
        # Partition.makeLeader: the followers' log end offsets are unknown until they fetch,
        # so only a leader alone in the ISR moves its high watermark at once.
        if r.isr == [r.broker]:
            r.hw = max(r.hw, r.leo)
        self._event(
            f"broker {r.broker} leads in epoch {r.epoch} (log end offset {r.leo}, ISR {r.isr})"
        )

    def _become_follower(self, r: Replica, leader: int) -> None:
        new_leader = r.role != FOLLOWER or r.leader != leader
        r.role, r.leader, r.epoch = FOLLOWER, leader, self.ctl.epoch
        r.isr, r.fetched, r.lag = [], {}, {}
        if not new_leader:
            return
        r.needs_truncation, r.stuck = True, None
        self._event(f"broker {r.broker} follows broker {leader} in epoch {r.epoch}")
        if self.v1:
            # Before KIP-101 the follower truncates to its high watermark as it becomes a
            # follower, before fetching anything (ReplicaManager.makeFollowers).
            self._truncate(r, r)

    # -- replication ----------------------------------------------------------------------

    def _truncate(self, r: Replica, leader: Replica, *, quiet: bool = False) -> bool:
        """Run the protocol's truncation (checkers.model) and apply where it lands. `quiet`:
        say nothing unless the log changed."""
        before = r.leo
        result = truncate_follower(self.lineage(leader), self.lineage(r), self.protocol)
        target = result.truncation_offset
        requested = self._requested(result, r, leader)
        mid_batch = self.protocol in (Protocol.HIGH_WATERMARK, Protocol.KIP_101) and (
            target < requested < r.leo
        )
        self._truncate_log(r, requested if mid_batch else target, to_target=mid_batch)
        r.needs_truncation = False
        if quiet and r.leo == before:
            return False
        for line in result.describe()[: len(result.rounds)]:
            self._event(f"broker {r.broker}: {line}")
        if mid_batch:
            self._event(
                f"broker {r.broker}: Log.truncateTo({requested}) drops the batch holding it "
                f"yet sets the log end offset to {requested} (Kafka before 2.0)"
            )
        return r.leo != before

    def _requested(self, result: Any, r: Replica, leader: Replica) -> int:
        """The offset a KIP-101 or high-watermark truncation asked for (before the batch
        holding it rounds it down)."""
        last = result.rounds[-1] if result.rounds else None
        if last is None:
            return result.truncation_offset
        if last.request == "high-watermark" or last.fallback or last.answer_offset is None:
            return min(r.hw, r.leo)
        if self.protocol is Protocol.KIP_101:
            return min(last.answer_offset, r.leo)
        return result.truncation_offset

    def _fetch(self, r: Replica, leader: Replica) -> bool:
        """One fetch round to catch up: whole batches from the one holding the follower's
        log end offset."""
        if r.leo > leader.leo:
            # OffsetOutOfRange above the leader's end (an unclean leader, or KIP-101's
            # scenario 2): the follower truncates to the leader's log end offset. Before 2.0
            # it halts instead when the topic forbids unclean elections.
            old = self.protocol in (Protocol.HIGH_WATERMARK, Protocol.KIP_101)
            if old and not self.cluster.topic_config.unclean_leader_election_enable:
                r.stuck = (
                    f"halted: log end offset {r.leo} beyond the leader's {leader.leo} and "
                    "truncation not allowed (unclean.leader.election.enable=false)"
                )
                self._event(f"broker {r.broker} {r.stuck}")
                return True
            removed = self._truncate_log(r, leader.leo, to_target=old)
            self._event(
                f"broker {r.broker}: offset out of range, truncated "
                f"{', '.join(b.span for b in removed) or 'nothing'} to the leader's log end "
                f"offset {leader.leo}"
            )
            return True
        index = next((i for i, b in enumerate(leader.batches) if b.last >= r.leo), None)
        if index is None:
            return False
        first = leader.batches[index]
        if first.base < r.leo:
            r.stuck = (
                f"out-of-order offsets: batch {first.span} from broker {leader.broker} starts "
                f"below its log end offset {r.leo}"
            )
            self._event(f"broker {r.broker} is stuck: {r.stuck}")
            return True
        fetched = list(leader.batches[index:])
        self._append(r, fetched)
        shown = fetched[0].span if len(fetched) == 1 else f"{fetched[0].span}..{fetched[-1].span}"
        self._event(f"broker {r.broker} fetches {shown} from broker {leader.broker}")
        return True

    def _replicate(self) -> bool:
        changed = False
        for b, r in sorted(self.replicas.items()):
            if r.role != FOLLOWER or r.stuck or not self.alive(b) or r.leader is None:
                continue
            leader = self.replicas.get(r.leader)
            if leader is None or leader.role != LEADER or not self.can_talk(b, r.leader):
                continue
            if self.protocol is Protocol.DIVERGING_EPOCH and leader.epoch != r.epoch:
                continue  # KIP-320: fetches carry the leader epoch; a mismatch is fenced
            if r.needs_truncation:
                changed |= self._truncate(r, leader)
            elif self.protocol is Protocol.DIVERGING_EPOCH and r.epochs:
                # KIP-595's diverging epoch: every fetch is checked, not only the first.
                changed |= self._truncate(r, leader, quiet=True)
            changed |= self._fetch(r, leader)
            if leader.fetched.get(b) != r.leo:
                leader.fetched[b] = r.leo
                changed = True
            if r.leo >= leader.leo and not r.stuck:
                leader.lag[b] = 0.0
        for r in self.replicas.values():
            if r.role == LEADER and self.alive(r.broker):
                known = [r.leo] + [r.fetched.get(f) for f in r.isr if f != r.broker]
                if None not in known:
                    hw = min(x for x in known if x is not None)
                    if hw > r.hw:
                        r.hw = hw
                        changed = True
        for b, r in self.replicas.items():
            leader = self.replicas.get(r.leader) if r.leader is not None else None
            if (
                r.role == FOLLOWER
                and leader is not None
                and leader.role == LEADER
                and self.can_talk(b, leader.broker)
                and not r.stuck
            ):
                hw = min(r.leo, leader.hw)
                if hw != r.hw:
                    r.hw = hw
                    changed = True
        return changed

    def _expand_isr(self) -> bool:
        ctl = self.ctl
        lead = self.replicas.get(ctl.leader) if ctl.leader is not None else None
        if (
            lead is None
            or lead.role != LEADER
            or lead.epoch != ctl.epoch
            or not self.alive(lead.broker)
            or not self._can_write_isr(lead.broker)
        ):
            return False
        changed = False
        for b in self.assignment:
            f = self.replicas[b]
            leo = lead.fetched.get(b)
            if b in ctl.isr or leo is None or f.stuck:
                continue
            fetching = f.role == FOLLOWER and f.leader == lead.broker
            # KRaft keeps fenced brokers out of the ISR (KIP-841); ZooKeeper mode does not.
            fenced = self.cluster.mode == "kraft" and not self.registered(b)
            if fetching and not fenced and self.can_talk(b, lead.broker) and leo >= lead.hw:
                ctl.isr = [x for x in self.assignment if x in ctl.isr or x == b]
                lead.isr = list(ctl.isr)
                lead.lag[b] = 0.0
                self._event(f"broker {b} caught up and rejoins the ISR {ctl.isr}")
                changed = True
        return changed

    def settle(self) -> None:
        """Let the cluster act until nothing changes: sessions, the controller, LeaderAndIsr,
        truncation, fetching, high watermarks, ISR expansion. No time passes."""
        for _ in range(200):
            changed = self._registrations()
            changed |= self._controller_reacts()
            changed |= self._deliver()
            changed |= self._replicate()
            changed |= self._expand_isr()
            if not changed:
                return
        raise SimulationError("the simulated cluster did not settle")  # a simulator bug

    def advance(self, seconds: float) -> None:
        """Let time pass: sessions of paused or cut-off brokers expire; the leader drops
        followers that have not caught up for replica.lag.time.max.ms."""
        self.time += seconds
        for node in self.nodes.values():
            b = node.broker
            heard = node.status == RUNNING and self.linked(b, QUORUM)
            if not node.registered or heard:
                node.disconnected = 0.0
                continue
            node.disconnected += seconds
            if node.disconnected >= self._session_timeout(b):
                node.registered = False
                self._failed.add(b)
                what = "is fenced" if self.cluster.mode == "kraft" else "loses its session"
                self._event(f"broker {b} {what} ({node.status}, {node.disconnected:g} s)")
        lead = self.replicas.get(self.ctl.leader) if self.ctl.leader is not None else None
        if lead is not None and lead.role == LEADER and self.alive(lead.broker):
            limit = self.cluster.lag_time_ms(lead.broker) / 1000
            for b in [x for x in lead.isr if x != lead.broker]:
                f = self.replicas[b]
                fetching = (
                    f.role == FOLLOWER
                    and f.leader == lead.broker
                    and not f.stuck
                    and self.can_talk(b, lead.broker)
                    and f.leo >= lead.leo
                )
                lead.lag[b] = 0.0 if fetching else lead.lag.get(b, 0.0) + seconds
                # The leader's ISR write is conditional on the version it knows
                # (zkVersion, partition epoch): a stale view makes it fail.
                current = lead.isr == self.ctl.isr
                if lead.lag[b] > limit and current and self._can_write_isr(lead.broker):
                    self.ctl.isr.remove(b)
                    lead.isr = list(self.ctl.isr)
                    self._event(
                        f"leader {lead.broker} drops broker {b} from the ISR after "
                        f"{lead.lag[b]:g} s behind (ISR {self.ctl.isr})"
                    )
        self.settle()

    # -- steps ----------------------------------------------------------------------------

    def _candidates(self, target: Endpoint) -> list[Any]:
        if isinstance(target, int) and not isinstance(target, bool):
            return [target]
        if target == QUORUM:
            return [QUORUM]
        role = Role(target)
        ctl = self.ctl
        if role is Role.LEADER:
            return [ctl.leader] if ctl.leader is not None else []
        if role is Role.FOLLOWER_IN_ISR:
            return sorted(b for b in ctl.isr if b != ctl.leader)
        if role is Role.OUT_OF_SYNC:
            return sorted(b for b in self.assignment if b not in ctl.isr)
        if role is Role.CONTROLLER:
            if self.cluster.mode == "kraft":
                return [QUORUM]
            ctl_broker = self._controller_broker()
            return [ctl_broker] if ctl_broker is not None else []
        return list(self.cluster.broker_ids)

    def _pick(self, target: Endpoint, ok: Callable[[Any], str | None], what: str) -> Any:
        """The first candidate of `target` (lowest id) that `ok` accepts (returns None for);
        else skip, saying why each candidate did not fit."""
        candidates = self._candidates(target)
        if not candidates:
            raise _Skip(f"no {target} to {what}")
        reasons = []
        for c in candidates:
            why = ok(c)
            if why is None:
                return c
            reasons.append(why)
        raise _Skip("; ".join(reasons))

    def _describe_broker(self, b: int) -> str:
        node = self.nodes[b]
        return f"broker {b} is {node.status}" + ("" if node.registered else " without a session")

    def apply(self, step: Step) -> StepRecord:
        """Run one step. A step whose precondition does not hold is skipped, saying what was
        observed instead; it changes nothing."""
        self._step = len(self.records)
        record = StepRecord(self._step, step.describe(), "done")
        start = len(self.events)
        handler = getattr(self, "_do_" + type(step).__name__.lower())
        try:
            record.targets = handler(step) or {}
        except _Skip as skip:
            record.status, record.note = "skipped", skip.observed
        except _Rejected as rejected:
            record.status, record.note = "rejected", str(rejected)
        record.events = self.events[start:]
        self.records.append(record)
        self._near_misses()
        return record

    def _near_misses(self) -> None:
        isr = [self.replicas[b] for b in self.ctl.isr]
        pairs = sum(1 for i, a in enumerate(isr) for other in isr[i + 1 :] if _differ(a, other))
        self.max_isr_divergence = max(self.max_isr_divergence, pairs)
        lead = self.replicas.get(self.ctl.leader) if self.ctl.leader is not None else None
        if lead is not None:
            for r in isr:
                if r is not lead and r.leo < lead.leo and not self.can_talk(r.broker, lead.broker):
                    self.isr_gap = True

    def _do_produce(self, step: Produce) -> dict[str, Any]:
        def ok(b: Any) -> str | None:
            r = self.replicas.get(b)
            if r is None:
                return f"broker {b} holds no replica"
            if not self.alive(b):
                return self._describe_broker(b)
            if r.role != LEADER:
                return f"broker {b} does not know it leads (it is {r.role or 'not started'})"
            return None

        if step.to == Role.LEADER and self.ctl.leader is None:
            raise _Skip("the partition has no leader (offline)")
        b = self._pick(step.to, ok, "produce to")
        r = self.replicas[b]
        min_isr = self.cluster.topic_config.min_insync_replicas
        if step.acks == "all" and len(r.isr) < min_isr:
            raise _Rejected(
                f"NOT_ENOUGH_REPLICAS: ISR {r.isr} is below min.insync.replicas={min_isr}; "
                "nothing written"
            )
        write = Write(len(self.writes), step.acks, b, r.epoch, [], False, self._step)
        epoch = -1 if self.v1 else r.epoch
        if self.v1:
            # Message format v1 without compression: every record is its own message.
            batches = [
                SimBatch(r.leo + i, r.leo + i, epoch, f"w{write.id}.{i}") for i in range(step.count)
            ]
        else:
            batches = [SimBatch(r.leo, r.leo + step.count - 1, epoch, f"w{write.id}")]
        write.batches = [(x.base, x.last, x.tag) for x in batches]
        self._append(r, batches)
        self.writes.append(write)
        self._event(
            f"broker {b} appends {batches[0].base}..{batches[-1].last} in epoch {r.epoch} "
            f"(write {write.id}, acks={step.acks})"
        )
        self.settle()
        end = batches[-1].last + 1
        if step.acks == "1":
            write.acknowledged = True
        else:
            # acks=all: acknowledged once the high watermark passes the write and the ISR
            # still has min.insync.replicas; otherwise the request times out.
            write.acknowledged = r.role == LEADER and r.hw >= end and len(r.isr) >= min_isr
        self._event(
            f"write {write.id} {'acknowledged' if write.acknowledged else 'not acknowledged'} "
            f"(high watermark {r.hw}, ISR {r.isr})"
        )
        return {"to": b}

    def _do_holdback(self, step: HoldBack) -> dict[str, Any]:
        leader = self.ctl.leader
        if leader is None or not self.alive(leader):
            raise _Skip("no live leader to hold a follower back from")

        def ok(b: Any) -> str | None:
            if b not in self.ctl.isr or b == leader:
                return f"broker {b} is not a follower in the ISR {self.ctl.isr}"
            if not self.alive(b):
                return self._describe_broker(b)
            if not self.linked(b, leader):
                return f"broker {b} is already cut from leader {leader}"
            return None

        b = self._pick(step.target, ok, "hold back")
        self.cuts.add(frozenset((b, leader)))
        self._event(f"broker {b} cut off from leader {leader} (held back)")
        self.settle()
        return {"follower": b, "leader": leader}

    def _do_cut(self, step: Cut) -> dict[str, Any]:
        for a in self._candidates(step.a):
            for b in self._candidates(step.b):
                if a != b and self.linked(a, b):
                    self.cuts.add(frozenset((a, b)))
                    self._event(f"link {a} - {b} cut")
                    self.settle()
                    return {"a": a, "b": b}
        raise _Skip(f"no uncut link between {step.a} and {step.b}")

    def _do_heal(self, step: Heal) -> dict[str, Any]:
        if step.a is None:
            if not self.cuts:
                raise _Skip("nothing is cut")
            healed = sorted(sorted(map(str, c)) for c in self.cuts)
            self.cuts.clear()
            self._event(f"every cut healed ({healed})")
            self.settle()
            return {"links": healed}
        assert step.b is not None
        for a in self._candidates(step.a):
            for b in self._candidates(step.b):
                if frozenset((a, b)) in self.cuts:
                    self.cuts.discard(frozenset((a, b)))
                    self._event(f"link {a} - {b} healed")
                    self.settle()
                    return {"a": a, "b": b}
        raise _Skip(f"no cut between {step.a} and {step.b}")

    def _do_expiresession(self, step: ExpireSession) -> dict[str, Any]:
        def ok(b: Any) -> str | None:
            if not self.alive(b) or not self.registered(b):
                return self._describe_broker(b)
            if not self.linked(b, QUORUM):
                return f"broker {b} is already cut from the quorum"
            return None

        b = self._pick(step.target, ok, "expire")
        self.cuts.add(frozenset((b, QUORUM)))
        self._event(f"broker {b} cut off from the quorum until its session expires")
        self.advance(self._session_timeout(b))
        return {"broker": b}

    def _do_electpreferred(self, step: ElectPreferred) -> dict[str, Any]:
        preferred = self.assignment[0]
        if self.ctl.leader == preferred:
            raise _Skip(f"preferred replica {preferred} already leads")
        if not self.registered(preferred):
            raise _Skip(self._describe_broker(preferred))
        if preferred not in self.ctl.isr:
            raise _Skip(f"preferred replica {preferred} is not in the ISR {self.ctl.isr}")
        if self.cluster.mode == "zk" and self._controller_broker() is None:
            raise _Skip("no controller")
        self.ctl.leader = preferred
        self._bump()
        self._note_clean_election()
        self._event(f"preferred election: broker {preferred} leads in epoch {self.ctl.epoch}")
        self.settle()
        return {"leader": preferred}

    def _do_electunclean(self, step: ElectUnclean) -> dict[str, Any]:
        live_isr = [b for b in self.ctl.isr if self.registered(b)]
        if live_isr:
            raise _Skip(f"ISR member(s) {live_isr} alive: that would be a clean election")

        def ok(b: Any) -> str | None:
            if b not in self.replicas:
                return f"broker {b} holds no replica"
            if b in self.ctl.isr:
                return f"broker {b} is in the ISR {self.ctl.isr}"
            if not self.registered(b):
                return self._describe_broker(b)
            return None

        b = self._pick(step.target, ok, "elect")
        self._elect_unclean(b)
        self.settle()
        return {"leader": b}

    def _stop(self, b: int) -> None:
        node = self.nodes[b]
        node.status = STOPPED
        r = self.replicas.get(b)
        if r is not None:
            r.role, r.leader, r.isr, r.fetched, r.lag = None, None, [], {}, {}

    def _do_kill(self, step: Kill) -> dict[str, Any]:
        def ok(b: Any) -> str | None:
            return None if self.alive(b) else self._describe_broker(b)

        b = self._pick(step.target, ok, "kill")
        if step.signal == "SIGTERM":
            self._controlled_shutdown(b)
            self.settle()
        else:
            self._stop(b)
            self._event(f"broker {b} killed (SIGKILL)")
            self.advance(self._session_timeout(b))
        return {"broker": b}

    def _controlled_shutdown(self, b: int) -> None:
        """SIGTERM: the controller moves leadership away and drops the broker from the ISR
        first; the broker flushes its logs and checkpoints its high watermarks, then
        deregisters."""
        ctl = self.ctl
        if self.registered(b) and b in self.replicas:
            others = [x for x in self.assignment if x in ctl.isr and x != b and self.registered(x)]
            if ctl.leader == b and others:
                ctl.leader = others[0]
                ctl.isr.remove(b)
                self._bump()
                self._note_clean_election(leaving=b)
                self._event(f"controlled shutdown: broker {others[0]} leads in epoch {ctl.epoch}")
            elif ctl.leader != b and b in ctl.isr and len(ctl.isr) > 1:
                ctl.isr.remove(b)
                if self.options.bump_epoch_on_isr_shrink:
                    self._bump()
                self._event(f"controlled shutdown: broker {b} leaves the ISR {ctl.isr}")
        r = self.replicas.get(b)
        if r is not None:
            r.flushed = r.leo
            r.hw_checkpoint = r.hw
        self._stop(b)
        self.nodes[b].registered = False
        self._event(f"broker {b} shut down (SIGTERM)")

    def _do_restart(self, step: Restart) -> dict[str, Any]:
        def ok(b: Any) -> str | None:
            return None if self.nodes[b].status == STOPPED else self._describe_broker(b)

        b = self._pick(step.target, ok, "restart")
        self._start(b)
        self.settle()
        return {"broker": b}

    def _start(self, b: int) -> None:
        node = self.nodes[b]
        node.status = RUNNING
        node.disconnected = 0.0
        r = self.replicas.get(b)
        if r is not None:
            # Log recovery: the end is where the last whole batch on disk ends; epoch cache
            # entries past it go (KIP-101 "Unclean Shutdown"); the high watermark comes
            # back from its checkpoint, no higher than the log end; the recovered log is
            # the new recovery point.
            r.leo = r.batches[-1].last + 1 if r.batches else 0
            r.epochs = [(e, s) for e, s in r.epochs if s < r.leo]
            r.hw = min(r.hw_checkpoint, r.leo)
            r.flushed = r.leo
            r.role, r.leader, r.epoch, r.stuck = None, None, -1, None
            r.needs_truncation = True
        self._event(f"broker {b} starts (log end offset {r.leo if r else '-'})")

    def _do_pause(self, step: Pause) -> dict[str, Any]:
        def ok(b: Any) -> str | None:
            return None if self.alive(b) else self._describe_broker(b)

        b = self._pick(step.target, ok, "pause")
        self.nodes[b].status = PAUSED
        self._event(f"broker {b} paused")
        self.settle()
        return {"broker": b}

    def _do_resume(self, step: Resume) -> dict[str, Any]:
        def ok(b: Any) -> str | None:
            return None if self.nodes[b].status == PAUSED else self._describe_broker(b)

        b = self._pick(step.target, ok, "resume")
        self.nodes[b].status = RUNNING
        self._event(f"broker {b} resumed")
        self.settle()
        return {"broker": b}

    def _do_powerloss(self, step: PowerLoss) -> dict[str, Any]:
        def ok(b: Any) -> str | None:
            return None if self.alive(b) else self._describe_broker(b)

        b = self._pick(step.target, ok, "cut the power of")
        r = self.replicas.get(b)
        lost: list[SimBatch] = []
        if r is not None:
            cut = r.flushed
            if step.lose is not None and r.batches:
                nth = r.batches[-step.lose].base if step.lose <= len(r.batches) else 0
                cut = max(cut, nth)
            lost = [x for x in r.batches if x.last >= cut]
            r.batches = [x for x in r.batches if x.last < cut]
            r.leo = r.batches[-1].last + 1 if r.batches else 0
        self._stop(b)
        self.power_losses += 1
        spans = ", ".join(x.span for x in lost) or "nothing"
        self._event(f"broker {b} loses power; unflushed {spans} gone")
        self.advance(self._session_timeout(b))
        return {"broker": b, "lost_batches": len(lost)}

    def _do_wait(self, step: Wait) -> dict[str, Any]:
        self.advance(step.seconds)
        for b, r in self.replicas.items():
            interval = self.cluster.checkpoint_interval_ms(b) / 1000
            if self.alive(b) and step.seconds >= interval:
                r.hw_checkpoint = r.hw
        return {}

    # -- the end --------------------------------------------------------------------------

    def finish(self) -> Prediction:
        """Heal everything (cuts, pauses, stopped brokers: those the controller has in the
        ISR first, then by broker id), let the replicas converge, and judge."""
        self._step = -1
        self._event("heal: every cut, pause and stopped broker")
        self.cuts.clear()
        for node in self.nodes.values():
            if node.status == PAUSED:
                node.status = RUNNING
        self.settle()
        stopped = [b for b, n in self.nodes.items() if n.status == STOPPED]
        for b in sorted(stopped, key=lambda x: (x not in self.ctl.isr, x)):
            self._start(b)
            self.settle()
        longest = max(self.cluster.lag_time_ms(b) for b in self.cluster.broker_ids) / 1000
        self.advance(longest + 1)
        return self._predict()

    def _predict(self) -> Prediction:
        lineages = [self.lineage(r) for _, r in sorted(self.replicas.items())]
        verdict = judge_partition(lineages, leader=self.ctl.leader, protocol=self.protocol)
        stuck = {b: r.stuck for b, r in sorted(self.replicas.items()) if r.stuck}
        if stuck:
            outcome = Fate.STUCK
        elif verdict.status == DIVERGED:
            outcome = Fate.DIVERGED
        else:
            outcome = Fate.CONSISTENT
        lead = self.replicas.get(self.ctl.leader) if self.ctl.leader is not None else None
        held = {(b.base, b.last, b.tag) for b in lead.batches} if lead else set()
        lost = [w for w in self.writes if w.acknowledged and not set(w.batches) <= held]
        return Prediction(
            protocol=self.protocol,
            outcome=outcome,
            diverged_at=verdict.diverged_at,
            below_high_watermark=verdict.below_high_watermark,
            stuck=stuck,
            lost_acknowledged=[w for w in lost if w.acks == "all"],
            lost_acks1=[w for w in lost if w.acks == "1"],
            unclean_elections=self.unclean_elections,
            power_losses=self.power_losses,
            leader=self.ctl.leader,
            leader_epoch=self.ctl.epoch,
            isr=list(self.ctl.isr),
            logs={b: r.spans() for b, r in sorted(self.replicas.items())},
            log_end_offsets={b: r.leo for b, r in sorted(self.replicas.items())},
            high_watermarks={b: r.hw for b, r in sorted(self.replicas.items())},
            steps=list(self.records),
            events=list(self.events),
            verdict=verdict,
            max_divergent_replicas=self.max_divergent,
            max_isr_divergence=self.max_isr_divergence,
            risky_elections=self.risky_elections,
            clean_elections=self.clean_elections,
            divergent_failovers=self.divergent_failovers,
            isr_gap=self.isr_gap,
        )

    def copy(self) -> Simulator:
        return copy.deepcopy(self)


def simulate(
    schedule: Schedule | Iterable[Step],
    protocol: Protocol,
    *,
    cluster: Cluster | None = None,
    options: SimOptions | None = None,
) -> Prediction:
    """Run every step of a schedule, heal, converge, and predict the outcome."""
    if isinstance(schedule, Schedule):
        cluster, steps = schedule.cluster, list(schedule.steps)
    else:
        steps = list(schedule)
        if cluster is None:
            raise SimulationError("steps without a schedule need a cluster")
    sim = Simulator(cluster, protocol, options)
    for step in steps:
        sim.apply(step)
    return sim.finish()
