"""A minimal Kafka wire-protocol client: send one request, read the error code a broker
answers for one partition.

KIP-704 says what a recovering leader answers to FETCH, PRODUCE, LIST_OFFSETS,
DELETE_RECORDS and OFFSET_FOR_LEADER_EPOCH. Client libraries retry such errors and hide
them, so logfork speaks the protocol itself and reports the raw answer. Versions are picked
from the broker's ApiVersions answer among those encoded here; 4.0 dropped the oldest
versions (KIP-896), hence more than one per API.
"""

from __future__ import annotations

import itertools
import socket
import struct
from dataclasses import dataclass

from checkers.codec import Reader, compact_int32s, compact_string, string, uvarint
from checkers.encode import encode_v2_batch

PRODUCE, FETCH, LIST_OFFSETS, DELETE_RECORDS, API_VERSIONS, OFFSET_FOR_LEADER_EPOCH = (
    0, 1, 2, 21, 18, 23)  # fmt: skip
METADATA = 3
ALTER_REPLICA_LOG_DIRS = 34
DESCRIBE_LOG_DIRS = 35
ALTER_PARTITION_REASSIGNMENTS = 45
NAMES = {
    PRODUCE: "PRODUCE",
    FETCH: "FETCH",
    LIST_OFFSETS: "LIST_OFFSETS",
    DELETE_RECORDS: "DELETE_RECORDS",
    OFFSET_FOR_LEADER_EPOCH: "OFFSET_FOR_LEADER_EPOCH",
    ALTER_REPLICA_LOG_DIRS: "ALTER_REPLICA_LOG_DIRS",
    DESCRIBE_LOG_DIRS: "DESCRIBE_LOG_DIRS",
    METADATA: "METADATA",
    ALTER_PARTITION_REASSIGNMENTS: "ALTER_PARTITION_REASSIGNMENTS",
}
# Versions encoded below: non-flexible ones, except DeleteRecords v2 (the oldest that 4.x
# still serves). Metadata v1 serves 0.10.2 (which has v0-v2), v4 serves 4.x (KIP-896 dropped
# v0-v3). AlterReplicaLogDirs and DescribeLogDirs v0 and v1 share one encoding (1.1 serves
# v0 only, 4.x v1 and up). AlterPartitionReassignments (KIP-455, 2.4) is flexible from v0.
ENCODED = {PRODUCE: (3,), FETCH: (4,), LIST_OFFSETS: (1,), OFFSET_FOR_LEADER_EPOCH: (2,),
           DELETE_RECORDS: (0, 2), ALTER_REPLICA_LOG_DIRS: (0, 1), METADATA: (1, 4),
           DESCRIBE_LOG_DIRS: (0, 1), ALTER_PARTITION_REASSIGNMENTS: (0,)}  # fmt: skip
FLEXIBLE = {(DELETE_RECORDS, 2), (ALTER_PARTITION_REASSIGNMENTS, 0)}
ERRORS = {0: "NONE", 1: "OFFSET_OUT_OF_RANGE", 3: "UNKNOWN_TOPIC_OR_PARTITION",
          6: "NOT_LEADER_OR_FOLLOWER", 7: "REQUEST_TIMED_OUT", 19: "NOT_ENOUGH_REPLICAS",
          20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND", 35: "UNSUPPORTED_VERSION",
          56: "KAFKA_STORAGE_ERROR", 57: "LOG_DIR_NOT_FOUND",
          39: "INVALID_REPLICA_ASSIGNMENT", 41: "NOT_CONTROLLER",
          74: "FENCED_LEADER_EPOCH", 75: "UNKNOWN_LEADER_EPOCH"}  # fmt: skip
_ids = itertools.count(1)


class ProtocolError(Exception):
    pass


class BrokerClosed(ProtocolError, ConnectionError):
    """The broker closed the connection before it answered: a connection error, which a
    wait counts as "not yet" (fixtures.waiting.NOT_YET)."""


@dataclass(frozen=True)
class Answer:
    api: str
    version: int
    error_code: int
    detail: str

    @property
    def error(self) -> str:
        return ERRORS.get(self.error_code, f"error {self.error_code}")


@dataclass(frozen=True)
class LogDirState:
    """One log dir as its broker describes it (DescribeLogDirs, KIP-113)."""

    path: str
    error: str  # NONE, or KAFKA_STORAGE_ERROR for a dir the broker took offline
    partitions: frozenset[tuple[str, int]]  # the replicas it holds, current ones
    future: frozenset[tuple[str, int]]  # replicas being moved into it (`-future` dirs)


@dataclass(frozen=True)
class CachedMetadata:
    brokers: frozenset[int]
    leaders: dict[tuple[str, int], int]  # (topic, partition) -> leader, -1 for none

    def leader(self, topic: str, partition: int) -> int | None:
        found = self.leaders.get((topic, partition), -1)
        return found if found >= 0 else None


