"""KRaft metadata records: the frame and the records `checkers.metadata_log` replays.

A record value is a frame: uvarint frameVersion, uvarint apiKey, uvarint version, then the
message in Kafka's flexible-versions encoding (compact arrays and strings, tagged fields at
the end of each struct). Frame version 0 is the 2.8 preview, whose TopicRecord and
PartitionRecord were not yet flexible. Fields and tags are those of
metadata/src/main/resources/common/metadata/*.json; unknown records and tags are skipped.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from basics.protocol import RecoveryState
from checkers.codec import DecodeError, Reader

REGISTER_BROKER_RECORD = 0
UNREGISTER_BROKER_RECORD = 1
TOPIC_RECORD = 2
PARTITION_RECORD = 3
CONFIG_RECORD = 4
TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC
PARTITION_CHANGE_RECORD = 5
FENCE_BROKER_RECORD = 7
UNFENCE_BROKER_RECORD = 8
REMOVE_TOPIC_RECORD = 9
FEATURE_LEVEL_RECORD = 12
BROKER_REGISTRATION_CHANGE_RECORD = 17
BROKER_RECORDS = (
    REGISTER_BROKER_RECORD,
    UNREGISTER_BROKER_RECORD,
    FENCE_BROKER_RECORD,
    UNFENCE_BROKER_RECORD,
    BROKER_REGISTRATION_CHANGE_RECORD,
)
# Control record types (ControlRecordType): a Raft leader's first record of its epoch, and
# KIP-853's kraft.version and voter set, written by format and by every voter change.
LEADER_CHANGE = 2
KRAFT_VERSION = 5
VOTERS = 6

NO_LEADER_CHANGE = -2


def _tag_int(tags: dict[int, bytes], tag: int, fmt: str, default: int) -> int:
    if tag not in tags:
        return default
    raw = tags[tag]
    if len(raw) != struct.calcsize(fmt):
        raise DecodeError(f"tagged field {tag} has {len(raw)} bytes")
    return struct.unpack(fmt, raw)[0]


def _recovery_state(value: int) -> RecoveryState:
    try:
        return RecoveryState(value)
    except ValueError:
        raise DecodeError(f"unknown LeaderRecoveryState {value}") from None


def _tag_int32s(tags: dict[int, bytes], tag: int) -> tuple[int, ...] | None:
    if tag not in tags:
        return None
    reader = Reader(tags[tag])
    values = reader.compact_int32s()
    reader.end()
    return values


@dataclass(frozen=True)
class MetadataRecord:
    """One decoded metadata record: its type, version and the fields the checker uses."""

    api_key: int
    version: int
    frame_version: int
    fields: dict[str, Any]


def decode_metadata_record(value: bytes) -> MetadataRecord:
    """Decode a metadata record value. Unknown api keys come back with empty `fields`.

    Raises ValueError when the bytes do not decode.
    """
    reader = Reader(bytes(value))
    frame = reader.uvarint()
    if frame not in (0, 1):
        raise DecodeError(f"unknown frame version {frame}")
    api_key = reader.uvarint()
    version = reader.uvarint()
    flexible = frame == 1 or api_key == PARTITION_CHANGE_RECORD
    fields: dict[str, Any] = {}
    if api_key == TOPIC_RECORD:
        fields["name"] = reader.compact_string() if flexible else reader.string()
        fields["topic_id"] = reader.uuid()
    elif api_key == PARTITION_RECORD:
        fields.update(_partition_record(reader, version, flexible))
    elif api_key == PARTITION_CHANGE_RECORD:
        fields.update(_partition_change_record(reader, version))
    elif api_key == REMOVE_TOPIC_RECORD:
        fields["topic_id"] = reader.uuid()
    elif api_key == FEATURE_LEVEL_RECORD and flexible:
        fields["name"] = reader.compact_string()
        fields["feature_level"] = reader.int16()
    elif api_key == CONFIG_RECORD and flexible:
        fields["resource_type"] = reader.int8()
        fields["resource_name"] = reader.compact_string()
        fields["name"] = reader.compact_string()
        fields["value"] = reader.compact_string()  # null: the config was deleted
    elif api_key == REGISTER_BROKER_RECORD and flexible:
        fields.update(_register_broker_record(reader, version))
    elif (
        api_key
        in (
            UNREGISTER_BROKER_RECORD,
            FENCE_BROKER_RECORD,
            UNFENCE_BROKER_RECORD,
            BROKER_REGISTRATION_CHANGE_RECORD,
        )
        and flexible
    ):
        fields["broker_id"], fields["broker_epoch"] = reader.int32(), reader.int64()
        if api_key == BROKER_REGISTRATION_CHANGE_RECORD:
            tags = reader.tagged_fields()
            fields["fenced"] = _tag_int(tags, 0, ">b", 0)
            fields["in_controlled_shutdown"] = _tag_int(tags, 1, ">b", 0)
    else:
        return MetadataRecord(api_key, version, frame, fields)
    if flexible and api_key in (
        TOPIC_RECORD,
        CONFIG_RECORD,
        FEATURE_LEVEL_RECORD,
        REMOVE_TOPIC_RECORD,
        UNREGISTER_BROKER_RECORD,
        FENCE_BROKER_RECORD,
        UNFENCE_BROKER_RECORD,
    ):
        reader.tagged_fields()
    reader.end()
    return MetadataRecord(api_key, version, frame, fields)


def _partition_record(reader: Reader, version: int, flexible: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"partition": reader.int32(), "topic_id": reader.uuid()}
    arrays = reader.compact_int32s if flexible else reader.int32s
    out["replicas"] = arrays() or ()
    out["isr"] = arrays() or ()
    out["removing_replicas"] = arrays() or ()
    out["adding_replicas"] = arrays() or ()
    out["leader"] = reader.int32()
    out["leader_epoch"] = reader.int32()
    out["partition_epoch"] = reader.int32()
    out["leader_recovery_state"] = RecoveryState.RECOVERED
    if flexible:
        if version >= 1:  # KIP-858; versions above 2 are read with the newest known layout
            out["directories"] = reader.compact_uuids() or ()
        tags = reader.tagged_fields()
        out["leader_recovery_state"] = _recovery_state(_tag_int(tags, 0, ">b", 0))
        out["eligible_leader_replicas"] = _tag_int32s(tags, 1)
        out["last_known_elr"] = _tag_int32s(tags, 2)
    return out


def _register_broker_record(reader: Reader, version: int) -> dict[str, Any]:
    out: dict[str, Any] = {"broker_id": reader.int32()}
    if version >= 2:
        reader.int8()  # IsMigratingZkBroker
    reader.uuid()  # IncarnationId
    out["broker_epoch"] = reader.int64()
    for _ in range(reader.compact_length() or 0):  # EndPoints
        reader.compact_string()
        reader.compact_string()
        reader.int16()  # port, a uint16 on the wire
        reader.int16()
        reader.tagged_fields()
    for _ in range(reader.compact_length() or 0):  # Features
        reader.compact_string()
        reader.int16()
        reader.int16()
        reader.tagged_fields()
    reader.compact_string()  # Rack
    out["fenced"] = reader.int8() != 0
    out["in_controlled_shutdown"] = reader.int8() != 0 if version >= 1 else False
    reader.tagged_fields()
    return out


def _partition_change_record(reader: Reader, version: int) -> dict[str, Any]:
    out: dict[str, Any] = {"partition": reader.int32(), "topic_id": reader.uuid()}
    tags = reader.tagged_fields()
    out["isr"] = _tag_int32s(tags, 0)
    out["leader"] = _tag_int(tags, 1, ">i", NO_LEADER_CHANGE)
    out["replicas"] = _tag_int32s(tags, 2)
    out["adding_replicas"] = _tag_int32s(tags, 4)  # KIP-455: None = unchanged
    change = _tag_int(tags, 5, ">b", -1)
    out["leader_recovery_state"] = None if change == -1 else _recovery_state(change)
    out["eligible_leader_replicas"] = _tag_int32s(tags, 6)  # KIP-966: None = unchanged
    out["last_known_elr"] = _tag_int32s(tags, 7)
    return out


def decode_leader_change(value: bytes) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """(leader id, voters, granting voters) of a LeaderChangeMessage value.

    Kafka reads this message as version 0 (ControlRecordUtils); the 2.8 preview wrote it
    without the leading Version field, so that layout is tried second.
    """
    try:
        return _leader_change(bytes(value), with_version=True)
    except DecodeError:
        return _leader_change(bytes(value), with_version=False)


def _leader_change(
    value: bytes, with_version: bool
) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    reader = Reader(value)
    if with_version:
        reader.int16()
    leader = reader.int32()
    groups = []
    for _ in range(2):
        n = reader.compact_length()
        ids = []
        for _ in range(n or 0):
            ids.append(reader.int32())
            reader.tagged_fields()
        groups.append(tuple(ids))
    reader.tagged_fields()
    reader.end()
    return leader, groups[0], groups[1]


@dataclass(frozen=True)
class Voter:
    """A voter as a VotersRecord names it: KIP-853 knows it by id and directory id."""

    voter_id: int
    directory_id: str
    endpoints: tuple[str, ...]  # NAME://host:port


def decode_voters(value: bytes) -> tuple[Voter, ...]:
    """The voters of a VotersRecord value (raft/src/main/resources/common/message/
    VotersRecord.json, flexible from version 0): Version; Voters [VoterId, VoterDirectoryId,
    Endpoints [Name, Host, Port (uint16)], KRaftVersionFeature {Min, Max}]."""
    reader = Reader(bytes(value))
    reader.int16()
    voters = []
    for _ in range(reader.compact_length() or 0):
        voter_id = reader.int32()
        directory_id = reader.uuid()
        endpoints = []
        for _ in range(reader.compact_length() or 0):
            name, host = reader.compact_string(), reader.compact_string()
            port = reader.uint16()
            reader.tagged_fields()
            endpoints.append(f"{name}://{host}:{port}")
        reader.int16(), reader.int16()  # the kraft.version range the voter supports
        reader.tagged_fields()
        reader.tagged_fields()
        voters.append(Voter(voter_id, directory_id, tuple(endpoints)))
    reader.tagged_fields()
    reader.end()
    return tuple(voters)


def decode_kraft_version(value: bytes) -> int:
    """The level of a KRaftVersionRecord value: Version, KRaftVersion (1: the voter set is
    in the log, KIP-853)."""
    reader = Reader(bytes(value))
    reader.int16()
    level = reader.int16()
    reader.tagged_fields()
    reader.end()
    return level
