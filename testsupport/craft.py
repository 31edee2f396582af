"""Builders for Kafka on-disk files: segments (v0, v1, v2), checkpoints, meta.properties,
partition.metadata, quorum-state and KRaft metadata records.

They write what a broker writes, from a compact spec, so tests, benchmarks and report
tests can craft whole log dirs, healthy or deliberately broken. Layouts are documented in
`checkers.records`; this module only inverts them.
"""

from __future__ import annotations

import functools
import json
import struct
import uuid
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.checkpoints import read_offset_checkpoint
from checkers.codec import (
    compact_int32s,
    compact_string,
    compact_uuids,
    string,
    tagged,
    uuid_bytes,
    uuid_text,
    uvarint,
)
from checkers.encode import BASE_TIMESTAMP, CODECS, compress, encode_v2_batch
from runrecord.run import RunInfo
from runrecord.rundir import RunDir


def encode_control_batch(
    base_offset: int,
    control_type: int,
    value: bytes,
    *,
    leader_epoch: int = 0,
    producer_id: int = -1,
    is_transactional: bool = False,
) -> bytes:
    """A control batch with one record: key is (version 0, type), as in ControlRecordType."""
    key = struct.pack(">hh", 0, control_type)
    return encode_v2_batch(
        base_offset,
        [(key, value)],
        leader_epoch=leader_epoch,
        is_control=True,
        producer_id=producer_id,
        is_transactional=is_transactional,
    )


# --------------------------------------------------------------------------------------
# v0/v1 messages


def encode_legacy_message(
    offset: int,
    value: bytes | None,
    *,
    magic: int = 1,
    key: bytes | None = None,
    timestamp: int | None = None,
    codec: int = 0,
) -> bytes:
    body = bytearray(struct.pack(">bb", magic, codec))
    if magic == 1:
        body += struct.pack(">q", BASE_TIMESTAMP + offset if timestamp is None else timestamp)
    for blob in (key, value):
        body += struct.pack(">i", -1) if blob is None else struct.pack(">i", len(blob)) + blob
    message = struct.pack(">I", zlib.crc32(body)) + bytes(body)
    return struct.pack(">qi", offset, len(message)) + message


def encode_legacy_wrapper(
    offsets: Sequence[int],
    compression: str,
    *,
    magic: int = 1,
    values: Sequence[bytes | None] | None = None,
    timestamp: int | None = None,
) -> bytes:
    """A compressed v0/v1 wrapper whose inner messages carry `offsets`.

    As a broker stores them: v0 inner offsets are absolute, v1 inner offsets are relative
    (0, 1, ...) and the wrapper carries the absolute last offset (KIP-31).
    """
    if values is None:
        values = [f"v{off}".encode() for off in offsets]
    inner = bytearray()
    for i, (off, val) in enumerate(zip(offsets, values, strict=True)):
        inner_offset = off if magic == 0 else i
        inner += encode_legacy_message(inner_offset, val, magic=magic, timestamp=timestamp)
    wrapped = compress(compression, bytes(inner), magic=magic)
    return encode_legacy_message(
        offsets[-1], wrapped, magic=magic, codec=CODECS[compression], timestamp=timestamp
    )


# --------------------------------------------------------------------------------------
# Compact batch specs and segments


