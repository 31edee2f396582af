"""TransactionalProducer's bookkeeping, on a crafted client that answers as told: writes
reach the history once their transaction ends, labelled and marked with its outcome."""

from runrecord.history import ABORTED, COMMITTED, IN_DOUBT
from suites.clients.api import TxnFailed
from suites.transactional import TransactionalProducer
from suites.workload import History


class Told:
    """Acknowledges every write at the next offset; its commit or abort fails when told."""

    def __init__(self):
        self.offset, self.pending, self.fail = 0, 0, False

    def begin(self):
        pass

    def send(self, topic, partition, key, value):
        self.pending += 1

    def flush(self, timeout):
        out = [(self.offset + i, None) for i in range(self.pending)]
        self.offset, self.pending = self.offset + self.pending, 0
        return out

    def _end(self, timeout):
        if self.fail:
            raise TxnFailed("told to")

    commit = abort = _end

    def close(self):
        pass


def producer(history):
    return TransactionalProducer(None, history, "tx", timeout_ms=1000, client=Told())


def test_writes_reach_the_history_when_their_transaction_ends():
    history = History()
    p = producer(history)
    p.begin()
    p.send("t", 0, "a", "a")
    assert [s.offset for s in p.flush()] == [0] and history.sends == []
    assert p.commit() == COMMITTED
    p.begin()
    p.send("t", 1, "b", "b")  # not flushed: the end settles it
    assert p.abort() == ABORTED
    assert [(s.value, s.offset, s.txn, s.transaction) for s in history.sends] == [
        ("a", 0, "tx#1", COMMITTED),
        ("b", 1, "tx#2", ABORTED),
    ]


def test_an_end_that_raised_leaves_the_transaction_in_doubt():
    history = History()
    p = producer(history)
    p.client.fail = True
    p.begin()
    p.send("t", 0, "a", "a")
    assert p.commit() == IN_DOUBT
    assert history.sends[0].transaction == IN_DOUBT
