"""Typed errors for bad input, and the torn-tail finding.

Every reader in `checkers` collects these instead of letting them escape, so one
bad file never stops an audit. Each names the file and, when it makes sense, the
byte position in that file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class LogReadError(Exception):
    """Something on disk could not be read as Kafka wrote it."""

    kind = "read-error"

    def __init__(self, path: str, offset: int | None, reason: str) -> None:
        super().__init__(path, offset, reason)
        self.path = str(path)
        self.offset = offset
        self.reason = reason

    def __str__(self) -> str:
        if self.offset is None:
            return f"{self.path}: {self.reason}"
        return f"{self.path} at byte {self.offset}: {self.reason}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r}, {self.offset!r}, {self.reason!r})"

    def __eq__(self, other: object) -> bool:
        return (
            type(self) is type(other)
            and isinstance(other, LogReadError)
            and (self.path, self.offset, self.reason) == (other.path, other.offset, other.reason)
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.path, self.offset, self.reason))

    def __reduce__(self) -> tuple[Any, ...]:
        # Subclasses take other constructor arguments (CrcMismatch); pickle and copy go
        # through the three fields every error has.
        return (_rebuild, (type(self), self.path, self.offset, self.reason))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "offset": self.offset, "reason": self.reason}


def _rebuild(cls: type[LogReadError], path: str, offset: int | None, reason: str) -> LogReadError:
    error = cls.__new__(cls)
    LogReadError.__init__(error, path, offset, reason)
    return error


class UnreadableFile(LogReadError):
    """The file or directory could not be opened or read at all."""

    kind = "unreadable-file"


class TruncatedHeader(LogReadError):
    """Fewer bytes remain than a batch or message header needs."""

    kind = "truncated-header"


class TruncatedBatch(LogReadError):
    """The header announces more bytes than the file holds."""

    kind = "truncated-batch"


class ImpossibleLength(LogReadError):
    """A length field that no valid batch, message or record can have."""

    kind = "impossible-length"


class UnknownMagic(LogReadError):
    """A magic byte other than 0, 1 or 2."""

    kind = "unknown-magic"


class CrcMismatch(LogReadError):
    """The stored checksum does not match the bytes it covers."""

    kind = "crc-mismatch"

    def __init__(
        self, path: str, offset: int | None, algorithm: str, stored: int, computed: int
    ) -> None:
        super().__init__(
            path,
            offset,
            f"{algorithm} mismatch (stored 0x{stored:08x}, computed 0x{computed:08x})",
        )
        self.algorithm = algorithm
        self.stored = stored
        self.computed = computed


class CorruptBatch(LogReadError):
    """The batch frame is intact but its contents are not (bad compression, bad records)."""

    kind = "corrupt-batch"


class OffsetOrderError(LogReadError):
    """Offsets go backwards, or a segment holds offsets below its file name's base offset."""

    kind = "offset-order"


class BadCheckpoint(LogReadError):
    """A checkpoint file that does not parse (version, count or entry lines)."""

    kind = "bad-checkpoint"


class BadPropertiesFile(LogReadError):
    """meta.properties, partition.metadata or quorum-state that does not parse."""

    kind = "bad-properties"


class BadTxnIndex(LogReadError):
    """A segment's .txnindex (aborted transactions) that does not parse."""

    kind = "bad-txn-index"


class BadMetadataRecord(LogReadError):
    """A KRaft metadata or control record that does not decode."""

    kind = "bad-metadata-record"


@dataclass(frozen=True, slots=True)
class TornTail:
    """The last batch of a log is incomplete: the broker stopped in the middle of a write.

    Kafka's log recovery truncates such a tail, so it is a finding about the replica,
    not an error in the input. `position` is the byte position of the incomplete batch
    in `path`; `length` is how many bytes follow it there.
    """

    path: str
    position: int
    length: int
    reason: str

    def __str__(self) -> str:
        return (
            f"{self.path} at byte {self.position}: torn tail of {self.length} bytes ({self.reason})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "torn-tail",
            "path": self.path,
            "offset": self.position,
            "length": self.length,
            "reason": self.reason,
        }
