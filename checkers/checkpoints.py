"""Small text files a broker keeps beside its logs.

- Checkpoint files (Kafka's CheckpointFile): line 1 the version (0), line 2 the entry count,
  then one entry per line, fields split on whitespace. An empty file reads as no entries.
  ``leader-epoch-checkpoint`` (per partition dir) holds ``epoch startOffset``;
  ``replication-offset-checkpoint`` (high watermarks), ``recovery-point-offset-checkpoint``,
  ``log-start-offset-checkpoint`` and ``cleaner-offset-checkpoint`` (log dir root) hold
  ``topic partition offset``.
- ``meta.properties``: Java properties; ``broker.id`` (ZooKeeper mode, version 0) or
  ``node.id`` (KRaft, version 1), ``cluster.id``, and from 3.7 ``directory.id``.
- ``partition.metadata``: ``version: 0`` then ``topic_id: <Kafka Uuid>``.
- ``quorum-state`` (KRaft metadata log dir): one JSON object (QuorumStateData).

Each reader raises `BadCheckpoint`, `BadPropertiesFile` or `UnreadableFile` naming the file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.errors import BadCheckpoint, BadPropertiesFile, LogReadError, UnreadableFile

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
# Per partition, the cleaner's first dirty offset: how far its last round cleaned the
# partition in this log dir (LogCleanerManager; the offset checkpoint format, version 0).
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
META_PROPERTIES = "meta.properties"
PARTITION_METADATA = "partition.metadata"
QUORUM_STATE = "quorum-state"
# Written in each log dir by a clean shutdown, deleted when the broker starts (LogManager;
# a JSON body with the broker epoch from 3.7, KAFKA-15582): its presence proves that every
# checkpoint in the dir was written at that shutdown.
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"

_WS = re.compile(r"\s+")


def _read_text(path: Path | str, error: type[LogReadError]) -> str:
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise UnreadableFile(str(path), None, f"cannot read: {exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(str(path), exc.start, "not UTF-8 text") from None


def _checkpoint_lines(path: Path | str, width: int) -> list[tuple[list[str], int]]:
    """Entries of a checkpoint file as (fields, byte position of the line)."""
    text = _read_text(path, BadCheckpoint)
    lines: list[tuple[str, int]] = []
    pos = 0
    for line in text.splitlines(keepends=True):
        lines.append((line.rstrip("\r\n"), pos))
        pos += len(line.encode("utf-8"))
    if not lines:
        return []
    version_line, _ = lines[0]
    if version_line.strip() != "0":
        raise BadCheckpoint(
            str(path), 0, f"unrecognised version {version_line.strip()!r} (expected 0)"
        )
    if len(lines) < 2:
        return []
    count_line, count_pos = lines[1]
    try:
        expected = int(count_line.strip())
    except ValueError:
        raise BadCheckpoint(
            str(path), count_pos, f"entry count {count_line!r} is not a number"
        ) from None
    entries = []
    for line, line_pos in lines[2:]:
        fields = _WS.split(line.strip()) if line.strip() else []
        if len(fields) != width:
            raise BadCheckpoint(str(path), line_pos, f"malformed entry line {line!r}")
        entries.append((fields, line_pos))
    if len(entries) != expected:
        raise BadCheckpoint(
            str(path), count_pos, f"expected {expected} entries but found {len(entries)}"
        )
    return entries


def _int(path: Path | str, text: str, pos: int) -> int:
    try:
        return int(text)
    except ValueError:
        raise BadCheckpoint(str(path), pos, f"{text!r} is not a number") from None


def read_leader_epoch_checkpoint(path: Path | str) -> list[tuple[int, int]]:
    """[(epoch, start offset), ...] in file order."""
    return [(_int(path, f[0], pos), _int(path, f[1], pos)) for f, pos in _checkpoint_lines(path, 2)]


def read_offset_checkpoint(path: Path | str) -> dict[tuple[str, int], int]:
    """{(topic, partition): offset} of a log-dir-level offset checkpoint."""
    out: dict[tuple[str, int], int] = {}
    for f, pos in _checkpoint_lines(path, 3):
        out[(f[0], _int(path, f[1], pos))] = _int(path, f[2], pos)
    return out


@dataclass(frozen=True)
class MetaProperties:
    version: int | None
    broker_id: int | None  # broker.id (ZooKeeper mode) or node.id (KRaft)
    cluster_id: str | None
    directory_id: str | None
    kraft: bool
    raw: dict[str, str] = field(default_factory=dict)


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties as Kafka writes them: comments, key=value or key:value, no escapes
    beyond what Kafka's own writer produces."""
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        match = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if match:
            props[match.group(1)] = match.group(2).strip()
    return props


