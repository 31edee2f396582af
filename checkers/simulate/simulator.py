"""The simulated cluster: its state (checkers.simulate.state) and the parts that make it act,
composed: replication, the transactional producer, the control plane and time,
reassignments, slow links. `Simulator.apply` runs a step by its kind's rule
(checkers.simulate.rules, one module per family of step kinds), which resolves the step's
targets (roles, lowest eligible broker id first), checks its precondition (a step that
cannot run is skipped, saying what was observed) and runs it; `finish` heals everything,
lets the replicas converge and predicts the outcome (checkers.simulate.prediction).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from basics.protocol import Protocol
from checkers.simulate.controller import ControlPlane
from checkers.simulate.prediction import Prediction, predict
from checkers.simulate.reassignment import Reassignments
from checkers.simulate.replication import Replication
from checkers.simulate.rules.registry import RULES
from checkers.simulate.slow_links import SlowLinks
from checkers.simulate.state import (
    AS_SEEN,
    LEADER,
    PAUSED,
    RUNNING,
    STOPPED,
    SimBatch,
    SimOptions,
    SimState,
    StepRecord,
    Write,
)
from checkers.simulate.transactions import ABORT, Transactions
from runrecord.schedule import Cluster
from runrecord.schedule_roles import (
    Rejected,
    Skip,
    View,
    candidates,
    cannot_use_log_dir,
    pick,
)
from runrecord.steps.base import QUORUM, Endpoint, Role, Step
from runrecord.steps.writes import REQUEST_TIMEOUT

# log.flush.offset.checkpoint.interval.ms (Kafka's default): how often a broker writes the
# recovery points of its logs to recovery-point-offset-checkpoint.
RECOVERY_CHECKPOINT_SECONDS = 60


class Simulator(SimState):
    """A cluster in the state a schedule's steps have left it in. `apply` runs one step,
    `finish` heals everything, lets the replicas converge and predicts the outcome. Its
    parts share its state through it (each holds `sim`) and reach each other by name."""

    def __init__(
        self, cluster: Cluster, protocol: Protocol | str, options: SimOptions | None = None
    ) -> None:
        """`protocol`: the rules to follow, or a release's version (its rules, as
        `basics.releases.Release.protocol` says)."""
        super().__init__(cluster, protocol, options)
        self.replication = Replication(self)
        self.transactions = Transactions(self)
        self.control = ControlPlane(self)
        self.reassignments = Reassignments(self)
        self.slow = SlowLinks(self)
        self.control.settle()  # the topic is created: its first leader learns it leads

    # -- what several parts take a turn in, in this order --------------------------------

    def between_steps(self) -> None:
        """The wall clock before a step: the control plane's time (and the transactions'
        timeouts it runs), then the late responses on slow links that time brings."""
        self.control.before_step()
        self.slow.before_step()

    def _replicate(self) -> bool:
        """One round of every follower: those held back behind a filler get it first."""
        self.slow.send_fillers()
        return self.replication._replicate()

    def _stop(self, b: int, *, clean: bool = False) -> None:
        """A broker stops, taking its connections (and the responses in flight on them)."""
        self.slow.drop_responses(b)
        super()._stop(b, clean=clean)

    def awaiting(self, broker: int) -> bool:
        """Whether the broker waits on a fetch response still on its way (slow links)."""
        return self.slow.awaiting(broker)

    def view(self) -> View:
        """The cluster as a step's roles are resolved against it."""
        ctl = self.ctl
        controller = None if self.cluster.mode == "kraft" else self._controller_broker()
        return View(
            self.cluster.mode,
            self.cluster.broker_ids,
            self.assignment,
            ctl.leader,
            ctl.isr,
            controller,
            self.coordinator(),
        )

    def _candidates(self, target: Endpoint) -> list[Any]:
        return candidates(target, self.view())

    def _pick(self, target: Endpoint, ok: Callable[[Any], str | None], what: str) -> Any:
        return pick(target, self.view(), ok, what)

    def _status_is(self, status: str) -> Callable[[Any], str | None]:
        """The precondition that a broker is running (not paused), stopped or paused, for
        `_pick`: None when it is, else what it is."""

        def ok(b: Any) -> str | None:
            fits = self.alive(b) if status == RUNNING else self.nodes[b].status == status
            return None if fits else self._describe_broker(b)

        return ok

    def apply(self, step: Step) -> StepRecord:
        """Run one step. A step whose precondition does not hold is skipped, saying what was
        observed instead; it changes nothing."""
        self._step = len(self.records)
        self.between_steps()
        self.elected = None
        record = StepRecord(self._step, step.describe(), "done")
        start = len(self.events)
        handler = RULES[type(step)]
        try:
            if self._step in self.options.unserved:
                raise Skip("the coordinator or a spanned partition could not serve it")
            record.targets = handler(self, step) or {}
        except Skip as skip:
            record.status, record.note = "skipped", skip.observed
        except Rejected as rejected:
            record.status, record.note = "rejected", str(rejected)
        self._follow_controller_seen()
        record.events, record.controller = self.events[start:], self.elected
        self.records.append(record)
        self.replication._near_misses()
        self.slow.after_step()
        return record

    def _follow_controller_seen(self) -> None:
        """After a step: take the controller the brokers had, where they moved it while the
        model's kept its session (an unclean election before 2.4 deletes /controller)."""
        seen = self._controller_seen()
        if self.cluster.mode == "kraft" or seen is None or seen == self.controller_id:
            return
        if self.registered(seen):
            self._controller_moves(seen, AS_SEEN)
            self.control.settle()

    def _write(
        self, count: int, acks: str, to: Any, txn: int | None = None, *, begin: bool = False
    ) -> dict[str, Any]:
        """One batch of `count` records through `to` (a transaction's, with `txn`)."""

        def ok(b: Any) -> str | None:
            r = self.replicas.get(b)
            if r is None:
                return f"broker {b} holds no replica"
            if not self.alive(b):
                return self._describe_broker(b)
            if r.role != LEADER:
                return f"broker {b} does not know it leads (it is {r.role or 'not started'})"
            return None

        if to == Role.LEADER and self.ctl.leader is None:
            raise Skip("the partition has no leader (offline)")
        b = self._pick(to, ok, "produce to")
        r = self.replicas[b]
        min_isr = self.cluster.topic_config.min_insync_replicas
        if acks == "all" and len(r.isr) < min_isr:
            raise Rejected(
                f"NOT_ENOUGH_REPLICAS: ISR {r.isr} is below min.insync.replicas={min_isr}; "
                "nothing written"
            )
        if begin:
            self.transactions.begin_txn()
        write = Write(len(self.writes), acks, b, r.epoch, [], False, self._step)
        epoch = -1 if self.v1 else r.epoch
        if self.v1:
            # Message format v1 without compression: every record is its own message.
            batches = [
                SimBatch(r.leo + i, r.leo + i, epoch, f"w{write.id}.{i}") for i in range(count)
            ]
        else:
            batches = [SimBatch(r.leo, r.leo + count - 1, epoch, f"w{write.id}", txn)]
        write.batches = [(x.base, x.last, x.tag) for x in batches]
        self._append(r, batches)
        self.writes.append(write)
        self._event(
            f"broker {b} appends {batches[0].base}..{batches[-1].last} in epoch {r.epoch} "
            f"(write {write.id}, acks={acks})"
        )
        self.control.settle()
        end = batches[-1].last + 1
        if acks == "1":
            write.acknowledged = True
        else:
            # acks=all: acknowledged once the high watermark passes the write and the ISR
            # still has min.insync.replicas; otherwise the write waits in the leader's
            # purgatory until the request times out, while sessions end and the ISR may
            # shrink under it, which can still complete it.
            def completed() -> bool:
                return r.role == LEADER and r.hw >= end and len(r.isr) >= min_isr

            write.acknowledged = completed()
            if not write.acknowledged:
                self._pass_time(REQUEST_TIMEOUT)
                write.acknowledged = completed()
        self._event(
            f"write {write.id} {'acknowledged' if write.acknowledged else 'not acknowledged'} "
            f"(high watermark {r.hw}, ISR {r.isr})"
        )
        return {"to": b}

    def _waits_out_its_session(self) -> bool:
        """Whether a broker back within its session registers only once that session ended:
        in ZooKeeper mode its old ephemeral registration must expire first, and a KRaft
        controller from 4.0 refuses another incarnation while the old session lives
        (DUPLICATE_BROKER_REGISTRATION: KAFKA-17793; KAFKA-19047 would have accepted it
        and was reverted, KAFKA-19130). Before 4.0 a KRaft broker registers again at once."""
        return self.cluster.mode == "zk" or self.reregistration_fences

    def _log_dir_target(self, target: Endpoint, failing: bool, what: str) -> int:
        running, view, up = self._status_is(RUNNING), self.view(), self.can_talk
        why = lambda b: cannot_use_log_dir(  # noqa: E731
            b, view, running(b), failing=failing, quorum=up(b, QUORUM)
        )
        return self._pick(target, why, what)

    def _quorum_back(self, was_up: bool) -> None:
        """After a change to the voters: the quorum led by its lowest reachable voter while
        a majority is up; a quorum that came back starts every broker's session afresh."""
        if not self.quorum_up():
            self.quorum_leader = None
            return
        if self.quorum_leader is None:
            self.quorum_leader = self.voters_up()[0]
        if not was_up:
            for node in self.nodes.values():
                node.disconnected = 0.0

    def _pass_time(self, seconds: float) -> None:
        """Time passing within a step: `advance`, and the periodic checkpoints (high
        watermark, recovery point) of the brokers that run through it."""
        self.control.advance(seconds)
        for b, r in self.replicas.items():
            interval = self.cluster.checkpoint_interval_ms(b) / 1000
            if self.alive(b) and seconds >= interval:
                r.hw_checkpoint = r.hw
            if self.alive(b) and seconds >= RECOVERY_CHECKPOINT_SECONDS:
                r.flushed = max(r.flushed, min(r.recovered, r.leo))

    # -- the end --------------------------------------------------------------------------

    def finish(self) -> Prediction:
        """Heal everything (cuts, pauses, stopped brokers: those the controller has in the
        ISR first, then by broker id), let the replicas converge, and judge."""
        self.control.catch_up(len(self.records) - 1)
        self.transactions.abort_if_told_at_heal(len(self.records))
        self._step = -1
        self._event("heal: every cut, pause and stopped broker (and voter)")
        was_up = self.quorum_up()
        self.slow.lift_slow()
        self.cuts.clear()
        for v in self.voters:
            self.voters[v] = RUNNING
        self._quorum_back(was_up)
        self.control._release_held()
        self.transactions.deliver_held_end()
        for node in self.nodes.values():
            if node.status == PAUSED:
                node.status = RUNNING
        self.control.settle()
        stopped = [b for b, n in self.nodes.items() if n.status == STOPPED]
        for b in sorted(stopped, key=lambda x: (x not in self.ctl.isr, x)):
            self._start(b)
            self.control.settle()
        longest = max(self.cluster.lag_time_ms(b) for b in self.cluster.broker_ids) / 1000
        self.control.advance(longest + 1)
        if self.transactions.txn is not None:
            # Left open: the coordinator aborts it once its timeout has passed (a run waits
            # for that before it judges), unless the steps' clock placed it inside one.
            self.transactions.abort_unplaced()
            self.transactions.end_txn(ABORT, "left open: the coordinator aborts it at its timeout")
            self.control.settle()
        return predict(self)

    def copy(self) -> Simulator:
        return copy.deepcopy(self)
