"""A transaction in a script: the release's own KafkaProducer, driven from jshell (the JDK's
Java shell: a JDK rather than a JRE is needed) through lib.sh's `producer`, one statement
per step, each awaited until it answers DONE or FAILED. The producer starts before the
steps, while the cluster is whole, as logfork's does (suites.explore.live.txn.prepare)."""

from __future__ import annotations

from checkers.simulate.transactions import TXN_TIMEOUT_S
from runrecord.steps.txn import TxnAbort, TxnCommit, TxnWrite
from suites.explore.export.registry import ExportError, Ran, exporter

TRANSACTIONAL_ID = "reproduce"
SETTINGS = {
    "TRANSACTIONAL_ID": TRANSACTIONAL_ID,
    "TRANSACTION_TIMEOUT_MS": int(TXN_TIMEOUT_S * 1000),
}


def _not_held(step: TxnCommit | TxnAbort) -> None:
    if step.held:
        raise ExportError(
            f"a held {step.KIND!r} (its EndTxn held back by the network) cannot be exported yet"
        )


@exporter(TxnWrite)
def write(step: TxnWrite, ran: Ran) -> list[str]:
    return [f"txn_send {len(step.spans)} {step.count}"]


@exporter(TxnCommit)
def commit(step: TxnCommit, ran: Ran) -> list[str]:
    _not_held(step)
    return ['producer commit "tx.commitTransaction()"', "TXN_OPEN="]


@exporter(TxnAbort)
def abort(step: TxnAbort, ran: Ran) -> list[str]:
    _not_held(step)
    return ['producer abort "tx.abortTransaction()"', "TXN_OPEN="]