def read_meta_properties(path: Path | str) -> MetaProperties:
    props = parse_properties(_read_text(path, BadPropertiesFile))

    def as_int(key: str) -> int | None:
        if key not in props:
            return None
        try:
            return int(props[key])
        except ValueError:
            raise BadPropertiesFile(
                str(path), None, f"{key}={props[key]!r} is not a number"
            ) from None

    node_id = as_int("node.id")
    broker_id = as_int("broker.id")
    if node_id is None and broker_id is None:
        raise BadPropertiesFile(str(path), None, "has neither broker.id nor node.id")
    if node_id is not None and broker_id is not None and node_id != broker_id:
        raise BadPropertiesFile(
            str(path), None, f"broker.id {broker_id} and node.id {node_id} disagree"
        )
    return MetaProperties(
        version=as_int("version"),
        broker_id=node_id if node_id is not None else broker_id,
        cluster_id=props.get("cluster.id"),
        directory_id=props.get("directory.id"),
        kraft=node_id is not None,
        raw=props,
    )


@dataclass(frozen=True)
class PartitionMetadata:
    version: int
    topic_id: str


def read_partition_metadata(path: Path | str) -> PartitionMetadata:
    text = _read_text(path, BadPropertiesFile)
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        raise BadPropertiesFile(str(path), None, "expected 'version: N' and 'topic_id: ID' lines")
    version_fields = _WS.split(lines[0].strip())
    topic_fields = _WS.split(lines[1].strip())
    if (
        len(version_fields) != 2
        or version_fields[0] != "version:"
        or len(topic_fields) != 2
        or topic_fields[0] != "topic_id:"
    ):
        raise BadPropertiesFile(str(path), None, f"malformed lines {lines[:2]!r}")
    try:
        version = int(version_fields[1])
    except ValueError:
        raise BadPropertiesFile(str(path), None, f"version {version_fields[1]!r}") from None
    if topic_fields[1] == "AAAAAAAAAAAAAAAAAAAAAA":
        raise BadPropertiesFile(str(path), None, "topic id is the zero Uuid")
    return PartitionMetadata(version, topic_fields[1])


@dataclass(frozen=True)
class QuorumState:
    leader_id: int
    leader_epoch: int
    voted_id: int
    voters: tuple[int, ...]
    data_version: int
    raw: dict[str, Any] = field(default_factory=dict)


def read_quorum_state(path: Path | str) -> QuorumState:
    text = _read_text(path, BadPropertiesFile)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadPropertiesFile(str(path), exc.pos, f"not JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise BadPropertiesFile(str(path), None, "not a JSON object")
    try:
        voters = tuple(int(v["voterId"]) for v in data.get("currentVoters") or ())
        return QuorumState(
            leader_id=int(data.get("leaderId", -1)),
            leader_epoch=int(data.get("leaderEpoch", -1)),
            voted_id=int(data.get("votedId", -1)),
            voters=voters,
            data_version=int(data.get("data_version", 0)),
            raw=data,
        )
    except (TypeError, ValueError, KeyError) as exc:
        raise BadPropertiesFile(str(path), None, f"unexpected field value: {exc}") from None


def quorum_leader(states: Iterable[QuorumState]) -> int | None:
    """The quorum leader, from the voters' quorum-state files: the leader of the highest
    epoch any voter recorded a leader for (KIP-595: an epoch has at most one leader, and a
    voter learns of a newer epoch's leader before it acts on it). States without a leader
    are passed over: a voter cut off from the others campaigns in ever higher epochs that
    never get one (before KIP-996's pre-vote)."""
    led = [(s.leader_epoch, s.leader_id) for s in states if s.leader_id >= 0]
    return max(led)[1] if led else None
