"""A transactional producer whose every write reaches the history with its transaction and
how that transaction ended, for the read_committed checks (`checkers.txn_reads`).

Two clients drive it: librdkafka (confluent-kafka, logfork's own client, which speaks
transactions v1 only: EndTxn v1), or the Java client of the release under test
(`suites.clients.java`), which uses KIP-890's transactions v2 from 4.0 where the cluster
finalized it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from basics.errors import LogforkError
from fixtures.cluster import Cluster
from runrecord.history import ABORTED, COMMITTED, IN_DOUBT, Send
from suites.clients.api import TxnAborted, TxnClient, TxnFailed
from suites.clients.java import JavaTxnClient
from suites.clients.librdkafka import LibrdkafkaClient
from suites.workload import History

LIBRDKAFKA, JAVA = "librdkafka", "java"
CLIENTS = (LIBRDKAFKA, JAVA)


class TransactionalProducer:
    """One transactional.id. Its writes are held until their transaction ends, then added to
    the history at once, each labelled "<id>#<n>" and marked committed, aborted or in doubt
    (the commit or abort raised: the producer cannot tell what the coordinator did).
    `client`: LIBRDKAFKA, JAVA, or a client already made; `conf`: the client's own settings
    (librdkafka's or the Java client's names)."""

    def __init__(
        self, cluster: Cluster, history: History, transactional_id: str, *, timeout_ms: int,
        client: str | TxnClient = LIBRDKAFKA, log: Path | None = None, **conf: Any,
    ) -> None:  # fmt: skip
        self.history = history
        self.id = transactional_id
        self.count = 0  # transactions begun
        self._open: list[Send] = []
        self._unflushed: list[Send] = []
        settings = {"transactional.id": transactional_id, "transaction.timeout.ms": timeout_ms}
        if not isinstance(client, str):
            self.client: TxnClient = client  # already made, and initialised
        elif client == JAVA:
            self.client = JavaTxnClient(cluster, {**settings, **conf}, log)
        elif client == LIBRDKAFKA:
            self.client = LibrdkafkaClient({**cluster.client_config(), **settings, **conf})
        else:
            raise LogforkError(f"no client '{client}': {' or '.join(CLIENTS)}")

    @property
    def label(self) -> str:
        return f"{self.id}#{self.count}"

    def begin(self) -> None:
        self.client.begin()
        self.count += 1
        self._open = []

    def send(self, topic: str, partition: int, key: str, value: str) -> Send:
        send = Send(topic, key, value, "all", time.time(), partition=partition, txn=self.label)
        self.client.send(topic, partition, key, value)
        self._open.append(send)
        self._unflushed.append(send)
        return send

    def flush(self, timeout: float = 60) -> list[Send]:
        """Wait for every write of the open transaction to be acknowledged or failed."""
        results = self.client.flush(timeout)
        now = time.time()
        for send, (offset, error) in zip(self._unflushed, results, strict=True):
            send.acked, send.offset, send.error = now, offset, error
        self._unflushed = []
        return list(self._open)

    def commit(self, timeout: float = 60) -> str:
        return self._end(self.client.commit, COMMITTED, timeout)

    def abort(self, timeout: float = 60) -> str:
        return self._end(self.client.abort, ABORTED, timeout)

    def _end(self, how: Any, outcome: str, timeout: float) -> str:
        """The transaction's outcome as the producer knows it, recorded with its writes."""
        try:
            how(timeout)
        except TxnAborted:
            outcome = ABORTED
        except TxnFailed:
            outcome = IN_DOUBT
        if self._unflushed:
            self.flush(timeout)  # the results of writes not flushed before
        for send in self._open:
            send.transaction = outcome
            self.history.add(send)
        self._open = []
        return outcome

    def close(self) -> None:
        """Close the client. A transaction still open is one nobody can commit any more: its
        coordinator aborts it once its timeout has passed, so its writes enter the history as
        aborted (those never flushed with no offset)."""
        for send in self._open:
            send.transaction = ABORTED
            self.history.add(send)
        self._open, self._unflushed = [], []
        self.client.close()

    def __enter__(self) -> TransactionalProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
