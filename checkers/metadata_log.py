"""Decode the KRaft metadata log into a history of every partition's leadership (the records
themselves: `checkers.metadata_records`).

The log is ``__cluster_metadata-0`` (``@metadata-0`` in the 2.8 preview) in the node's
metadata log dir; its batches are ordinary v2 batches whose leader epoch is the Raft epoch
(KIP-595). A record value is a frame: uvarint frameVersion, uvarint apiKey, uvarint version,
then the message in Kafka's flexible-versions encoding (compact arrays and strings, tagged
fields at the end of each struct). Frame version 0 is the 2.8 preview, whose TopicRecord and
PartitionRecord were not yet flexible.

Records used (metadata/src/main/resources/common/metadata/*.json):

- TopicRecord (apiKey 2): Name, TopicId.
- PartitionRecord (apiKey 3): PartitionId, TopicId, Replicas, Isr, RemovingReplicas,
  AddingReplicas, Leader, LeaderEpoch, PartitionEpoch, Directories (v1+, KIP-858);
  tagged 0 LeaderRecoveryState (KIP-704, 3.2+), 1 EligibleLeaderReplicas and
  2 LastKnownElr (v2, KIP-966; absent means empty).
- PartitionChangeRecord (apiKey 5): PartitionId, TopicId; all else tagged: 0 Isr, 1 Leader
  (-2 = unchanged, -1 = none), 2 Replicas, 3 RemovingReplicas, 4 AddingReplicas,
  5 LeaderRecoveryState (-1 = unchanged), 6 EligibleLeaderReplicas, 7 LastKnownElr,
  8 Directories; 6 and 7 absent mean unchanged. Any Leader value other than -2 bumps the
  leader epoch by one and every change bumps the partition epoch
  (PartitionRegistration.merge).
- RemoveTopicRecord (apiKey 9): TopicId.
- FeatureLevelRecord (apiKey 12): Name, FeatureLevel: the finalized features, such as
  eligible.leader.replicas.version (KIP-966, 4.0+).
- Broker registrations, for which brokers the controller counts as alive: RegisterBroker-
  Record (apiKey 0: BrokerId, IsMigratingZkBroker v2+, IncarnationId, BrokerEpoch,
  EndPoints, Features, Rack, Fenced, InControlledShutdown v1+; LogDirs tagged v3+),
  UnregisterBrokerRecord (1), FenceBrokerRecord (7), UnfenceBrokerRecord (8) and
  BrokerRegistrationChangeRecord (17: BrokerId, BrokerEpoch; tagged 0 Fenced: 1 fenced,
  -1 unfenced, 0 unchanged; tagged 1 InControlledShutdown).
- LeaderChange control records (ControlRecordType 2): LeaderChangeMessage, read as version 0
  as Kafka does: Version, LeaderId, Voters, GrantingVoters.
- KIP-853's control records: KRaftVersionRecord (5: the kraft.version level) and VotersRecord
  (6: the voter set, each voter by id, directory id and endpoints), written by format into
  the bootstrap checkpoint and by the leader for every voter change.

Unknown record types and unknown tagged fields are skipped. KRaft snapshots
(``<end offset>-<epoch>.checkpoint``) supply the state when the log no longer starts at 0.
"""

from __future__ import annotations

import re
import struct
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from basics.protocol import RecoveryState
from checkers.codec import DecodeError
from checkers.contents import read_records
from checkers.errors import BadMetadataRecord, LogReadError, TornTail, UnreadableFile
from checkers.metadata_records import (
    BROKER_RECORDS,
    CONFIG_RECORD,
    FEATURE_LEVEL_RECORD,
    FENCE_BROKER_RECORD,
    KRAFT_VERSION,
    LEADER_CHANGE,
    NO_LEADER_CHANGE,
    PARTITION_CHANGE_RECORD,
    PARTITION_RECORD,
    REGISTER_BROKER_RECORD,
    REMOVE_TOPIC_RECORD,
    TOPIC_RECORD,
    TOPIC_RESOURCE,
    UNFENCE_BROKER_RECORD,
    UNREGISTER_BROKER_RECORD,
    VOTERS,
    MetadataRecord,
    Voter,
    decode_kraft_version,
    decode_leader_change,
    decode_metadata_record,
    decode_voters,
)
from checkers.records import Batch, ScanState, make_batch
from checkers.segments import list_segments
from checkers.walk import iter_batch_rows

