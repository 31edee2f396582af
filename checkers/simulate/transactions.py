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
from typing import Any

from checkers.simulate.replication import Replication
from checkers.simulate.state import LEADER, SimBatch
from runrecord.schedule import Role, TxnAbort, TxnCommit, TxnWrite
from runrecord.schedule_roles import Skip

# The schedule's transactional producer's transaction.timeout.ms, as a run sets it: past it
# the coordinator aborts the transaction and bumps the producer's epoch.
TXN_TIMEOUT_S = 60.0
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
    writes: list[int] = field(default_factory=list)  # ids in SimState.writes
    failed: bool = False  # a write was not acknowledged: the producer can only abort


@dataclass
class Marker:
    txn: int
    kind: str  # COMMIT or ABORT
    epochs: list[int] = field(default_factory=list)  # leader epochs it was appended in
    done: bool = False  # committed on the leader: the coordinator is finished with it


class Transactions(Replication):
    """The producer's open transaction and the coordinator's pending markers."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.txn: Txn | None = None
        self.txns = 0  # transactions begun
        self.markers: list[Marker] = []
        self.held_end: str | None = None  # the kind of the EndTxn held on the wire
        self.held_fenced = False  # ... sent before an epoch bump: the coordinator fences it
        self.late_ended = 0  # late EndTxns that ended a transaction the producer had open
        self.cannot_predict: list[str] = []  # why the model cannot predict the schedule

    def pending_markers(self) -> list[Marker]:
        return [m for m in self.markers if not m.done]

    def begin_txn(self) -> Txn:
        if self.txn is None:
            self.txn = Txn(self.txns, self.time)
            self.txns += 1
            self._event(f"transaction {self.txn.id} begins")
        return self.txn

    def end_txn(self, kind: str, why: str) -> Marker:
        """The open transaction ends: its marker is pending from now on."""
        assert self.txn is not None
        marker = Marker(self.txn.id, kind)
        self.markers.append(marker)
        self._event(f"transaction {self.txn.id} ends: {kind} ({why})")
        self.txn = None
        return marker

    # -- the steps -------------------------------------------------------------------------

    def _do_txnwrite(self, step: TxnWrite) -> dict[str, Any]:
        """A write within the transaction (begun here if none is open). A transaction is
        begun only once the coordinator is done with the last one (it answers
        CONCURRENT_TRANSACTIONS until every marker is written), and a write is sent only
        with the ISR at min.insync.replicas: a transactional producer retries
        NOT_ENOUGH_REPLICAS, where a `produce` step is refused at once."""
        if self.v1:
            raise Skip("transactions need message format v2 (Kafka 0.11, KIP-98)")
        if self.txn is not None and self.txn.failed:
            raise Skip(FAILED_TXN)
        self._after_late_end()
        pending = self.pending_markers()
        if self.txn is None and pending:
            raise Skip(
                f"the coordinator still writes the {pending[0].kind} marker of transaction "
                f"{pending[0].txn} (CONCURRENT_TRANSACTIONS)"
            )
        min_isr = self.cluster.topic_config.min_insync_replicas
        if self.ctl.leader is not None and len(self.ctl.isr) < min_isr:
            raise Skip(f"ISR {self.ctl.isr} below min.insync.replicas={min_isr}")
        begin = self.txn is None
        txn = self.txns if self.txn is None else self.txn.id
        targets = self._write(step.count, "all", Role.LEADER, txn, begin=begin)
        write = self.writes[-1]
        if self.txn is not None and self.txn.id == txn:  # not timed out while it waited
            self.txn.writes.append(write.id)
            self.txn.failed |= not write.acknowledged
        return {**targets, "transaction": txn, "acknowledged": write.acknowledged}

    def _do_txncommit(self, step: TxnCommit) -> dict[str, Any]:
        return self._end_txn(COMMIT, step.held)

    def _do_txnabort(self, step: TxnAbort) -> dict[str, Any]:
        return self._end_txn(ABORT, step.held)

    def _end_txn(self, kind: str, held: bool | None) -> dict[str, Any]:
        if self.txn is None:
            raise Skip("no transaction is open")
        why = held and cannot_hold_end(self.held_end is not None)
        if why:
            raise Skip(why)
        self._after_late_end()
        why = "the producer's " + kind.lower()
        if kind == COMMIT and self.txn.failed:
            kind, why = ABORT, "a write failed: the producer can only abort"
        if held:
            # The client sends what it asked for; a failed write makes its commit an abort
            # before anything is sent, and the epoch bump after it fences the held request
            # (on 3.5.2: a late ABORT of such a transaction left the next one alone).
            self.held_end = kind
            self.held_fenced = self.txn.failed and self.abort_bumps_epoch
            why += ", its first EndTxn held on the wire and retried"
        marker = self.end_txn(kind, why)
        self.settle()
        return {"transaction": marker.txn, "marker": kind}

    def _after_late_end(self) -> None:
        if self.late_ended and not self.cannot_predict:
            self.cannot_predict.append(
                f"the producer goes on at step {self._step} with a transaction a late EndTxn ended"
            )

    def deliver_held_end(self) -> str | None:
        """The heal of every cut: the held EndTxn reaches the coordinator. What it did, for
        the step's record; None where none was held."""
        kind, self.held_end = self.held_end, None
        if kind is None:
            return None
        if self.held_fenced:
            self._event(f"the late {kind} is fenced: the producer's epoch was bumped since")
            return "fenced"
        if self.txn is None:
            self._event(f"the late {kind} finds no transaction open: nothing changes")
            return "nothing open"
        self.end_txn(kind, "a late EndTxn")
        self.late_ended += 1
        return f"ended transaction {self.markers[-1].txn}"

    def _write(
        self, count: int, acks: str, to: Any, txn: int | None = None, *, begin: bool = False
    ) -> dict[str, Any]:
        raise NotImplementedError  # the steps' layer (Simulator) writes

    def settle(self) -> None:
        raise NotImplementedError  # the control plane's (ControlPlane)

    # -- the coordinator ---------------------------------------------------------------------

    def _write_markers(self) -> bool:
        """The coordinator's markers reaching the partition's leader (`settle`)."""
        lead = self.replicas.get(self.ctl.leader) if self.ctl.leader is not None else None
        changed = False
        for m in self.pending_markers():
            if lead is None or lead.role != LEADER or not self.alive(lead.broker):
                break
            tag = f"m{m.txn}.{len(m.epochs) - 1}"
            mine = next((b for b in lead.batches if b.tag == tag), None)
            if m.epochs and m.epochs[-1] == lead.epoch and mine is not None:
                # Appended in this epoch: done once the high watermark passes it.
                if lead.hw > mine.last:
                    m.done = True
                    self._event(f"the {m.kind} marker of transaction {m.txn} is committed")
                    changed = True
                continue
            if len(lead.isr) < self.cluster.topic_config.min_insync_replicas:
                break  # NOT_ENOUGH_REPLICAS: the coordinator retries
            tag = f"m{m.txn}.{len(m.epochs)}"
            epoch = -1 if self.v1 else lead.epoch
            self._append(lead, [SimBatch(lead.leo, lead.leo, epoch, tag, m.txn, True)])
            m.epochs.append(lead.epoch)
            self._event(
                f"broker {lead.broker} appends the {m.kind} marker of transaction {m.txn} "
                f"at {lead.leo - 1} in epoch {lead.epoch}"
            )
            changed = True
        return changed

    def _time_out_transactions(self) -> None:
        """The coordinator aborts a transaction open longer than its timeout (`advance`)."""
        if self.txn is not None and self.time - self.txn.started >= TXN_TIMEOUT_S:
            self.end_txn(ABORT, f"open longer than transaction.timeout.ms {TXN_TIMEOUT_S:g} s")
            # The coordinator bumps the producer's epoch as it aborts.
            self.held_fenced = True


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