@dataclass(frozen=True)
class BatchSpec:
    """A batch [base, last] written in `epoch`; `tag` varies the payload (and so the CRC)."""

    base: int
    last: int
    epoch: int = 0
    tag: str = ""
    compression: str = "none"
    magic: int = 2
    is_control: bool = False
    is_transactional: bool = False
    producer_id: int = -1

    @classmethod
    def of(cls, spec: BatchSpec | Sequence[Any]) -> BatchSpec:
        if isinstance(spec, BatchSpec):
            return spec
        return cls(*spec)

    def encode(self) -> bytes:
        return _encode_spec(self)

    def _encode(self) -> bytes:
        offsets = range(self.base, self.last + 1)
        if self.magic == 2:
            values = [f"v{off}-e{self.epoch}{self.tag}".encode() for off in offsets]
            return encode_v2_batch(
                self.base,
                values,
                leader_epoch=self.epoch,
                compression=self.compression,
                is_control=self.is_control,
                is_transactional=self.is_transactional,
                producer_id=self.producer_id,
            )
        values = [f"v{off}{self.tag}".encode() for off in offsets]
        if self.compression == "none":
            if self.base != self.last:
                raise ValueError("an uncompressed v0/v1 message holds exactly one offset")
            return encode_legacy_message(self.base, values[0], magic=self.magic)
        return encode_legacy_wrapper(
            list(offsets), self.compression, magic=self.magic, values=values
        )


@functools.lru_cache(maxsize=4096)
def _encode_spec(spec: BatchSpec) -> bytes:
    # Replicas of a crafted partition share their batches: encode each spec once.
    return spec._encode()


def encode_batches(specs: Iterable[BatchSpec | Sequence[Any]]) -> bytes:
    return b"".join(BatchSpec.of(s).encode() for s in specs)


def segment_name(base_offset: int, suffix: str = ".log") -> str:
    return f"{base_offset:020d}{suffix}"


def write_segments(
    partition_dir: Path | str,
    batches: Sequence[BatchSpec | Sequence[Any]],
    *,
    roll_at: Sequence[int] = (),
    preallocate: int = 0,
    index_files: bool = True,
    first_segment_base: int | None = None,
) -> list[Path]:
    """Write batches into segments, starting a new segment at each batch base in `roll_at`.

    `preallocate` pads the last segment with zeros to that size, as log.preallocate does.
    Index files are written preallocated (all zeros) to check that readers ignore them.
    """
    pdir = Path(partition_dir)
    pdir.mkdir(parents=True, exist_ok=True)
    specs = [BatchSpec.of(s) for s in batches]
    groups: list[tuple[int, list[BatchSpec]]] = []
    start = specs[0].base if specs else 0
    if first_segment_base is not None:
        start = first_segment_base
    groups.append((start, []))
    for spec in specs:
        if spec.base in roll_at and groups[-1][1]:
            groups.append((spec.base, []))
        groups[-1][1].append(spec)
    paths = []
    for i, (base, group) in enumerate(groups):
        data = encode_batches(group)
        if preallocate and i == len(groups) - 1:
            data += bytes(max(0, preallocate - len(data)))
        path = pdir / segment_name(base)
        path.write_bytes(data)
        paths.append(path)
        if index_files:
            (pdir / segment_name(base, ".index")).write_bytes(bytes(4096))
            (pdir / segment_name(base, ".timeindex")).write_bytes(bytes(4096))
    return paths


# --------------------------------------------------------------------------------------
# Checkpoints and properties


def checkpoint_text(entries: Iterable[Sequence[Any]], version: int = 0) -> str:
    rows = [" ".join(str(x) for x in entry) for entry in entries]
    return "\n".join([str(version), str(len(rows)), *rows]) + "\n"


def write_leader_epoch_checkpoint(
    partition_dir: Path | str, entries: Iterable[tuple[int, int]]
) -> Path:
    path = Path(partition_dir) / "leader-epoch-checkpoint"
    path.write_text(checkpoint_text(entries))
    return path


def write_offset_checkpoint(path: Path | str, offsets: Mapping[tuple[str, int], int]) -> Path:
    path = Path(path)
    path.write_text(checkpoint_text((t, p, o) for (t, p), o in sorted(offsets.items())))
    return path


def kafka_uuid(seed: str | None = None) -> str:
    """A Kafka Uuid string: URL-safe base64 of 16 bytes, no padding."""
    raw = uuid.uuid5(uuid.NAMESPACE_URL, seed).bytes if seed is not None else uuid.uuid4().bytes
    return uuid_text(raw)