METADATA_TOPICS = ("__cluster_metadata", "@metadata")
SNAPSHOT_RE = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


@dataclass(frozen=True)
class PartitionStateEvent:
    """The state of one partition right after a metadata record changed it."""

    topic: str | None  # None when no TopicRecord for the topic id could be read
    topic_id: str
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    leader_recovery_state: RecoveryState
    offset: int  # offset of the record in the metadata log
    batch_offset: int  # base offset of its batch
    raft_epoch: int  # the batch's leader epoch: the Raft epoch of the controller that wrote it
    record: str  # "PartitionRecord" or "PartitionChangeRecord"
    from_snapshot: bool = False
    elr: tuple[int, ...] = ()  # eligible leader replicas (KIP-966)
    last_known_elr: tuple[int, ...] = ()
    adding: tuple[int, ...] = ()  # replicas a reassignment in flight adds (KIP-455)
    # The record named a new leader that the log has fenced (or not registered) at that
    # offset: a controller must elect only unfenced brokers (KAFKA-19522: a fenced last
    # known leader was elected on 4.0, PartitionChangeBuilder.canElectLastKnownLeader).
    leader_fenced: bool = False

    @property
    def recovering(self) -> bool:
        return self.leader_recovery_state == RecoveryState.RECOVERING

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "topic_id": self.topic_id,
            "partition": self.partition,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "partition_epoch": self.partition_epoch,
            "isr": list(self.isr),
            "replicas": list(self.replicas),
            "leader_recovery_state": str(self.leader_recovery_state),
            "offset": self.offset,
            "batch_offset": self.batch_offset,
            "raft_epoch": self.raft_epoch,
            "record": self.record,
            "from_snapshot": self.from_snapshot,
            "elr": list(self.elr),
            "last_known_elr": list(self.last_known_elr),
            "leader_fenced": self.leader_fenced,
            "adding": list(self.adding),
        }


@dataclass(frozen=True)
class LeaderChange:
    leader_id: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...]
    raft_epoch: int
    offset: int


@dataclass(frozen=True)
class VoterSet:
    """A VotersRecord: the quorum's voters from its offset on (KIP-853: a voter change takes
    effect when appended, and commits on a majority of the new set)."""

    voters: tuple[Voter, ...]
    raft_epoch: int
    offset: int
    from_snapshot: bool

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(v.voter_id for v in self.voters)


@dataclass(frozen=True)
class BrokerState:
    """A broker as the controller last recorded it."""

    broker_id: int
    broker_epoch: int
    fenced: bool
    in_controlled_shutdown: bool
    offset: int


@dataclass(frozen=True)
class Registration:
    """A RegisterBrokerRecord: a broker's incarnation, as the controller accepted it."""

    broker_id: int
    broker_epoch: int
    offset: int


@dataclass
class MetadataLog:
    path: str
    topics: dict[str, str] = field(default_factory=dict)  # topic id -> name
    events: list[PartitionStateEvent] = field(default_factory=list)
    leader_changes: list[LeaderChange] = field(default_factory=list)
    voter_sets: list[VoterSet] = field(default_factory=list)  # VotersRecords, in log order
    kraft_version: int = 0  # the last KRaftVersionRecord's level; none: 0, a static quorum
    removed_topics: dict[str, int] = field(default_factory=dict)  # topic id -> offset
    brokers: dict[int, BrokerState] = field(default_factory=dict)  # registered brokers
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)  # topic -> set
    registrations: list[Registration] = field(default_factory=list)  # in log order
    fencings: list[tuple[int, int]] = field(default_factory=list)  # (broker, offset): fenced
    features: dict[str, int] = field(default_factory=dict)  # finalized feature levels
    errors: list[LogReadError] = field(default_factory=list)
    torn_tail: TornTail | None = None
    end_offset: int = 0
    snapshot: str | None = None
    skipped_records: int = 0  # records of types the checker does not need

    def history(self, topic: str, partition: int) -> list[PartitionStateEvent]:
        return [e for e in self.events if e.topic == topic and e.partition == partition]

    def current(self, topic: str, partition: int) -> PartitionStateEvent | None:
        history = self.history(topic, partition)
        if not history:
            return None
        last = history[-1]
        removed_at = self.removed_topics.get(last.topic_id)
        return None if removed_at is not None and removed_at > last.offset else last

    def unfenced_brokers(self) -> set[int]:
        """Brokers the controller counts as alive: registered and not fenced."""
        return {b.broker_id for b in self.brokers.values() if not b.fenced}

    def partitions(self) -> set[tuple[str, int]]:
        return {(e.topic, e.partition) for e in self.events if e.topic is not None}

    def live_partitions(self) -> set[tuple[str, int]]:
        """The partitions of topics that exist now (not removed since)."""
        return {tp for tp in self.partitions() if self.current(*tp) is not None}


