"""A transactional producer whose every write reaches the history with its transaction and
how that transaction ended, for the read_committed checks (`checkers.txn_reads`)."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import KafkaException, Producer

from fixtures.cluster import Cluster
from fixtures.errors import LogforkError
from runrecord.history import ABORTED, COMMITTED, IN_DOUBT, Send
from suites.workload import History


class TransactionalProducer:
    """One transactional.id. Its writes are held until their transaction ends, then added to
    the history at once, each labelled "<id>#<n>" and marked committed, aborted or in doubt
    (the commit or abort raised: the producer cannot tell what the coordinator did)."""

    def __init__(
        self, cluster: Cluster, history: History, transactional_id: str, *, timeout_ms: int,
        **conf: Any,
    ) -> None:  # fmt: skip
        self.history = history
        self.id = transactional_id
        self.count = 0  # transactions begun
        self._open: list[Send] = []
        self._producer = Producer(
            {
                **cluster.client_config(),
                "transactional.id": transactional_id,
                "transaction.timeout.ms": timeout_ms,
                **conf,
            }
        )
        self._producer.init_transactions(60)

    @property
    def label(self) -> str:
        return f"{self.id}#{self.count}"

    def begin(self) -> None:
        self._producer.begin_transaction()
        self.count += 1
        self._open = []

    def send(self, topic: str, partition: int, key: str, value: str) -> Send:
        send = Send(topic, key, value, "all", time.time(), partition=partition, txn=self.label)

        def report(err: Any, msg: Any) -> None:
            send.acked = time.time()
            if err is not None:
                send.error = err.str()
            else:
                send.offset = msg.offset()

        self._producer.produce(topic, value.encode(), key.encode(), partition=partition,
                               on_delivery=report)  # fmt: skip
        self._open.append(send)
        return send

    def flush(self, timeout: float = 60) -> list[Send]:
        """Wait for every write of the open transaction to be acknowledged or failed."""
        if self._producer.flush(timeout):
            raise LogforkError(f"{self.label}: writes neither acknowledged nor failed")
        return list(self._open)

    def commit(self, timeout: float = 60) -> str:
        return self._end(self._producer.commit_transaction, COMMITTED, timeout)

    def abort(self, timeout: float = 60) -> str:
        return self._end(self._producer.abort_transaction, ABORTED, timeout)

    def _end(self, how: Any, outcome: str, timeout: float) -> str:
        """The transaction's outcome as the producer knows it, recorded with its writes."""
        try:
            how(timeout)
        except KafkaException:
            outcome = IN_DOUBT
        self._producer.poll(0)  # run the delivery reports still queued
        for send in self._open:
            send.transaction = outcome
            self.history.add(send)
        self._open = []
        return outcome
