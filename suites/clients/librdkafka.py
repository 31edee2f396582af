"""librdkafka (confluent-kafka), logfork's own client, as a transactional client. It speaks
transactions v1 only: EndTxn v1, the same producer epoch from one transaction to the next."""

from __future__ import annotations

import contextlib
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from basics.errors import Refused
from fixtures.waiting import WaitTimeout, wait_until
from suites.clients.api import Result, TxnAborted, TxnFailed

INIT_TIMEOUT = 60.0
# A commit refused for a bumped epoch: the coordinator aborted the transaction at its timeout
# (KIP-360's bump; PRODUCER_FENCED for EndTxn from KIP-588), so nothing commits it.
FENCED = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
INIT_ATTEMPT = 15.0  # one InitProducerId's own timeout


def fenced(exc: KafkaException) -> bool:
    """Whether the client's error says its producer was fenced: its epoch bumped since."""
    error = exc.args[0] if exc.args else None
    return isinstance(error, KafkaError) and error.code() in FENCED


class LibrdkafkaClient:
    def __init__(self, conf: dict[str, Any]) -> None:
        self._producer = Producer(conf)
        self._results: list[list[Any]] = []
        self._init(INIT_TIMEOUT)

    def _init(self, timeout: float) -> None:
        """InitProducerId, again while the coordinator answers with a retriable error: it
        answers CONCURRENT_TRANSACTIONS while it is still ending the transactional id's last
        transaction (its markers not all written), and librdkafka hands that back to the
        application to retry (rd_kafka_init_transactions: "the application may call it
        again")."""

        def attempt() -> str | None:
            """None once initialised; the error, where it is not one to retry."""
            try:
                self._producer.init_transactions(INIT_ATTEMPT)
            except KafkaException as exc:
                if exc.args[0].retriable():
                    raise  # not yet, to wait_until
                return str(exc)
            return None

        try:
            error = wait_until(attempt, lambda _: True, what="InitProducerId", timeout=timeout)
        except WaitTimeout as exc:
            raise TxnFailed(f"init_transactions: {exc.last}") from None
        if error is not None:
            raise TxnFailed(f"init_transactions: {error}")

    def begin(self) -> None:
        self._producer.begin_transaction()

    def send(self, topic: str, partition: int, key: str, value: str) -> None:
        result: list[Any] = [None, None]

        def report(err: Any, msg: Any) -> None:
            result[:] = [None, err.str()] if err is not None else [msg.offset(), None]

        self._producer.produce(topic, value.encode(), key.encode(), partition=partition,
                               on_delivery=report)  # fmt: skip
        self._results.append(result)

    def flush(self, timeout: float) -> list[Result]:
        try:
            left = self._producer.flush(timeout)
        except SystemError as exc:
            # confluent-kafka raises a fatal client error (a _FENCED producer, seen on 4.4.0)
            # pending while its logger callback runs as a SystemError caused by it.
            if isinstance(exc.__cause__, KafkaException):
                raise exc.__cause__ from None
            raise
        if left:
            raise Refused(f"{left} writes neither acknowledged nor failed in {timeout}s")
        done, self._results = self._results, []
        return [(r[0], r[1]) for r in done]

    def _end(self, how: Any, timeout: float) -> None:
        try:
            how(timeout)
        except KafkaException as exc:
            raise TxnFailed(str(exc)) from None

    def commit(self, timeout: float) -> None:
        try:
            self._producer.commit_transaction(timeout)
        except KafkaException as exc:
            if fenced(exc):
                raise TxnAborted(
                    f"aborted by its coordinator, which fenced the commit: {exc}"
                ) from None
            if not exc.args[0].txn_requires_abort():
                raise TxnFailed(str(exc)) from None
            self._end(self._producer.abort_transaction, timeout)
            raise TxnAborted(f"aborted, as the commit could not be made: {exc}") from None

    def abort(self, timeout: float) -> None:
        self._end(self._producer.abort_transaction, timeout)

    def close(self) -> None:
        """Let go of the producer, whatever state it is in: a fenced one (its coordinator
        aborted a transaction at its timeout) reports its fatal error on every call."""
        with contextlib.suppress(KafkaException):  # nothing left to deliver or learn from it
            self._producer.flush(0)