def write_meta_properties(
    log_dir: Path | str,
    broker_id: int,
    *,
    kraft: bool = False,
    cluster_id: str = "logfork-cluster-0001",
    directory_id: str | None = None,
) -> Path:
    lines = ["#", "#Tue Nov 21 10:00:00 UTC 2023"]
    if kraft:
        lines += [f"node.id={broker_id}", "version=1", f"cluster.id={cluster_id}"]
        if directory_id:
            lines.append(f"directory.id={directory_id}")
    else:
        lines += [f"broker.id={broker_id}", "version=0", f"cluster.id={cluster_id}"]
    path = Path(log_dir) / "meta.properties"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def write_partition_metadata(partition_dir: Path | str, topic_id: str) -> Path:
    path = Path(partition_dir) / "partition.metadata"
    path.write_text(f"version: 0\ntopic_id: {topic_id}")
    return path


def write_quorum_state(
    metadata_dir: Path | str,
    leader_id: int,
    leader_epoch: int,
    voters: Sequence[int] = (),
    voted_id: int = -1,
) -> Path:
    data = {
        "clusterId": "",
        "leaderId": leader_id,
        "leaderEpoch": leader_epoch,
        "votedId": voted_id,
        "appliedOffset": 0,
        "currentVoters": [{"voterId": v} for v in voters],
        "data_version": 0,
    }
    path = Path(metadata_dir) / "quorum-state"
    path.write_text(json.dumps(data, separators=(",", ":")))
    return path


# --------------------------------------------------------------------------------------
# Whole log dirs


@dataclass
class PartitionSpec:
    """One replica of one partition, as `write_log_dir` lays it out.

    `leader_epochs`: None derives the checkpoint from the batches, [] writes no file,
    a list writes exactly those (epoch, start offset) entries.
    """

    batches: Sequence[BatchSpec | Sequence[Any]] = ()
    high_watermark: int | None = None
    log_start_offset: int | None = None
    recovery_point: int | None = None
    roll_at: Sequence[int] = ()
    leader_epochs: Sequence[tuple[int, int]] | None = None
    topic_id: str | None = None
    preallocate: int = 0
    first_segment_base: int | None = None
    index_files: bool = True


def derived_epochs(specs: Iterable[BatchSpec | Sequence[Any]]) -> list[tuple[int, int]]:
    entries: list[tuple[int, int]] = []
    for s in map(BatchSpec.of, specs):
        if s.magic == 2 and s.epoch >= 0 and (not entries or s.epoch > entries[-1][0]):
            entries.append((s.epoch, s.base))
    return entries


def write_log_dir(
    log_dir: Path | str,
    broker_id: int,
    partitions: Mapping[tuple[str, int], PartitionSpec | Sequence[Any]],
    *,
    kraft: bool = False,
    cluster_id: str = "logfork-cluster-0001",
) -> Path:
    """A broker log dir: meta.properties, partition dirs, and the three offset checkpoints."""
    root = Path(log_dir)
    root.mkdir(parents=True, exist_ok=True)
    write_meta_properties(root, broker_id, kraft=kraft, cluster_id=cluster_id)
    hws: dict[tuple[str, int], int] = {}
    starts: dict[tuple[str, int], int] = {}
    recovery: dict[tuple[str, int], int] = {}
    for (topic, partition), spec in partitions.items():
        if not isinstance(spec, PartitionSpec):
            spec = PartitionSpec(batches=spec)
        pdir = root / f"{topic}-{partition}"
        pdir.mkdir(parents=True, exist_ok=True)
        if spec.batches:
            write_segments(
                pdir,
                spec.batches,
                roll_at=spec.roll_at,
                preallocate=spec.preallocate,
                first_segment_base=spec.first_segment_base,
                index_files=spec.index_files,
            )
        else:
            (pdir / segment_name(spec.first_segment_base or 0)).write_bytes(b"")
        epochs = derived_epochs(spec.batches) if spec.leader_epochs is None else spec.leader_epochs
        if spec.leader_epochs is None or spec.leader_epochs:
            write_leader_epoch_checkpoint(pdir, epochs)
        write_partition_metadata(pdir, spec.topic_id or kafka_uuid(topic))
        if spec.high_watermark is not None:
            hws[(topic, partition)] = spec.high_watermark
        if spec.log_start_offset is not None:
            starts[(topic, partition)] = spec.log_start_offset
        if spec.recovery_point is not None:
            recovery[(topic, partition)] = spec.recovery_point
    write_offset_checkpoint(root / "replication-offset-checkpoint", hws)
    write_offset_checkpoint(root / "recovery-point-offset-checkpoint", recovery)
    write_offset_checkpoint(root / "log-start-offset-checkpoint", starts)
    return root