@dataclass
class _State:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    leader_recovery_state: RecoveryState
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    adding: tuple[int, ...] = ()


@dataclass
class _Entry:
    """One decoded record with where it came from."""

    record: MetadataRecord | None
    leader_change: tuple[int, tuple[int, ...], tuple[int, ...]] | None
    offset: int
    batch: Batch
    from_snapshot: bool
    voters: tuple[Voter, ...] | None = None  # a VotersRecord
    kraft_version: int | None = None  # a KRaftVersionRecord


def decode_metadata_log(partition_dir: Path | str) -> MetadataLog:
    """Read a metadata log dir (segments and snapshots) into a `MetadataLog`. Never raises."""
    pdir = Path(partition_dir)
    log = MetadataLog(str(pdir))
    listing = list_segments(pdir)
    log.errors.extend(listing.errors)
    state = ScanState()
    entries: list[_Entry] = []
    last_index = max((i for i, s in enumerate(listing.segments) if s.size), default=-1)
    for i, segment in enumerate(listing.segments):
        entries.extend(
            _read_file(segment.path, state, log, final=i == last_index, from_snapshot=False)
        )
    log.torn_tail = state.torn_tail
    log.end_offset = state.last_offset + 1 if state.last_offset >= 0 else 0
    log_start = entries[0].offset if entries else 0
    if log_start > 0:
        snapshot_entries = _snapshot_entries(pdir, log_start, log)
        if snapshot_entries is not None:
            end = snapshot_entries[0]
            entries = snapshot_entries[1] + [e for e in entries if e.offset >= end]
    _replay(entries, log)
    return log


def _snapshot_entries(
    pdir: Path, log_start: int, log: MetadataLog
) -> tuple[int, list[_Entry]] | None:
    """The entries of the earliest snapshot that reaches the log's first offset."""
    try:
        names = sorted(p.name for p in pdir.iterdir() if SNAPSHOT_RE.match(p.name))
    except OSError as exc:
        log.errors.append(UnreadableFile(str(pdir), None, f"cannot list directory: {exc}"))
        return None
    candidates = [n for n in names if int(n[:20]) >= log_start]
    if not candidates:
        return None
    name = candidates[0]
    log.snapshot = name
    state = ScanState()
    entries = list(_read_file(pdir / name, state, log, final=True, from_snapshot=True))
    if state.torn_tail is not None:
        log.errors.append(
            BadMetadataRecord(
                state.torn_tail.path,
                state.torn_tail.position,
                f"snapshot is incomplete: {state.torn_tail.reason}",
            )
        )
    return int(name[:20]), entries


def _read_file(
    path: Path, state: ScanState, log: MetadataLog, *, final: bool, from_snapshot: bool
) -> list[_Entry]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        log.errors.append(UnreadableFile(str(path), None, f"cannot read: {exc}"))
        return []
    entries: list[_Entry] = []
    rows = list(iter_batch_rows(data, path=str(path), segment=path.name, state=state, final=final))
    log.errors.extend(state.errors)
    state.errors.clear()
    for row in rows:
        batch = make_batch(*row)
        if not batch.crc_valid:
            continue
        try:
            records = read_records(data, batch.position, path=str(path))
        except LogReadError as exc:
            log.errors.append(exc)
            continue
        for rec in records:
            entry = _decode_entry(rec.key, rec.value, batch, rec.offset, path, log, from_snapshot)
            if entry is not None:
                entries.append(entry)
    return entries


