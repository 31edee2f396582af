"""The simulated cluster's state, and the primitives every part of the simulator uses.

Per replica: its log (batches tagged with the write they came from and the leader epoch
that wrote them), log end offset, high watermark and its checkpoint, leader epoch cache,
flush point; per broker: running, stopped or paused, its ZooKeeper session (KRaft: not
fenced); the links between brokers and to the quorum; the controller's view of the
partition: leader, leader epoch, ISR. `SimState` holds them, answers who can talk to whom,
and appends to and truncates the logs; a replica's log is judged as a lineage
(`checkers.abstract.from_spec`: equal tags, equal batches).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from basics.protocol import Protocol
from basics.releases import Release
from checkers.abstract import from_spec
from checkers.lineage import EpochStarts, Lineage
from runrecord.schedule import Cluster
from runrecord.schedule_cluster import ELR_FEATURE
from runrecord.steps.base import QUORUM
from runrecord.typed import to_json

RUNNING, STOPPED, PAUSED = "running", "stopped", "paused"
LEADER, FOLLOWER = "leader", "follower"
AS_SEEN = " (as on the brokers)"


class SimulationError(Exception):
    """The schedule is outside what the simulator models."""


@dataclass(frozen=True)
class SimOptions:
    # KAFKA-7415 (2.1): a new leader records its epoch in its epoch cache when elected, not
    # with its first write. None: from KIP-279 rules on (2.0.x, which did not, departs).
    epoch_on_election: bool | None = None
    # The ZooKeeper-mode controller bumps the leader epoch when it drops a failed follower
    # from the ISR (LeaderAndIsr.newLeaderAndIsr); KRaft did too before metadata version
    # 3.6-IV0 (KAFKA-15021). None: as the cluster's mode has it from 3.6 on (a release's
    # version given as the protocol decides for KRaft 3.3 to 3.5).
    bump_epoch_on_isr_shrink: bool | None = None
    # Steps (by index) that stop a broker with a high watermark checkpoint that had caught
    # up with its high watermark. Kafka writes the checkpoint every
    # replica.high.watermark.checkpoint.interval.ms whatever the steps do; the model takes
    # steps to follow each other faster than that (see the package), and these are the
    # crashes where that may not have held (`checkers.simulate.runs.checkpoint_variants`).
    checkpoint_before: frozenset[int] = frozenset()
    # (step, broker, offset) for each crash (SIGKILL, power loss) after which a run on real
    # brokers read the broker's replication-offset-checkpoint on disk, before it started
    # again: the high watermark it restarts from, which the model's own clock cannot place.
    # Told, the model takes it at that crash (not `checkpoint_before`), and
    # `checkpoint_variants` does not vary that crash.
    hw_checkpoint_at: tuple[tuple[int, int, int], ...] = ()
    # ZooKeeper mode: (step, broker) for each step after which the brokers had another
    # controller. When /controller goes, every live broker races to create it (and before
    # 2.1 an unclean election deletes it on purpose, KAFKA-6835): who wins is a race the
    # model cannot call, so a run on real brokers tells it (`Live`), and the model's own
    # choice (the lowest registered broker) stands only where nothing was seen.
    controller_after: tuple[tuple[int, int], ...] = ()
    # (step, broker, log end) for each broker's power loss under a filesystem model
    # (runrecord.power; an outage cuts several in one step): what survives there is decided
    # by the broker's own fsyncs, which the model does not follow, so a run on real brokers
    # tells it where the schedule's partition ended up.
    kept_after_power_loss: tuple[tuple[int, int, int], ...] = ()
    # Steps (by index) a run on real brokers skipped because the transaction coordinator
    # could not serve them (runrecord.schedule_roles.Unserved): the model does not follow
    # the coordinator, so the run tells it, and it skips them too.
    unserved: frozenset[int] = frozenset()
    # (step, broker) for each step naming the transaction coordinator: the broker a run on
    # real brokers found leading its log. Where none was told, the model takes the lowest
    # running broker with a session (its guess, for drawing and ranking schedules).
    coordinator_at: tuple[tuple[int, int], ...] = ()
    # How long each step took on real brokers (StepResult.seconds): the wall clock, which
    # the model does not keep, for a coordinator request that waits out request.timeout.ms
    # and for the coordinator's abort at the transaction timeout
    # (checkers.simulate.transactions). Without it the model counts its own time, and such
    # a request makes the schedule one it cannot predict.
    step_seconds: tuple[float, ...] = ()
    # Of each step's seconds, those it spent before its fault took effect (setting up rules
    # in every node it touches, under load, say): what held before the step ran on through
    # them, what the step makes did not (`ControlPlane.catch_up`). Empty: none.
    step_lead: tuple[float, ...] = ()
    # Where a run on real brokers saw the coordinator abort the open transaction at its
    # timeout (its log says when): before the fault of each step given by index took
    # effect, the number of steps meaning before the heal. The model aborts there instead
    # of placing the timeout by `step_seconds`, which cannot say where inside a step it
    # fell. Empty: nothing told.
    timeout_aborts: tuple[int, ...] = ()
    # ... of those, the ones whose moment fell inside the step before, after its fault took
    # effect (`runrecord.replay.inside_a_step`): the step's own outcome was not yet settled.
    timeout_aborts_within: tuple[int, ...] = ()


@dataclass(frozen=True)
class SimBatch:
    base: int
    last: int
    epoch: int  # -1 for message format v1 (no leader epochs, before 0.11)
    tag: str  # the write it came from: equal tags, equal batches
    txn: int | None = None  # the transaction it belongs to, or whose marker it is
    control: bool = False  # a transaction marker (one control record)

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
    flushed: int = 0  # everything below is on disk (the checkpointed recovery point)
    recovered: int = 0  # the recovery point in memory after a restart, not yet checkpointed
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
    clean: bool = True  # its last stop was a controlled shutdown (it left the marker)
    restarted: bool = False  # started since it last registered: a new incarnation


@dataclass
class ControllerView:
    leader: int | None
    epoch: int
    isr: list[int]
    # KIP-966: eligible leader replicas, and the last leader once the ISR and ELR are empty
    elr: list[int] = field(default_factory=list)
    last_known_leader: int | None = None


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
    controller: int | None = None  # ZooKeeper mode: the broker that took the role meanwhile

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


def differ(a: Replica, b: Replica) -> bool:
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


class SimState:
    """A cluster of one partition in the state the steps so far have left it in. The
    simulator's parts make it act (checkers.simulate.simulator): replication, the
    controller and time, the transactions, reassignments, slow links; its rules, the steps."""

    def __init__(
        self, cluster: Cluster, protocol: Protocol | str, options: SimOptions | None = None
    ) -> None:
        # What the model was asked to follow: a protocol's rules alone, or a release's
        # version, whose rules and release-specific behaviour it follows (`Prediction.rules`).
        self.rules = protocol
        release = None if isinstance(protocol, Protocol) else Release(protocol)
        if release is not None:
            protocol = release.protocol  # a release's version: its rules
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
        bump = self.options.bump_epoch_on_isr_shrink
        if bump is None:
            bump = cluster.mode == "zk" or (release is not None and not release.at_least(3, 6))
        self.bump_epoch_on_isr_shrink = bump
        # KIP-966 eligible leader replicas: on where the cluster was formatted with them,
        # and by default for new KRaft clusters from 4.1 (a release given as the protocol).
        level = cluster.features.get(ELR_FEATURE)
        self.elr = cluster.mode == "kraft" and (
            level == 1 or (level is None and release is not None and release.at_least(4, 1))
        )
        # From 4.0 the controller takes a broker's new incarnation out of every ISR at its
        # registration, and an unclean one (no clean-shutdown marker) out of the ELR too
        # (KAFKA-18106, KAFKA-18635). ELR needs 4.0, so a cluster with it has this.
        self.reregistration_fences = self.elr or (
            cluster.mode == "kraft" and release is not None and release.at_least(4, 0)
        )
        # AlterPartition (KIP-497, 2.7): a leader asks the controller to change the ISR.
        # Before it, a ZooKeeper-mode leader wrote the ISR to ZooKeeper itself.
        self.alter_partition = release is None or release.has_alter_partition
        # KIP-360 (2.5): a transactional producer whose write timed out bumps its epoch
        # (InitProducerId with its current one) once it has aborted; librdkafka does so
        # from the release that takes it.
        self.abort_bumps_epoch = release is None or release.at_least(2, 5)
        # From 4.3.0 a KRaft transaction coordinator drops a marker whose partition has no
        # leader as if the partition were deleted (KAFKA-20734: the metadata cache rewritten
        # in Java answers a leaderless partition as an unknown one).
        self.skips_leaderless = (
            cluster.mode == "kraft" and release is not None and release.at_least(4, 3)
        )
        # A follower skips a fetched batch of a leader epoch above the one it fetches in,
        # and the rest (KAFKA-18723, apache/kafka#18852: 3.9.1, 4.0.1, 4.1.0).
        self.skips_newer_epoch = release is None or any(
            release.at_least(*fixed) and not release.at_least(*line)
            for fixed, line in (((3, 9, 1), (4,)), ((4, 0, 1), (4, 1)), ((4, 1), (99,)))
        )
        self.held: set[int] = set()  # brokers whose AlterPartition requests are held
        # The ISR changes a held broker asked for, by broker; kept after the heal, as what
        # the hold did. `pending`: the one request each held broker has in flight (Kafka
        # sends the next only once this one is answered), with the partition as the broker
        # saw it then (leader, epoch, ISR), which the controller checks when it lands.
        self.held_changes: dict[int, list[str]] = {}
        self.pending: dict[int, tuple[str, int, tuple[Any, ...]]] = {}
        self.assignment = list(cluster.replicas)
        # What a reassignment needs in the ISR to complete (checkers.simulate.reassignment):
        # its added replicas before 3.8; every target replica from 3.8 (KAFKA-15665); from 4.3
        # that only where the target is smaller than the replicas it replaces (KAFKA-19975).
        self.reassign_rule = "adding"
        if release is None or release.at_least(4, 3):
            self.reassign_rule = "shrinking"
        elif release.at_least(3, 8):
            self.reassign_rule = "target"
        self.nodes = {b: Node(b) for b in cluster.broker_ids}
        self.replicas = {b: Replica(b) for b in self.assignment}
        self.ctl = ControllerView(None, -1, list(self.assignment))
        self.controller_id = cluster.controller or next(
            (b for b in cluster.broker_ids if b not in self.assignment), 1
        )
        self.cuts: set[frozenset[Any]] = set()
        # Slow links, (sender, receiver) -> KB/s; fillers a follower not fetching will get
        # first from its leader, in KB; fetch responses on their way (slow_links.LateResponse).
        self.slowed: dict[tuple[int, int], int] = {}
        self.fillers: dict[tuple[int, int], int] = {}
        self.late_responses: list[Any] = []
        # Late fetch responses answered with a slice of the leader's log; of those, the
        # ones whose bytes had changed under them when read; and those a follower appended.
        self.late_slices = self.late_rewritten = self.late_appends = 0
        self.late_stage = 0  # slow_links.LATE_ISOLATED, LATE_TRUNCATED: near misses
        self.time = 0.0
        self.writes: list[Write] = []
        self.records: list[StepRecord] = []
        self.events: list[str] = []
        self.unclean_elections = 0
        self.last_known_elections = 0  # KIP-966: last known leaders elected (ISR, ELR empty)
        self._failed: set[int] = set()  # brokers whose session ended, for the controller
        self.elected: int | None = None  # the controller chosen during the step under way
        self.power_losses = 0
        self.power_drops: list[tuple[int, int]] = []  # the partition's tails they dropped
        self.max_divergent = 0
        self.max_isr_divergence = 0
        self.isr_gap = False
        self.risky_elections = 0
        self.clean_elections = 0
        self.divergent_failovers = 0
        self._step = -1
        # KRaft: the controller quorum's voters (1 is c1) and the one leading it; the
        # controllers that do not vote (a dynamic quorum's spares and removed voters); the
        # voters whose voting incarnation lost its disk (dynamic: it never answers again, and
        # counts against the majority until removed, KIP-853).
        self.voters = {v: RUNNING for v in range(1, cluster.controllers + 1)}
        self.observers = {
            v: RUNNING for v in range(cluster.controllers + 1, cluster.controller_nodes + 1)
        }
        self.gone: set[int] = set()
        self.quorum_leader: int | None = 1 if cluster.mode == "kraft" else None
        self.cannot_predict: list[str] = []  # why the model cannot predict the schedule
        # Topic creation: the first replica of the assignment leads epoch 0 (KIP-101: every
        # leader gets an epoch; the controller starts at 0).
        self.ctl.leader = self.assignment[0]
        self.ctl.epoch = 0

    # -- the cluster's topology -----------------------------------------------------------

    def _event(self, text: str) -> None:
        prefix = f"step {self._step}: " if self._step >= 0 else ""
        self.events.append(prefix + text)

    def alive(self, node: Any) -> bool:
        """Running and not paused; QUORUM while a majority of its voters is (KRaft; ZooKeeper
        always is)."""
        if node == QUORUM:
            return self.quorum_up()
        return self.nodes[node].status == RUNNING

    @staticmethod
    def voter_cut(voter: int) -> frozenset[Any]:
        """The cut that isolates a voter from the other voters."""
        return frozenset((f"c{voter}", QUORUM))

    def voters_up(self) -> list[int]:
        return [
            v
            for v, s in self.voters.items()
            if s == RUNNING and self.voter_cut(v) not in self.cuts and v not in self.gone
        ]

    def quorum_up(self) -> bool:
        """A majority of the voters running and reachable: the quorum has a leader."""
        return len(self.voters_up()) >= len(self.voters) // 2 + 1

    def linked(self, a: Any, b: Any) -> bool:
        return frozenset((a, b)) not in self.cuts

    def can_talk(self, a: Any, b: Any) -> bool:
        return a == b or (self.alive(a) and self.alive(b) and self.linked(a, b))

    def registered(self, broker: int) -> bool:
        return self.nodes[broker].registered

    def _describe_broker(self, b: int) -> str:
        node = self.nodes[b]
        return f"broker {b} is {node.status}" + ("" if node.registered else " without a session")

    def told_coordinator(self) -> int | None:
        """The transaction coordinator a run told for this step (SimOptions.coordinator_at)."""
        return dict(self.options.coordinator_at).get(self._step)

    def coordinator(self) -> int | None:
        """The transaction coordinator as a run told it for this step (SimOptions), else the
        model's guess."""
        told = self.told_coordinator()
        if told is not None:
            return told
        return next(
            (b for b in self.cluster.broker_ids if self.alive(b) and self.registered(b)), None
        )

    def _controller_broker(self) -> int | None:
        """ZooKeeper mode: the broker acting as controller. It keeps the role until its
        session ends; then the lowest registered broker takes over (model's choice: in
        Kafka the first to create /controller wins), unless the brokers were seen to
        choose (SimOptions.controller_after)."""
        if self.cluster.mode == "kraft":
            return None
        if not self.registered(self.controller_id):
            seen = self._controller_seen()
            successor = next((b for b in self.cluster.broker_ids if self.registered(b)), None)
            if seen is not None and self.registered(seen):
                successor = seen
            if successor is not None and successor != self.controller_id:
                how = AS_SEEN if seen == successor else ""
                self._controller_moves(successor, how)
                # The successor starts from the live brokers in /brokers/ids
                # (KafkaController.onControllerFailover): a broker whose session ended
                # while no controller acted stays in the ISR, as the old controller does.
                self._failed.clear()
        return self.controller_id if self.registered(self.controller_id) else None

    def _controller_moves(self, broker: int, how: str = "") -> None:
        self._event(f"broker {broker} becomes the controller{how}")
        self.controller_id = broker
        self.elected = broker

    def told_hw_checkpoint(self, broker: int) -> int | None:
        """The high watermark checkpoint a run read on the broker's disk after this step's
        crash (SimOptions.hw_checkpoint_at), if it told one."""
        return next(
            (o for i, b, o in self.options.hw_checkpoint_at if (i, b) == (self._step, broker)),
            None,
        )

    def _controller_seen(self) -> int | None:
        """The broker the brokers had as controller after this step, where it changed."""
        return dict(self.options.controller_after).get(self._step)

    def _reaches_controller(self, broker: int) -> bool:
        """Can the controller's LeaderAndIsr (KRaft: the metadata log) reach the broker?"""
        if self.cluster.mode == "kraft":
            return self.can_talk(broker, QUORUM)
        ctl = self._controller_broker()
        return ctl is not None and self.can_talk(broker, ctl)

    def _can_write_isr(self, broker: int, change: tuple[str, int] | None = None) -> bool:
        """A leader changes the ISR by writing to ZooKeeper (from 2.7 and in KRaft:
        AlterPartition to the controller); it needs its session and the link, and a request
        that is not held. `change` ("add" or "remove", a broker): what it asks for, kept
        as its request in flight when it is held."""
        if not (self.registered(broker) and self.can_talk(broker, QUORUM)):
            return False
        if broker in self.held:
            if change is not None and broker not in self.pending:
                ctl = self.ctl
                self.pending[broker] = (*change, (ctl.leader, ctl.epoch, tuple(ctl.isr)))
                said = f"{change[0]} {change[1]}"
                self.held_changes.setdefault(broker, []).append(said)
                self._event(f"broker {broker}'s AlterPartition ({said}) held")
            return False
        return True

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

    # -- brokers stopping and starting ----------------------------------------------------

    def _stop(self, b: int, *, clean: bool = False) -> None:
        node = self.nodes[b]
        node.status = STOPPED
        node.clean = clean
        self.pending.pop(b, None)  # its request in flight dies with it; a hold stays
        r = self.replicas.get(b)
        if r is not None:
            told = self.told_hw_checkpoint(b)
            if told is not None:
                r.hw_checkpoint = told
            elif self._step in self.options.checkpoint_before:
                r.hw_checkpoint = r.hw
            r.role, r.leader, r.isr, r.fetched, r.lag = None, None, [], {}, {}

    def _start(self, b: int) -> None:
        node = self.nodes[b]
        node.status = RUNNING
        node.disconnected = 0.0
        node.restarted = True
        r = self.replicas.get(b)
        if r is not None:
            # Log recovery: the end is where the last whole batch on disk ends; epoch cache
            # entries past it go (KIP-101 "Unclean Shutdown"); the high watermark comes
            # back from its checkpoint, no higher than the log end. The recovered log is the
            # new recovery point in memory, but recovery-point-offset-checkpoint is written
            # only by the log manager's periodic task (log.flush.offset.checkpoint.interval.ms,
            # 60 s, the first 30 s after start): until then a power loss falls back to the
            # old point (faults/power.py reads the file).
            r.leo = r.batches[-1].last + 1 if r.batches else 0
            r.epochs = [(e, s) for e, s in r.epochs if s < r.leo]
            r.hw = min(r.hw_checkpoint, r.leo)
            r.flushed = min(r.flushed, r.leo)
            r.recovered = r.leo
            r.role, r.leader, r.epoch, r.stuck = None, None, -1, None
            r.needs_truncation = True
        self._event(f"broker {b} starts (log end offset {r.leo if r else '-'})")