class Connection:
    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.versions = self._api_versions()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _roundtrip(self, api: int, version: int, body: bytes) -> Reader:
        correlation = next(_ids)
        header = struct.pack(">hhi", api, version, correlation) + string("logfork-probe")
        if (api, version) in FLEXIBLE:
            header += b"\x00"  # request header v2: no tagged fields
        frame = header + body
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", self._read(4))[0]
        reader = Reader(self._read(size))
        if reader.int32() != correlation:
            raise ProtocolError("correlation id mismatch")
        if (api, version) in FLEXIBLE:
            reader.tagged_fields()  # response header v1
        return reader

    def _read(self, n: int) -> bytes:
        chunks = b""
        while len(chunks) < n:
            chunk = self.sock.recv(n - len(chunks))
            if not chunk:
                raise BrokerClosed("connection closed by the broker")
            chunks += chunk
        return chunks

    def _api_versions(self) -> dict[int, tuple[int, int]]:
        r = self._roundtrip(API_VERSIONS, 0, b"")
        if r.int16() != 0:
            raise ProtocolError("ApiVersions failed")
        entries = ((r.int16(), r.int16(), r.int16()) for _ in range(r.int32()))
        return {key: (lo, hi) for key, lo, hi in entries}

    def version_for(self, api: int) -> int:
        lo, hi = self.versions.get(api, (0, -1))
        usable = [v for v in ENCODED[api] if lo <= v <= hi]
        if not usable:
            raise ProtocolError(f"{NAMES[api]}: broker serves v{lo}-v{hi}, none encoded here")
        return max(usable)

    # -- the five requests KIP-704 names ---------------------------------------------------
    def produce(self, topic: str, partition: int, value: bytes, acks: int = 1) -> Answer:
        v = self.version_for(PRODUCE)
        records = encode_v2_batch(0, [value], leader_epoch=-1)
        body = (
            string(None)
            + struct.pack(">hi", acks, 10000)
            + struct.pack(">i", 1)
            + string(topic)
            + struct.pack(">i", 1)
            + struct.pack(">i", partition)
            + struct.pack(">i", len(records))
            + records
        )
        r = self._roundtrip(PRODUCE, v, body)
        r.int32()
        r.string()
        r.int32()
        _, error, base_offset, _ = r.int32(), r.int16(), r.int64(), r.int64()
        return Answer("PRODUCE", v, error, f"base offset {base_offset}")

    def fetch(self, topic: str, partition: int, offset: int) -> Answer:
        v = self.version_for(FETCH)
        body = (
            struct.pack(">iiiib", -1, 0, 0, 1 << 20, 0)
            + struct.pack(">i", 1)
            + string(topic)
            + struct.pack(">i", 1)
            + struct.pack(">iqi", partition, offset, 1 << 20)
        )
        r = self._roundtrip(FETCH, v, body)
        r.int32()  # throttle
        r.int32()
        r.string()
        r.int32()
        _, error, hw, _ = r.int32(), r.int16(), r.int64(), r.int64()
        aborted = r.int32()
        r.take(max(aborted, 0) * 16)
        size = r.int32()
        return Answer("FETCH", v, error, f"high watermark {hw}, {max(size, 0)} bytes of records")

    def list_offsets(self, topic: str, partition: int, timestamp: int = -1) -> Answer:
        v = self.version_for(LIST_OFFSETS)
        body = (
            struct.pack(">i", -1)
            + struct.pack(">i", 1)
            + string(topic)
            + struct.pack(">i", 1)
            + struct.pack(">iq", partition, timestamp)
        )
        r = self._roundtrip(LIST_OFFSETS, v, body)
        r.int32()
        r.string()
        r.int32()
        _, error, _, offset = r.int32(), r.int16(), r.int64(), r.int64()
        return Answer("LIST_OFFSETS", v, error, f"offset {offset}")

    def offset_for_leader_epoch(
        self, topic: str, partition: int, current_epoch: int, epoch: int
    ) -> Answer:
        v = self.version_for(OFFSET_FOR_LEADER_EPOCH)
        body = (
            struct.pack(">i", 1)
            + string(topic)
            + struct.pack(">i", 1)
            + struct.pack(">iii", partition, current_epoch, epoch)
        )
        r = self._roundtrip(OFFSET_FOR_LEADER_EPOCH, v, body)
        r.int32()  # throttle
        r.int32()
        r.string()
        r.int32()
        error, _, leader_epoch, end_offset = r.int16(), r.int32(), r.int32(), r.int64()
        return Answer(
            "OFFSET_FOR_LEADER_EPOCH", v, error, f"epoch {leader_epoch} ends at {end_offset}"
        )

    def delete_records(self, topic: str, partition: int, offset: int) -> Answer:
        v = self.version_for(DELETE_RECORDS)
        if (DELETE_RECORDS, v) in FLEXIBLE:
            body = (
                uvarint(2)
                + compact_string(topic)
                + uvarint(2)
                + struct.pack(">iq", partition, offset)
                + b"\x00"
                + b"\x00"
                + struct.pack(">i", 10000)
                + b"\x00"
            )
        else:
            body = (
                struct.pack(">i", 1)
                + string(topic)
                + struct.pack(">i", 1)
                + struct.pack(">iq", partition, offset)
                + struct.pack(">i", 10000)
            )
        r = self._roundtrip(DELETE_RECORDS, v, body)
        r.int32()  # throttle
        if (DELETE_RECORDS, v) in FLEXIBLE:
            r.uvarint()
            r.compact_string()
            r.uvarint()
        else:
            r.int32()
            r.string()
            r.int32()
        _, low, error = r.int32(), r.int64(), r.int16()
        return Answer("DELETE_RECORDS", v, error, f"low watermark {low}")

    # -- what this broker's metadata cache says ------------------------------------------
    def metadata(self, topics: tuple[str, ...] = ()) -> CachedMetadata:
        """This broker's own metadata cache: the live brokers it lists, and the leader it
        names for each partition of `topics` (-1: none). A client library sends a metadata
        request to whichever broker it likes best; this asks the broker it is connected to."""
        v = self.version_for(METADATA)
        body = struct.pack(">i", len(topics)) + b"".join(string(t) for t in topics)
        if v >= 4:
            body += b"\x00"  # allow_auto_topic_creation: false
        r = self._roundtrip(METADATA, v, body)
        if v >= 3:
            r.int32()  # throttle
        brokers = []
        for _ in range(r.int32()):  # id, host, port, rack
            brokers.append(r.int32())
            r.string()
            r.int32()
            r.string()
        if v >= 2:
            r.string()  # cluster id
        r.int32()  # controller id
        leaders = {}
        for _ in range(r.int32()):
            r.int16()
            name = r.string()
            r.int8()  # is_internal
            for _ in range(r.int32()):
                # The error may be REPLICA_NOT_AVAILABLE beside a valid leader (a replica's
                # broker is down): the leader field alone says who leads, -1 for nobody.
                r.int16()
                index, leader = r.int32(), r.int32()
                r.int32s()  # replicas
                r.int32s()  # isr
                leaders[(name or "", index)] = leader
        return CachedMetadata(frozenset(brokers), leaders)

    # -- moving a replica between a broker's log dirs (KIP-113) --------------------------
    def alter_replica_log_dir(self, topic: str, partition: int, path: str) -> Answer:
        """Ask this broker to move its replica of the partition into log dir `path` (a
        path inside the broker). The broker answers at once and moves in the background:
        a future log catches up in the target dir, then replaces the current one."""
        v = self.version_for(ALTER_REPLICA_LOG_DIRS)
        body = (
            struct.pack(">i", 1)
            + string(path)
            + struct.pack(">i", 1)
            + string(topic)
            + struct.pack(">ii", 1, partition)
        )
        r = self._roundtrip(ALTER_REPLICA_LOG_DIRS, v, body)
        r.int32()  # throttle
        r.int32()
        r.string()
        r.int32()
        _, error = r.int32(), r.int16()
        return Answer("ALTER_REPLICA_LOG_DIRS", v, error, f"{topic}-{partition} to {path}")

    def describe_log_dirs(self) -> list[LogDirState]:
        """Every log dir of this broker, in its own view: online or offline, and what each
        holds."""
        v = self.version_for(DESCRIBE_LOG_DIRS)
        r = self._roundtrip(DESCRIBE_LOG_DIRS, v, struct.pack(">i", -1))  # null: all topics
        r.int32()  # throttle
        dirs = []
        for _ in range(r.int32()):
            error, path = r.int16(), r.string() or ""
            current, future = set(), set()
            for _ in range(r.int32()):
                topic = r.string() or ""
                for _ in range(r.int32()):
                    index, _size, _lag, is_future = r.int32(), r.int64(), r.int64(), r.int8()
                    (future if is_future else current).add((topic, index))
            name = ERRORS.get(error, f"error {error}")
            dirs.append(LogDirState(path, name, frozenset(current), frozenset(future)))
        return dirs

    # -- moving a partition's replicas between brokers (KIP-455) -------------------------
    def alter_partition_reassignment(
        self, topic: str, partition: int, replicas: list[int], timeout_ms: int = 30000
    ) -> Answer:
        """Ask the controller to reassign the partition to `replicas` (KRaft brokers forward
        it to the controller, KIP-590). Answered once the change is in the metadata log; the
        new replicas catch up after."""
        v = self.version_for(ALTER_PARTITION_REASSIGNMENTS)
        body = (
            struct.pack(">i", timeout_ms)
            + uvarint(2)  # one topic
            + compact_string(topic)
            + uvarint(2)  # one partition
            + struct.pack(">i", partition)
            + compact_int32s(replicas)
            + b"\x00"  # the partition's tagged fields
            + b"\x00"  # the topic's
            + b"\x00"  # the request's
        )
        r = self._roundtrip(ALTER_PARTITION_REASSIGNMENTS, v, body)
        r.int32()  # throttle
        error, message = r.int16(), r.compact_string()
        if error == 0:
            r.uvarint()  # one topic
            r.compact_string()
            r.uvarint()  # one partition
            r.int32()
            error, message = r.int16(), r.compact_string()
        return Answer(
            "ALTER_PARTITION_REASSIGNMENTS",
            v,
            error,
            f"{topic}-{partition} to {replicas}: {message}",
        )