def _decode_entry(
    key: bytes | None,
    value: bytes | None,
    batch: Batch,
    offset: int,
    path: Path,
    log: MetadataLog,
    from_snapshot: bool,
) -> _Entry | None:
    try:
        if batch.is_control:
            if key is None or len(key) < 4:
                raise DecodeError("control record key shorter than 4 bytes")
            _version, control_type = struct.unpack_from(">hh", key)
            value = value or b""
            if control_type == VOTERS:
                return _Entry(None, None, offset, batch, from_snapshot, voters=decode_voters(value))
            if control_type == KRAFT_VERSION:
                level = decode_kraft_version(value)
                return _Entry(None, None, offset, batch, from_snapshot, kraft_version=level)
            if control_type != LEADER_CHANGE:
                return None  # a snapshot's header and footer
            return _Entry(None, decode_leader_change(value), offset, batch, from_snapshot)
        if value is None:
            raise DecodeError("metadata record with a null value")
        return _Entry(decode_metadata_record(value), None, offset, batch, from_snapshot)
    except DecodeError as exc:
        log.errors.append(
            BadMetadataRecord(str(path), batch.position, f"record at offset {offset}: {exc}")
        )
        return None


def _replay(entries: list[_Entry], log: MetadataLog) -> None:
    for e in entries:
        if e.record is not None and e.record.api_key == TOPIC_RECORD:
            log.topics[e.record.fields["topic_id"]] = e.record.fields["name"]
    states: dict[tuple[str, int], _State] = {}
    by_topic: dict[str, set[int]] = defaultdict(set)
    for e in entries:
        if e.voters is not None:
            log.voter_sets.append(
                VoterSet(e.voters, e.batch.leader_epoch, e.offset, e.from_snapshot)
            )
        if e.kraft_version is not None:
            log.kraft_version = e.kraft_version
        if e.leader_change is not None:
            leader, voters, granting = e.leader_change
            log.leader_changes.append(
                LeaderChange(leader, voters, granting, e.batch.leader_epoch, e.offset)
            )
            continue
        rec = e.record
        if rec is None:
            continue  # a voter set or kraft.version, kept above
        f = rec.fields
        if rec.api_key == PARTITION_RECORD:
            st = _State(
                tuple(f["replicas"]),
                tuple(f["isr"]),
                f["leader"],
                f["leader_epoch"],
                f["partition_epoch"],
                f["leader_recovery_state"],
                tuple(f.get("eligible_leader_replicas") or ()),
                tuple(f.get("last_known_elr") or ()),
                tuple(f.get("adding_replicas") or ()),
            )
            name = "PartitionRecord"
        elif rec.api_key == PARTITION_CHANGE_RECORD:
            key = (f["topic_id"], f["partition"])
            prev = states.get(key)
            if prev is None:
                log.errors.append(
                    BadMetadataRecord(
                        log.path,
                        e.batch.position,
                        f"PartitionChangeRecord at offset {e.offset} "
                        f"for partition {f['partition']} of topic id {f['topic_id']} has no "
                        "earlier PartitionRecord in the readable log",
                    )
                )
                prev = _State((), (), -1, -1, -1, RecoveryState.RECOVERED)
            st = _merge(prev, f)
            name = "PartitionChangeRecord"
        elif rec.api_key in BROKER_RECORDS and f:
            _replay_broker(log, rec.api_key, f, e.offset)
            continue
        elif rec.api_key == FEATURE_LEVEL_RECORD and f:
            log.features[f["name"]] = f["feature_level"]
            continue
        elif rec.api_key == CONFIG_RECORD and f:
            if f["resource_type"] == TOPIC_RESOURCE and f["resource_name"]:
                configs = log.topic_configs.setdefault(f["resource_name"], {})
                if f["value"] is None:
                    configs.pop(f["name"], None)
                else:
                    configs[f["name"]] = f["value"]
            continue
        elif rec.api_key == REMOVE_TOPIC_RECORD:
            topic_id = f["topic_id"]
            log.removed_topics[topic_id] = e.offset
            for p in by_topic.pop(topic_id, set()):
                states.pop((topic_id, p), None)
            continue
        else:
            if rec.api_key != TOPIC_RECORD:
                log.skipped_records += 1
            continue
        states[(f["topic_id"], f["partition"])] = st
        by_topic[f["topic_id"]].add(f["partition"])
        named = f["leader"]  # -2 (no change) and -1 (no leader) name none
        registered = log.brokers.get(named) if named >= 0 else None
        # Only where the log holds the broker's registration: a log read from its middle,
        # without a snapshot, does not know every broker.
        fenced_leader = (
            named >= 0
            and not e.from_snapshot
            and bool(log.registrations)
            and (registered is None or registered.fenced)
        )
        log.events.append(
            PartitionStateEvent(
                topic=log.topics.get(f["topic_id"]),
                topic_id=f["topic_id"],
                partition=f["partition"],
                leader=st.leader,
                leader_epoch=st.leader_epoch,
                partition_epoch=st.partition_epoch,
                isr=st.isr,
                replicas=st.replicas,
                leader_recovery_state=st.leader_recovery_state,
                offset=e.offset,
                batch_offset=e.batch.base_offset,
                raft_epoch=e.batch.leader_epoch,
                record=name,
                from_snapshot=e.from_snapshot,
                elr=st.elr,
                last_known_elr=st.last_known_elr,
                leader_fenced=fenced_leader,
                adding=st.adding,
            )
        )


