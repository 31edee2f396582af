"""TransactionalProducer's bookkeeping, on a crafted client that answers as told: writes
reach the history once their transaction ends, labelled and marked with its outcome."""

import pytest
from confluent_kafka import KafkaError, KafkaException

from runrecord.history import ABORTED, COMMITTED, IN_DOUBT
from suites.clients.api import TxnAborted, TxnFailed
from suites.clients.librdkafka import LibrdkafkaClient, fenced
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


class Refused:
    """librdkafka's producer, as far as a commit it is refused goes."""

    def __init__(self, code, fatal):
        self.error = KafkaError(code, "refused", fatal=fatal)

    def commit_transaction(self, timeout):
        raise KafkaException(self.error)

    def abort_transaction(self, timeout):
        raise KafkaException(self.error)


def _client(producer):
    client = object.__new__(LibrdkafkaClient)  # no broker to initialise against
    client._producer, client._results = producer, []
    return client


def test_a_commit_fenced_for_a_bumped_epoch_is_known_aborted():
    # The coordinator aborted the transaction at its timeout and bumped the epoch (seen on
    # 4.3.1: `_FENCED`, "This instance has been fenced by a newer instance").
    with pytest.raises(TxnAborted):
        _client(Refused(KafkaError._FENCED, True)).commit(1)
    # Another fatal error leaves the commit in doubt.
    with pytest.raises(TxnFailed) as failed:
        _client(Refused(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, True)).commit(1)
    assert not isinstance(failed.value, TxnAborted)


def test_a_fenced_producer_is_told_apart_from_other_client_errors():
    for code in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH):
        assert fenced(KafkaException(KafkaError(code)))
    assert not fenced(KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT)))
    assert not fenced(KafkaException("no error object"))
