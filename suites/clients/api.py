"""What a transactional client does for `suites.transactional.TransactionalProducer`,
whichever library speaks to the brokers."""

from __future__ import annotations

from typing import Protocol

from basics.errors import LogforkError

# A write's result once flushed: its offset, or its error.
Result = tuple[int | None, str | None]


class TxnFailed(LogforkError):
    """The client's commit or abort raised: the transaction's outcome is unknown to it."""


class TxnAborted(TxnFailed):
    """The commit could not be made (a write of the transaction failed) and the client
    aborted the transaction instead, as KIP-98 has a producer do after such an error."""


class TxnClient(Protocol):
    def begin(self) -> None: ...
    def send(self, topic: str, partition: int, key: str, value: str) -> None: ...
    def flush(self, timeout: float) -> list[Result]: ...  # the sends since the last flush
    def commit(self, timeout: float) -> None: ...
    def abort(self, timeout: float) -> None: ...
    def close(self) -> None: ...
