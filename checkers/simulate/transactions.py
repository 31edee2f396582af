"""The schedule's transactional producer on the simulated cluster: its transactions, the
markers its coordinator writes to the partition, and the last stable offset they leave.

One producer, one transaction open at a time. A transaction's writes are acks=all batches,
appended as a `produce` step's are. Ending it (the producer's commit or abort, or the
coordinator's abort once `TXN_TIMEOUT_S` has passed) leaves a marker pending: the
coordinator appends it to the partition's leader as soon as one leads with enough of an
ISR (markers are written with acks=all, KafkaApis.handleWriteTxnMarkersRequest), and keeps
sending it until the leader's high watermark passes it. A marker the leader appended but
that is not yet committed when leadership moves is sent to the next leader too (the
coordinator retries the partition after NOT_LEADER_OR_FOLLOWER), which appends its own copy.
An old leader that does not learn it lost leadership (cut off from the controller) holds the
request until request.timeout.ms: the run's clock says when that ran out. A KRaft
coordinator from 4.3.0 that finds no leader for the partition drops the marker (KAFKA-20734).

The coordinator itself is not modelled: it is taken to be reachable (a run skips a
transactional step whose coordinator is not, and the model never sees that step). Once every
marker is committed the coordinator has forgotten the transaction (CompleteCommit,
CompleteAbort) and never writes its marker again, whatever becomes of the partition.

The partition's leader tracks the producer as Kafka's producer state does
(ProducerStateEntry.currentTxnFirstOffset): its first transactional batch after a marker
opens a transaction there, the next marker closes it. A transaction open on the final
leader's log that the coordinator no longer holds is hanging (KAFKA-20716): its last stable
offset never reaches the high watermark.

A commit or abort may have its first EndTxn held on the wire (`held`): the client's retry
ends the transaction, and the held request reaches the coordinator at the next heal of every
cut. Unless fenced (the producer's epoch bumped since: by the coordinator's abort at the
timeout, or by the producer itself after aborting a transaction whose write timed out,
KIP-360), it ends whatever transaction the producer has open by then, with its own kind:
librdkafka speaks transactions v1 (EndTxn v1) on every release, where the producer's epoch
is the same from one transaction to the next and the coordinator checks only that it
matches (KAFKA-17754; `suites/scenarios/kafka_17754.py` proves it on real brokers). With
none open it changes nothing: the coordinator answers a repeat of its last end, or refuses
one of the other kind (INVALID_TXN_STATE), and fences one from before an epoch bump (an
abort at the timeout). The producer still believes its transaction open; what it does next
(its writes appended after the marker, verified from 3.6 by KIP-890 part 1; its end refused
or taken as a repeat) is the client's, which the model does not follow: a transactional
step after that makes the schedule one the model cannot predict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from checkers.simulate.state import LEADER, STOPPED, SimBatch
from runrecord.outcome import hang_cause as cause_of_hang
from runrecord.schedule_roles import Skip
from runrecord.steps.base import QUORUM

if TYPE_CHECKING:
    from checkers.simulate.simulator import Simulator

# The schedule's transactional producer's transaction.timeout.ms, as a run sets it: past it
# the coordinator aborts the transaction and bumps the producer's epoch.
TXN_TIMEOUT_S = 60.0
# request.timeout.ms as brokers have it by default: the coordinator's WriteTxnMarkers
# requests give up after it (TransactionMarkerChannelManager's network client).
REQUEST_TIMEOUT_S = 30.0
# How often a run's coordinator looks for transactions past their timeout
# (transaction.abort.timed.out.transaction.cleanup.interval.ms, as explore sets it).
ABORT_SCAN_S = 1.0
COMMIT, ABORT = "COMMIT", "ABORT"
# A transaction one of whose writes failed takes no more writes: the producer must abort it
# (librdkafka refuses to produce in the abortable error state, KIP-98).
FAILED_TXN = "a write of the open transaction failed: the producer can only abort it"


def cannot_hold_end(held_already: bool) -> str | None:
    """Why a commit or abort cannot have its EndTxn held: one filter marks the first EndTxn
    on a coordinator's connections, so a second hold would catch the first one's retry."""
    return "an EndTxn is held already (until a heal)" if held_already else None


@dataclass
class Txn:
    id: int
    started: float  # model time of its first write
    begun_at: int = -1  # the step of its first write
    # The step its timeout fell inside, by the run's clock, and where its marker would have
    # gone as that step began (`_time_out_transactions`).
    straddled: tuple[int, tuple[Any, ...]] | None = None
    writes: list[int] = field(default_factory=list)  # ids in SimState.writes
    failed: bool = False  # a write was not acknowledged: the producer can only abort


@dataclass
class Marker:
    txn: int
    kind: str  # COMMIT or ABORT
    epochs: list[int] = field(default_factory=list)  # leader epochs it was appended in
    done: bool = False  # committed on the leader: the coordinator is finished with it
    sent_to: int | None = None  # the broker whose purgatory holds the coordinator's request
    sent_at: int = -1  # ... sent during this step
    # While that broker holds it as a zombie: where a resend would go, as the last step
    # before each left it (step, state); and the step whose wall-clock time the request's
    # timeout fell in, where the run's clock could not say which side of it.
    watched: list[tuple[int, tuple[Any, ...]]] = field(default_factory=list)
    straddled: int | None = None
    skipped: bool = False  # the coordinator dropped it, finding no leader (KAFKA-20734)


class Transactions:
    """The producer's open transaction and the coordinator's pending markers: a part of the
    simulator (`Simulator.transactions`)."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.txn: Txn | None = None
        self.txns = 0  # transactions begun
        self.markers: list[Marker] = []
        self.held_end: str | None = None  # the kind of the EndTxn held on the wire
        self.held_fenced = False  # ... sent before an epoch bump: the coordinator fences it
        self.late_ended = 0  # late EndTxns that ended a transaction the producer had open
        self.cannot_predict: list[str] = []  # why the model cannot predict the schedule
        self.clock_used = False  # the run's clock decided a timeout
        # The broker the producer takes for its coordinator (`_follow_coordinator`).
        self.coordinating: int | None = None
        self.coordinator_told = False  # ... as a run told it (SimOptions.coordinator_at)

    def pending_markers(self) -> list[Marker]:
        return [m for m in self.markers if not m.done]

    def begin_txn(self) -> Txn:
        if self.txn is None:
            self.txn = Txn(self.txns, self.sim.time, self.sim._step)
            self.txns += 1
            self.sim._event(f"transaction {self.txn.id} begins")
        return self.txn

    def end_txn(self, kind: str, why: str) -> Marker:
        """The open transaction ends: its marker is pending from now on."""
        assert self.txn is not None
        marker = Marker(self.txn.id, kind)
        self.markers.append(marker)
        self.sim._event(f"transaction {self.txn.id} ends: {kind} ({why})")
        self.txn = None
        return marker

    # -- the steps -------------------------------------------------------------------------

    def _end_txn(self, kind: str, held: bool | None) -> dict[str, Any]:
        if self.txn is None:
            raise Skip("no transaction is open")
        why = held and cannot_hold_end(self.held_end is not None)
        if why:
            raise Skip(why)
        self._after_late_end()
        self._races_timeout(kind.lower())
        why = "the producer's " + kind.lower()
        if kind == COMMIT and self.txn.failed:
            kind, why = ABORT, "a write failed: the producer can only abort"
        if held:
            # The client sends what it asked for; a failed write makes its commit an abort
            # before anything is sent, and the epoch bump after it fences the held request
            # (on 3.5.2: a late ABORT of such a transaction left the next one alone).
            self.held_end = kind
            self.held_fenced = self.txn.failed and self.sim.abort_bumps_epoch
            why += ", its first EndTxn held on the wire and retried"
        marker = self.end_txn(kind, why)
        self.sim.control.settle()
        return {"transaction": marker.txn, "marker": kind}

    def _races_timeout(self, what: str) -> None:
        """A step of the producer's inside the step its transaction's timeout fell in, by
        the run's clock: which came first is what the model cannot place."""
        s = self.txn.straddled if self.txn is not None else None
        if s is not None and s[0] == self.sim._step and not self.cannot_predict:
            self.cannot_predict.append(
                f"the producer's {what} at step {self.sim._step} raced the coordinator's abort of "
                f"transaction {self.txn.id} at its timeout"  # type: ignore[union-attr]
            )

    def _after_late_end(self) -> None:
        if self.late_ended and not self.cannot_predict:
            self.cannot_predict.append(
                f"the producer goes on at step {self.sim._step} with a transaction a late "
                "EndTxn ended"
            )

    def deliver_held_end(self) -> str | None:
        """The heal of every cut: the held EndTxn reaches the coordinator. What it did, for
        the step's record; None where none was held."""
        kind, self.held_end = self.held_end, None
        if kind is None:
            return None
        if self.held_fenced:
            self.sim._event(f"the late {kind} is fenced: the producer's epoch was bumped since")
            return "fenced"
        if self.txn is None:
            self.sim._event(f"the late {kind} finds no transaction open: nothing changes")
            return "nothing open"
        self.end_txn(kind, "a late EndTxn")
        self.late_ended += 1
        return f"ended transaction {self.markers[-1].txn}"

    # -- the coordinator ---------------------------------------------------------------------

    def before_step(self) -> None:
        """What the wall clock did before a step began: a coordinator's request that timed
        out meanwhile (`_held_by_zombie`) is sent again ahead of the step, and a transaction
        past its timeout is aborted."""
        self._follow_coordinator()
        clocked = self.txn is not None and bool(self.sim.options.step_seconds)
        if clocked:
            self._time_out_transactions()
        if self.pending_markers() and (self._write_markers() or clocked):
            self.sim.control.settle()

    def _write_markers(self) -> bool:
        """The coordinator's markers reaching the partition's leader (`settle`)."""
        lead = (
            self.sim.replicas.get(self.sim.ctl.leader) if self.sim.ctl.leader is not None else None
        )
        changed = False
        for m in self.pending_markers():
            if self._held_by_zombie(m):
                break
            if self.sim.ctl.leader is None and self.sim.skips_leaderless:
                if (zombie := self._stale_coordinator()) is not None:
                    self._cannot(
                        f"the coordinator may be broker {zombie}, cut off from the quorum: its "
                        "own stale metadata, not the controller's, decides whether it finds "
                        "the partition's leader or skips the marker"
                    )
                    break
                # TransactionMarkerChannelManager.addTxnMarkersToBrokerQueue takes a partition
                # the metadata cache gives no leader for as deleted: it drops the marker and
                # completes the transaction (KAFKA-20734; 4.2.2 queued it until a leader came).
                m.done = m.skipped = True
                self.sim._event(
                    f"the coordinator finds no leader for the partition and skips the "
                    f"{m.kind} marker of transaction {m.txn}, as if the partition were deleted"
                )
                changed = True
                continue
            if lead is None or lead.role != LEADER or not self.sim.alive(lead.broker):
                break
            tag = f"m{m.txn}.{len(m.epochs) - 1}"
            mine = next((b for b in lead.batches if b.tag == tag), None)
            if m.epochs and m.epochs[-1] == lead.epoch and mine is not None:
                # Appended in this epoch: done once the high watermark passes it.
                if lead.hw > mine.last:
                    m.done = True
                    self.sim._event(f"the {m.kind} marker of transaction {m.txn} is committed")
                    changed = True
                continue
            if len(lead.isr) < self.sim.cluster.topic_config.min_insync_replicas:
                break  # NOT_ENOUGH_REPLICAS: the coordinator retries
            tag = f"m{m.txn}.{len(m.epochs)}"
            epoch = -1 if self.sim.v1 else lead.epoch
            self.sim._append(lead, [SimBatch(lead.leo, lead.leo, epoch, tag, m.txn, True)])
            m.epochs.append(lead.epoch)
            m.sent_to, m.sent_at = lead.broker, self.sim._step
            self.sim._event(
                f"broker {lead.broker} appends the {m.kind} marker of transaction {m.txn} "
                f"at {lead.leo - 1} in epoch {lead.epoch}"
            )
            changed = True
        return changed

    def _follow_coordinator(self) -> None:
        """Before a step: the broker the producer's coordinator is, as far as the model can
        follow it. A run tells it at a step naming it (SimOptions.coordinator_at). One that
        stopped, or is fenced while it reaches the quorum, gives way to the model's guess (a
        new leader of the coordinator's log). One cut off from the quorum stays: it still
        leads that log in its own metadata and answers the producer, which keeps the
        coordinator it found (seen on 4.3.1: broker 4, cut off, logged 'Creating new marker
        queue map to destination broker 4' for the abort, its own stale leader)."""
        if self.sim.cluster.mode != "kraft" or self._stale_coordinator() is not None:
            return
        told = self.sim.told_coordinator()
        if told is not None:
            self.coordinating, self.coordinator_told = told, True
            return
        c = self.coordinating
        if (
            c is None
            or not self.sim.alive(c)
            or (not self.sim.registered(c) and self.sim.can_talk(c, QUORUM))
        ):
            self.coordinating, self.coordinator_told = self.sim.coordinator(), False

    def _stale_coordinator(self) -> int | None:
        """The coordinator a run told the model of, when it runs cut off from the quorum
        (its metadata is stale). A guessed one is not enough to doubt the controller's view."""
        c = self.coordinating
        if c is None or not self.coordinator_told or not self.sim.alive(c):
            return None
        return None if self.sim.can_talk(c, QUORUM) else c

    def _cannot(self, why: str) -> None:
        if why not in self.cannot_predict:
            self.cannot_predict.append(why)

    def _held_by_zombie(self, m: Marker) -> bool:
        """The coordinator waits for the broker it sent the marker to, which still believes
        it leads in that epoch but no longer does (cut off from the controller): the acks=all
        write waits in its purgatory for a follower that never fetches. The coordinator sends
        the marker again once that broker answers (it learns it is a follower, or it dies),
        or once request.timeout.ms has passed on the wall clock (seen on 4.3.1: the
        WriteTxnMarkers request was cancelled at 30 s and the marker queued anew). The run's
        clock (`SimOptions.step_seconds`) says when; where the timeout fell inside a step,
        the resend is followed only if where it goes did not change since the step before."""
        if m.sent_to is None or m.sent_to == self.sim.ctl.leader:
            return False
        r = self.sim.replicas.get(m.sent_to)  # None: a reassignment took its replica away
        zombie = (
            r is not None
            and self.sim.nodes[m.sent_to].status != STOPPED
            and r.role == LEADER
            and r.epoch == m.epochs[-1]
        )
        timed_out = self._wall_passed(m.sent_at, REQUEST_TIMEOUT_S) if zombie else False
        target = self._marker_target()
        if zombie and not timed_out:
            if m.watched and m.watched[-1][0] == self.sim._step:
                m.watched[-1] = (self.sim._step, target)
            else:
                m.watched.append((self.sim._step, target))
            if timed_out is None and m.straddled is None:
                m.straddled = self.sim._step
            return True
        if timed_out:
            self.clock_used = True
            self.sim._event(
                f"the coordinator's request to broker {m.sent_to} times out "
                f"(request.timeout.ms {REQUEST_TIMEOUT_S:g} s, by the run's clock)"
            )
        if m.straddled is not None:
            before = [t for step, t in m.watched if 0 <= step < m.straddled]
            if (not before or before[-1] != target) and not self.cannot_predict:
                self.cannot_predict.append(
                    f"at step {m.straddled} the {m.kind} marker of transaction {m.txn} waited "
                    f"in the purgatory of broker {m.sent_to}, which no longer led, until "
                    f"request.timeout.ms: wall-clock time, which the run's steps do not place"
                )
        m.sent_to = None
        return False

    def _marker_target(self) -> tuple[Any, ...]:
        """Where a marker sent now would go, and what it would find there: the leader, its
        epoch and log end, and whether its ISR takes an acks=all write."""
        lead = (
            self.sim.replicas.get(self.sim.ctl.leader) if self.sim.ctl.leader is not None else None
        )
        enough = len(self.sim.ctl.isr) >= self.sim.cluster.topic_config.min_insync_replicas
        return (self.sim.ctl.leader, self.sim.ctl.epoch, lead.leo if lead else None, enough)

    def _wall_passed(self, since: int, seconds: float) -> bool | None:
        """Whether `seconds` of wall-clock time from some moment in step `since` had passed
        when this step began, by the steps' durations on real brokers
        (`SimOptions.step_seconds`): False while they surely had not by its end, None where
        the clock does not say (none given, or the moment falls inside this step). At the
        final heal, False: the heal answers what still waits."""
        clock = self.sim.options.step_seconds
        if self.sim._step < 0:
            return False
        if len(clock) <= self.sim._step or since < 0:
            return None
        starts = [sum(clock[:i]) for i in range(len(clock) + 1)]
        if starts[since + 1] + seconds <= starts[self.sim._step]:
            return True
        if starts[since] + seconds >= starts[self.sim._step + 1]:
            return False
        return None

    def _time_out_transactions(self) -> None:
        """The coordinator aborts a transaction open longer than its timeout: by the run's
        clock where there is one (`between_steps`), else by the model's time (`advance`).
        A run's coordinator looks for them every ABORT_SCAN_S."""
        if self.sim.options.timeout_aborts:
            if self.sim._step + 1 in self.sim.options.timeout_aborts_within:
                self._straddle(self.sim._step)  # told it fell inside this step
            self.abort_if_told(self.sim._step)
            return
        if self.txn is None or not self._coordinator_up():
            return
        if not self.sim.options.step_seconds:
            if self.sim.time - self.txn.started >= TXN_TIMEOUT_S:
                self._abort_at_timeout()
            return
        passed = self._wall_passed(self.txn.begun_at, TXN_TIMEOUT_S + ABORT_SCAN_S)
        if passed is None:
            self._straddle(self.sim._step)  # inside this step
        if not passed:
            return
        self.clock_used = True
        self.abort_unplaced()
        self._abort_at_timeout()

    def abort_if_told(self, before: int) -> None:
        """The coordinator aborts the open transaction where the run saw it abort at the
        timeout: before step `before`'s fault took effect (`SimOptions.timeout_aborts`)."""
        if self.txn is not None and before in self.sim.options.timeout_aborts:
            self.clock_used = True
            self.abort_unplaced()
            self._abort_at_timeout()

    def abort_if_told_at_heal(self, steps: int) -> None:
        """As the heal begins, after `steps` steps: an abort told after the last one; one
        told in the heal, which may bring the partition back, is followed as at its end
        where the marker would go the same (`abort_unplaced`)."""
        self.abort_if_told(steps)
        if steps + 1 in self.sim.options.timeout_aborts:
            self._straddle(-1)

    def _straddle(self, step: int) -> None:
        """The open transaction's abort at the timeout falls inside `step` (-1: the heal):
        followed as at its end where the marker would go the same as at its start
        (`abort_unplaced`)."""
        if self.txn is not None and self.txn.straddled is None:
            self.txn.straddled = (step, self._marker_target())

    def abort_unplaced(self) -> None:
        """The model cannot predict where the coordinator's abort at the timeout went when
        that moment fell inside a step (`Txn.straddled`) whose marker would have gone
        elsewhere than where it goes now: the run's steps do not place wall-clock time."""
        straddled = self.txn.straddled if self.txn is not None else None
        if straddled and straddled[1] != self._marker_target() and not self.cannot_predict:
            where = f"step {straddled[0]}" if straddled[0] >= 0 else "the heal"
            self.cannot_predict.append(
                f"the coordinator's abort of transaction {self.txn.id} at its timeout fell "
                f"inside {where}: wall-clock time, which the run's steps do not place"
            )

    def _coordinator_up(self) -> bool:
        """Some broker could lead the coordinator's log and abort: running, with a session
        (a run's log has a replica on every broker and min.insync.replicas 1). With none,
        the abort waits for the next coordinator, which aborts once it has loaded the log."""
        return any(self.sim.alive(b) and self.sim.registered(b) for b in self.sim.nodes)

    def _abort_at_timeout(self) -> None:
        self.end_txn(ABORT, f"open longer than transaction.timeout.ms {TXN_TIMEOUT_S:g} s")
        # The coordinator bumps the producer's epoch as it aborts.
        self.held_fenced = True


def hang_cause(sim: Simulator, batches: list[SimBatch], first: int) -> str:
    """Why the transaction open at `first` on a final log hangs, by the rule a run judges
    (runrecord.outcome.hang_cause): its coordinator skipped the marker (KAFKA-20734), a
    power loss dropped the tail past its start, or the marker was appended and lost
    (KAFKA-20716)."""
    txn = next((b.txn for b in batches if b.base == first), None)
    skipped = any(m.skipped for m in sim.transactions.markers if m.txn == txn)
    return cause_of_hang(skipped, first, sim.power_drops)


def open_transaction(batches: list[SimBatch]) -> int | None:
    """The first offset of the transaction a log leaves open: a transactional batch after
    the last marker (ProducerStateEntry.currentTxnFirstOffset)."""
    first: int | None = None
    for b in batches:
        if b.control:
            first = None
        elif b.txn is not None and first is None:
            first = b.base
    return first