def write_run_dir(
    run_dir: Path | str, nodes: Mapping[str, Mapping[str, Any]], *, info: RunInfo | None = None
) -> Path:
    """A logfork run directory: run.json and nodes/<name>/data/ (each a broker log dir).

    `nodes` maps a node name to `write_log_dir` keyword arguments (broker_id, partitions, ...).
    """
    root = Path(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    RunDir(root).write_run(
        info or RunInfo("crafted", "a crafted run", "3.9.2", "zk", 0.0, "crafted")
    )
    for name, kwargs in nodes.items():
        write_log_dir(root / "nodes" / name / "data", **kwargs)
    return root


# --------------------------------------------------------------------------------------
# KRaft metadata records


def metadata_frame(api_key: int, version: int, body: bytes, frame_version: int = 1) -> bytes:
    return uvarint(frame_version) + uvarint(api_key) + uvarint(version) + body


def encode_topic_record(name: str, topic_id: str) -> bytes:
    raw = name.encode()
    return metadata_frame(2, 0, uvarint(len(raw) + 1) + raw + uuid_bytes(topic_id) + tagged({}))


def encode_partition_record(
    topic_id: str,
    partition: int,
    *,
    replicas: Sequence[int],
    isr: Sequence[int],
    leader: int,
    leader_epoch: int,
    partition_epoch: int = 0,
    leader_recovery_state: int = 0,
    version: int = 0,
    directories: Sequence[str] | None = None,
    eligible_leader_replicas: Sequence[int] | None = None,
    last_known_elr: Sequence[int] | None = None,
    extra_tags: Mapping[int, bytes] | None = None,
) -> bytes:
    body = struct.pack(">i", partition) + uuid_bytes(topic_id)
    body += compact_int32s(replicas) + compact_int32s(isr)
    body += compact_int32s([]) + compact_int32s([])  # removing, adding
    body += struct.pack(">iii", leader, leader_epoch, partition_epoch)
    if version >= 1:
        body += compact_uuids(directories or ["AAAAAAAAAAAAAAAAAAAAAA"] * len(replicas))
    tags: dict[int, bytes] = dict(extra_tags or {})
    if leader_recovery_state != 0:  # tagged field 0, written only when not the default
        tags[0] = struct.pack(">b", leader_recovery_state)
    if version >= 2 and eligible_leader_replicas is not None:
        tags[1] = compact_int32s(eligible_leader_replicas)
    if version >= 2 and last_known_elr is not None:
        tags[2] = compact_int32s(last_known_elr)
    return metadata_frame(3, version, body + tagged(tags))


def encode_partition_change_record(
    topic_id: str,
    partition: int,
    *,
    isr: Sequence[int] | None = None,
    leader: int = -2,
    leader_recovery_state: int = -1,
    replicas: Sequence[int] | None = None,
    version: int = 0,
    directories: Sequence[str] | None = None,
    eligible_leader_replicas: Sequence[int] | None = None,
    last_known_elr: Sequence[int] | None = None,
    extra_tags: Mapping[int, bytes] | None = None,
) -> bytes:
    tags: dict[int, bytes] = dict(extra_tags or {})
    if isr is not None:
        tags[0] = compact_int32s(isr)
    if leader != -2:
        tags[1] = struct.pack(">i", leader)
    if replicas is not None:
        tags[2] = compact_int32s(replicas)
    if leader_recovery_state != -1:
        tags[5] = struct.pack(">b", leader_recovery_state)
    if version >= 2 and eligible_leader_replicas is not None:
        tags[6] = compact_int32s(eligible_leader_replicas)
    if version >= 2 and last_known_elr is not None:
        tags[7] = compact_int32s(last_known_elr)
    if version >= 1 and directories is not None:
        tags[8] = compact_uuids(directories)
    body = struct.pack(">i", partition) + uuid_bytes(topic_id) + tagged(tags)
    return metadata_frame(5, version, body)


def encode_feature_level_record(name: str, level: int) -> bytes:
    raw = name.encode()
    return metadata_frame(
        12, 0, uvarint(len(raw) + 1) + raw + struct.pack(">h", level) + tagged({})
    )


def encode_register_broker_record(
    broker_id: int, broker_epoch: int, *, fenced: bool = True, version: int = 3
) -> bytes:
    """RegisterBrokerRecord (flexible, v1+): no endpoints or features, no rack."""
    body = struct.pack(">i", broker_id)
    if version >= 2:
        body += b"\x00"  # IsMigratingZkBroker
    body += uuid_bytes(kafka_uuid(f"incarnation-{broker_id}-{broker_epoch}"))
    body += struct.pack(">q", broker_epoch) + uvarint(1) + uvarint(1)  # no endpoints, features
    body += uvarint(0)  # Rack: null
    body += struct.pack(">b", 1 if fenced else 0) + b"\x00"  # Fenced, InControlledShutdown
    return metadata_frame(0, version, body + tagged({}))


def encode_broker_fencing_record(broker_id: int, broker_epoch: int, *, fenced: bool) -> bytes:
    """FenceBrokerRecord or UnfenceBrokerRecord (flexible)."""
    body = struct.pack(">iq", broker_id, broker_epoch) + tagged({})
    return metadata_frame(7 if fenced else 8, 0, body)


def encode_remove_topic_record(topic_id: str) -> bytes:
    return metadata_frame(9, 0, uuid_bytes(topic_id) + tagged({}))


def encode_leader_change(
    leader_id: int, voters: Sequence[int], granting: Sequence[int] | None = None
) -> bytes:
    """LeaderChangeMessage v0 value (flexible): Version, LeaderId, Voters, GrantingVoters."""

    def voter_array(ids: Sequence[int]) -> bytes:
        return uvarint(len(ids) + 1) + b"".join(struct.pack(">i", v) + tagged({}) for v in ids)

    granting = voters if granting is None else granting
    return (
        struct.pack(">hi", 0, leader_id) + voter_array(voters) + voter_array(granting) + tagged({})
    )


def encode_metadata_batch(
    base_offset: int, records: Sequence[bytes], raft_epoch: int, compression: str = "none"
) -> bytes:
    return encode_v2_batch(
        base_offset, [(None, r) for r in records], leader_epoch=raft_epoch, compression=compression
    )


def encode_leader_change_batch(
    base_offset: int, raft_epoch: int, leader_id: int, voters: Sequence[int]
) -> bytes:
    return encode_control_batch(
        base_offset, 2, encode_leader_change(leader_id, voters), leader_epoch=raft_epoch
    )


@dataclass
class MetadataLogBuilder:
    """Appends metadata batches with consecutive offsets; `data` is the segment's bytes."""

    data: bytearray = field(default_factory=bytearray)
    next_offset: int = 0

    def leader_change(self, raft_epoch: int, leader_id: int, voters: Sequence[int]) -> int:
        offset = self.next_offset
        self.data += encode_leader_change_batch(offset, raft_epoch, leader_id, voters)
        self.next_offset += 1
        return offset

    def records(self, raft_epoch: int, *records: bytes, compression: str = "none") -> int:
        offset = self.next_offset
        self.data += encode_metadata_batch(offset, records, raft_epoch, compression)
        self.next_offset += len(records)
        return offset

    def write(self, metadata_dir: Path | str, base_offset: int = 0) -> Path:
        pdir = Path(metadata_dir)
        pdir.mkdir(parents=True, exist_ok=True)
        path = pdir / segment_name(base_offset)
        path.write_bytes(bytes(self.data))
        return path


# --------------------------------------------------------------------------------------
# Compacted partitions


def write_cleaned_replica(
    log_dir: Path | str,
    broker_id: int,
    tp: tuple[str, int],
    segments: Sequence[Sequence[bytes]],
    *,
    cleaned_to: int | None = None,
    high_watermark: int | None = None,
    aborted: Sequence[tuple[int, int, int]] = (),
    kraft: bool = False,
) -> Path:
    """One replica of a compacted partition as encoded batches, segment by segment (each
    segment a list of batches, named by its first batch's base offset); its log dir's
    cleaner-offset-checkpoint entry (`cleaned_to`) and the aborted transactions
    (producer id, first offset, ABORT marker offset) of its .txnindex."""
    root = Path(log_dir)
    root.mkdir(parents=True, exist_ok=True)
    if not (root / "meta.properties").exists():
        write_meta_properties(root, broker_id, kraft=kraft)
    pdir = root / f"{tp[0]}-{tp[1]}"
    pdir.mkdir(parents=True, exist_ok=True)
    first = None
    for batches in segments:
        data = b"".join(batches)
        base = struct.unpack_from(">q", data)[0] if data else 0
        first = base if first is None else first
        (pdir / segment_name(base)).write_bytes(data)
    if aborted:
        entries = b"".join(struct.pack(">hqqqq", 0, pid, lo, hi, lo) for pid, lo, hi in aborted)
        (pdir / segment_name(first or 0, ".txnindex")).write_bytes(entries)
    for name, value in (
        ("cleaner-offset-checkpoint", cleaned_to),
        ("replication-offset-checkpoint", high_watermark),
    ):
        path = root / name
        known = read_offset_checkpoint(path) if path.exists() else {}
        if value is not None:
            known[tp] = value
        write_offset_checkpoint(path, known)
    return root


def encode_txn_log_key(transactional_id: str) -> bytes:
    """A `__transaction_state` record key (TransactionLogKey version 0)."""
    return struct.pack(">h", 0) + string(transactional_id)


def encode_txn_log_value(
    producer_id: int,
    epoch: int,
    status: int,
    partitions: Mapping[str, Sequence[int]] | None = None,
    *,
    version: int = 0,
    client_version: int | None = None,
) -> bytes:
    """A TransactionLogValue: version 0, or the flexible version 1 (KIP-915), whose tag 2
    carries the client's transaction version."""
    flexible = version >= 1
    out = struct.pack(">hqhib", version, producer_id, epoch, 60_000, status)
    items = list((partitions or {}).items())
    if flexible:
        out += uvarint(len(items) + 1)
        for topic, ids in items:
            out += compact_string(topic) + compact_int32s(list(ids)) + tagged({})
    else:
        out += struct.pack(">i", len(items))
        for topic, ids in items:
            out += string(topic) + struct.pack(">i", len(ids))
            out += b"".join(struct.pack(">i", i) for i in ids)
    out += struct.pack(">qq", BASE_TIMESTAMP, BASE_TIMESTAMP)
    if flexible:
        tags = {} if client_version is None else {2: struct.pack(">h", client_version)}
        out += tagged(tags)
    return out
