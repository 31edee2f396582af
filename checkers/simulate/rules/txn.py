"""The schedule's transactional producer on the simulated cluster: writes, commits and aborts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from checkers.simulate.rules.registry import rule
from checkers.simulate.transactions import ABORT, COMMIT, FAILED_TXN
from runrecord.schedule_roles import (
    Skip,
)
from runrecord.steps.base import Role
from runrecord.steps.txn import TxnAbort, TxnCommit, TxnWrite

if TYPE_CHECKING:
    from checkers.simulate.simulator import Simulator


@rule(TxnWrite)
def txn_write(sim: Simulator, step: TxnWrite) -> dict[str, Any]:
    """A write within the transaction (begun here if none is open). A transaction is
    begun only once the coordinator is done with the last one (it answers
    CONCURRENT_TRANSACTIONS until every marker is written), and a write is sent only
    with the ISR at min.insync.replicas: a transactional producer retries
    NOT_ENOUGH_REPLICAS, where a `produce` step is refused at once. Of a write that
    spans background partitions, the model follows the schedule's partition's batch; a
    run tells it where the others could not be written (SimOptions.unserved) or were
    not acknowledged (the schedule is then counted apart)."""
    if sim.v1:
        raise Skip("transactions need message format v2 (Kafka 0.11, KIP-98)")
    if sim.transactions.txn is not None and sim.transactions.txn.failed:
        raise Skip(FAILED_TXN)
    sim.transactions._after_late_end()
    sim.transactions._races_timeout("write")
    pending = sim.transactions.pending_markers()
    if sim.transactions.txn is None and pending:
        raise Skip(
            f"the coordinator still writes the {pending[0].kind} marker of transaction "
            f"{pending[0].txn} (CONCURRENT_TRANSACTIONS)"
        )
    min_isr = sim.cluster.topic_config.min_insync_replicas
    if sim.ctl.leader is not None and len(sim.ctl.isr) < min_isr:
        raise Skip(f"ISR {sim.ctl.isr} below min.insync.replicas={min_isr}")
    begin = sim.transactions.txn is None
    txn = sim.transactions.txns if sim.transactions.txn is None else sim.transactions.txn.id
    targets = sim._write(step.count, "all", Role.LEADER, txn, begin=begin)
    write = sim.writes[-1]
    if (
        sim.transactions.txn is not None and sim.transactions.txn.id == txn
    ):  # not timed out while it waited
        sim.transactions.txn.writes.append(write.id)
        sim.transactions.txn.failed |= not write.acknowledged
    return {**targets, "transaction": txn, "acknowledged": write.acknowledged}


@rule(TxnCommit)
def txn_commit(sim: Simulator, step: TxnCommit) -> dict[str, Any]:
    return sim.transactions._end_txn(COMMIT, step.held)


@rule(TxnAbort)
def txn_abort(sim: Simulator, step: TxnAbort) -> dict[str, Any]:
    return sim.transactions._end_txn(ABORT, step.held)