def _replay_broker(log: MetadataLog, api_key: int, f: dict[str, Any], offset: int) -> None:
    broker_id = f["broker_id"]
    prev = log.brokers.get(broker_id)
    if api_key == UNREGISTER_BROKER_RECORD:
        log.brokers.pop(broker_id, None)
        return
    if api_key == REGISTER_BROKER_RECORD:
        fenced, shutdown = f["fenced"], f["in_controlled_shutdown"]
        log.registrations.append(Registration(broker_id, f["broker_epoch"], offset))
    elif prev is None:
        return  # a change for a registration the readable log does not hold
    elif api_key == FENCE_BROKER_RECORD:
        fenced, shutdown = True, prev.in_controlled_shutdown
        log.fencings.append((broker_id, offset))
    elif api_key == UNFENCE_BROKER_RECORD:
        fenced, shutdown = False, prev.in_controlled_shutdown
    else:  # BrokerRegistrationChangeRecord: 1 fenced, -1 unfenced, 0 unchanged
        fenced = {1: True, -1: False}.get(f["fenced"], prev.fenced)
        shutdown = prev.in_controlled_shutdown or f["in_controlled_shutdown"] == 1
        if f["fenced"] == 1:
            log.fencings.append((broker_id, offset))
    log.brokers[broker_id] = BrokerState(broker_id, f["broker_epoch"], fenced, shutdown, offset)


def _merge(prev: _State, f: dict[str, Any]) -> _State:
    """Apply a PartitionChangeRecord, as PartitionRegistration.merge does."""
    leader, leader_epoch = prev.leader, prev.leader_epoch
    if f["leader"] != NO_LEADER_CHANGE:
        leader, leader_epoch = f["leader"], prev.leader_epoch + 1
    lrs = (
        prev.leader_recovery_state
        if f["leader_recovery_state"] is None
        else f["leader_recovery_state"]
    )
    return _State(
        replicas=prev.replicas if f["replicas"] is None else tuple(f["replicas"]),
        isr=prev.isr if f["isr"] is None else tuple(f["isr"]),
        leader=leader,
        leader_epoch=leader_epoch,
        partition_epoch=prev.partition_epoch + 1,
        leader_recovery_state=lrs,
        elr=prev.elr
        if f.get("eligible_leader_replicas") is None
        else tuple(f["eligible_leader_replicas"]),
        last_known_elr=prev.last_known_elr
        if f.get("last_known_elr") is None
        else tuple(f["last_known_elr"]),
        adding=prev.adding if f.get("adding_replicas") is None else tuple(f["adding_replicas"]),
    )
