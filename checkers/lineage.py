"""A replica's lineage, shared by the protocol model and the checker, and the log dir reader.

A lineage is what one broker holds of one partition: its batches in offset order, the
leader epoch start offsets they imply and the ones its ``leader-epoch-checkpoint`` claims
(KIP-101's "Leader Epoch Sequence File"), its log start offset, high watermark and log end
offset.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.checkpoints import (
    CLEAN_SHUTDOWN,
    CLEANER_OFFSET_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    PARTITION_METADATA,
    QUORUM_STATE,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    QuorumState,
    read_leader_epoch_checkpoint,
    read_meta_properties,
    read_offset_checkpoint,
    read_partition_metadata,
    read_quorum_state,
)
from checkers.errors import BadPropertiesFile, LogReadError, TornTail, UnreadableFile
from checkers.metadata_log import METADATA_TOPICS, MetadataLog, decode_metadata_log
from checkers.records import Batch
from checkers.segments import scan_partition
from checkers.txnindex import AbortedTxn, read_txn_index

EpochStarts = list[tuple[int, int]]

PARTITION_DIR_RE = re.compile(r"^(?P<topic>[A-Za-z0-9._@-]+)-(?P<partition>\d+)$")
# Partition dirs Kafka is deleting (async topic deletion), moving between log dirs
# (KIP-113) or no longer owns (KRaft stray replicas): not live replicas.
SIDELINED_DIR_RE = re.compile(r"^.+-\d+\.[^.]+-(delete|future|stray)$")


def derive_epoch_starts(batches: Iterable[Batch]) -> EpochStarts:
    """Epoch start offsets as a broker's epoch cache assigns them while appending batches:
    a new entry when a batch carries an epoch above the latest one (KIP-101 step 4.7.1).
    v0/v1 batches carry no epoch (-1) and add nothing."""
    starts: EpochStarts = []
    latest = -1
    for b in batches:
        if b.leader_epoch > latest:
            latest = b.leader_epoch
            starts.append((latest, b.base_offset))
    return starts


@dataclass
class Lineage:
    topic: str
    partition: int
    broker_id: int
    batches: list[Batch] = field(default_factory=list)
    derived_epoch_starts: EpochStarts | None = None  # None: derive from the batches
    checkpointed_epoch_starts: EpochStarts | None = None  # None: no checkpoint file
    log_start_offset: int | None = None
    high_watermark: int | None = None
    log_end_offset: int | None = None
    recovery_point: int | None = None
    torn_tail: TornTail | None = None
    errors: list[LogReadError] = field(default_factory=list)
    path: str | None = None
    topic_id: str | None = None
    transient_files: list[str] = field(default_factory=list)
    # An interrupted swap Kafka completes on load: the .log.swap files read as live data and
    # the segments they replace (see `segments`).
    swapped_in: list[str] = field(default_factory=list)
    swapped_out: list[str] = field(default_factory=list)
    # Compaction: how far this replica's log cleaner has cleaned it (None: never, by its
    # log dir's cleaner-offset-checkpoint), whether that checkpoint could not be read, and
    # the aborted transactions its .txnindex files list.
    cleaned_to: int | None = None
    cleaner_unknown: bool = False
    aborted: list[AbortedTxn] = field(default_factory=list)
    remote_from: int | None = None  # tiered storage: [remote_from, log start) is remote only
    # Its log dir held the clean-shutdown marker: the checkpointed high watermark is the one
    # the broker had when it stopped, not one up to an interval behind (a crash).
    clean_shutdown: bool = False
    _bases: list[int] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.derived_epoch_starts is None:
            self.derived_epoch_starts = derive_epoch_starts(self.batches)
        if self.log_start_offset is None:
            self.log_start_offset = self.batches[0].base_offset if self.batches else 0
        if self.log_end_offset is None:
            self.log_end_offset = (
                self.batches[-1].last_offset + 1 if self.batches else self.log_start_offset
            )
        self._bases = [b.base_offset for b in self.batches]

    # -- queries ----------------------------------------------------------------------

    @property
    def epoch_starts(self) -> EpochStarts:
        return self.derived_epoch_starts or []

    @property
    def leo(self) -> int:
        return self.log_end_offset or 0

    @property
    def tail_epoch(self) -> int:
        """Leader epoch of the last batch (-1 for an empty or pre-v2 log)."""
        return self.batches[-1].leader_epoch if self.batches else -1

    def epoch_cache(self) -> EpochStarts:
        """The (epoch, start offset) entries the broker works with: its checkpoint file when
        there is one, else what the batches imply; entries past the log end are dropped, as
        Kafka does on startup (KIP-101, "Unclean Shutdown")."""
        source = (
            self.checkpointed_epoch_starts
            if self.checkpointed_epoch_starts is not None
            else self.epoch_starts
        )
        return [(e, s) for e, s in source if s <= self.leo]

    def batch_containing(self, offset: int) -> Batch | None:
        i = bisect.bisect_right(self._bases, offset) - 1
        if i >= 0 and self.batches[i].last_offset >= offset:
            return self.batches[i]
        return None

    def index_from(self, offset: int) -> int:
        """Index of the first batch whose last offset is at or above `offset`."""
        return _index_from(self.batches, offset)

    def epoch_findings(self, cleaned_below: int = 0) -> list[str]:
        """Disagreements between the epoch checkpoint and the batches; below
        `cleaned_below` (a compacted replica's cleaned range) the cleaner may have removed
        the batches that started an epoch, so entries there are not checked."""
        return compare_epoch_starts(
            self.epoch_starts,
            self.checkpointed_epoch_starts,
            self.log_start_offset or 0,
            self.leo,
            cleaned_below,
        )


def first_divergence(a: Sequence[Batch], b: Sequence[Batch], start: int = 0) -> int | None:
    """The first offset from which two replicas' batches differ, over the offsets both
    hold from `start` on; None when they agree there (one may lag the other, or start
    later).

    Both lists are in offset order. Batches are compared whole (boundaries, leader epoch,
    CRC), whatever the segment files they sit in. A batch whose bytes fail its CRC is not the
    batch that CRC names, so it differs from a sound copy that stores the same CRC.
    """
    if not a or not b:
        return None
    start = max(a[0].base_offset, b[0].base_offset, start)
    end = min(a[-1].last_offset, b[-1].last_offset) + 1
    i, j = _index_from(a, start), _index_from(b, start)
    while i < len(a) and j < len(b):
        x, y = a[i], b[j]
        if x.base_offset >= end or y.base_offset >= end:
            return None
        if x.key != y.key or x.crc_valid != y.crc_valid:
            return max(start, min(x.base_offset, y.base_offset))
        i += 1
        j += 1
    return None


def _index_from(batches: Sequence[Batch], offset: int) -> int:
    """Index of the first batch whose last offset is at or above `offset`."""
    lo, hi = 0, len(batches)
    while lo < hi:
        mid = (lo + hi) // 2
        if batches[mid].last_offset < offset:
            lo = mid + 1
        else:
            hi = mid
    return lo


def compare_epoch_starts(
    derived: EpochStarts,
    checkpointed: EpochStarts | None,
    log_start: int,
    log_end: int,
    cleaned_below: int = 0,
) -> list[str]:
    """Disagreements between the epochs the batches show and the checkpoint file.

    Not disagreements: an epoch with no batches whose entry sits where the next epoch
    starts or at the log end (a leader elected that wrote nothing: its entry is written
    on election), and the first entry moved up to the log start offset (Kafka's
    truncateFromStart after retention or DeleteRecords).
    """
    if checkpointed is None:
        return []
    findings: list[str] = []
    d = dict(derived)
    c = dict(checkpointed)
    derived_starts = sorted(s for _, s in derived)
    for epoch, start in checkpointed:
        if start < cleaned_below:
            continue
        if start > log_end:
            findings.append(
                f"checkpoint entry epoch {epoch} at {start} lies beyond the log end "
                f"offset {log_end} (Kafka drops it on restart after an unclean "
                "shutdown)"
            )
        elif epoch in d:
            if start != d[epoch] and not (
                derived and epoch == derived[0][0] and start == log_start and d[epoch] <= start
            ):
                findings.append(
                    f"epoch {epoch}: checkpoint says it starts at {start}, the "
                    f"batches at {d[epoch]}"
                )
        else:
            later = [s for s in derived_starts if s >= start]
            if start < log_start or start == log_end or (later and later[0] == start):
                continue
            findings.append(
                f"epoch {epoch}: checkpoint says it starts at {start} but no batch carries it"
            )
    for epoch, start in derived:
        if epoch not in c and start >= cleaned_below:
            findings.append(
                f"epoch {epoch}: batches start it at {start} but the checkpoint has no entry"
            )
    return findings


@dataclass
class LogDir:
    """One broker log dir as read from disk."""

    path: str
    broker_id: int | None = None
    cluster_id: str | None = None
    kraft: bool = False
    lineages: dict[tuple[str, int], Lineage] = field(default_factory=dict)
    errors: list[LogReadError] = field(default_factory=list)
    metadata_log: MetadataLog | None = None
    quorum_state: QuorumState | None = None
    sidelined: list[str] = field(default_factory=list)  # -delete, -future, -stray dirs
    readable: bool = True  # False when the dir or its meta.properties could not be read
    # Why the dir itself failed to read (an I/O error: its disk failed or went away), as a
    # broker takes a log dir offline (KIP-112); None for a dir read, or one merely bad.
    offline: str | None = None
    bad_checkpoints: list[str] = field(default_factory=list)  # names that did not parse
    clean_shutdown: bool = False  # the dir holds the marker a clean shutdown leaves


Offsets = dict[str, dict[tuple[str, int], int]]


@dataclass
class LogDirListing:
    """A broker log dir read up to its partition dirs, no segment opened: the LogDir with
    its identity, sidelined dirs and metadata log quorum state; each partition dir; the
    log-dir-level offset checkpoints."""

    log_dir: LogDir
    partitions: list[tuple[str, tuple[str, int]]]  # a partition dir's path, as a string
    offsets: Offsets


def list_log_dir(
    path: Path | str, topic: str | None = None, also: Collection[str] = ()
) -> LogDirListing:
    """Everything of a broker log dir but its segments (of `topic` and the topics `also`
    named, when given). Never raises."""
    root = Path(path)
    log_dir = LogDir(str(root))
    listing = LogDirListing(log_dir, [], {})
    try:
        # scandir's entries know whether they are directories without a stat each: a log
        # dir of a large broker holds tens of thousands of partition dirs.
        with os.scandir(root) as entries:
            names = sorted(e.name for e in entries if e.is_dir())
    except (FileNotFoundError, NotADirectoryError) as exc:
        reason = "not a directory" if isinstance(exc, NotADirectoryError) else "does not exist"
        log_dir.readable = False
        log_dir.errors.append(UnreadableFile(str(root), None, reason))
        return listing
    except OSError as exc:
        log_dir.readable = False
        log_dir.offline = f"cannot list directory: {exc.strerror or exc}"
        return listing
    try:
        if not (root / META_PROPERTIES).exists():
            raise BadPropertiesFile(
                str(root / META_PROPERTIES),
                None,
                "missing: without it there is no telling which broker this log dir belongs to",
            )
        meta = read_meta_properties(root / META_PROPERTIES)
        log_dir.broker_id, log_dir.cluster_id, log_dir.kraft = (
            meta.broker_id,
            meta.cluster_id,
            meta.kraft,
        )
    except LogReadError as exc:
        log_dir.readable = False
        log_dir.errors.append(exc)
    log_dir.clean_shutdown = (root / CLEAN_SHUTDOWN).exists()
    for name in (
        REPLICATION_OFFSET_CHECKPOINT,
        RECOVERY_POINT_CHECKPOINT,
        LOG_START_OFFSET_CHECKPOINT,
        CLEANER_OFFSET_CHECKPOINT,
    ):
        found = len(log_dir.errors)
        listing.offsets[name] = (
            read_optional(root / name, read_offset_checkpoint, log_dir.errors) or {}
        )
        if len(log_dir.errors) > found:
            log_dir.bad_checkpoints.append(name)
    # Paths as strings: a Path object per partition dir cost a 60,000-replica audit's
    # planning a third of a second.
    prefix = "" if str(root) == "." else os.path.join(str(root), "")  # as `root / name`
    for name in names:
        if SIDELINED_DIR_RE.match(name):
            log_dir.sidelined.append(name)
            continue
        match = PARTITION_DIR_RE.match(name)
        if not match:
            continue
        tp = (match.group("topic"), int(match.group("partition")))
        if topic is not None and tp[0] != topic and tp[0] not in also:
            continue
        child = prefix + name
        listing.partitions.append((child, tp))
        if tp[0] in METADATA_TOPICS:
            log_dir.quorum_state = read_optional(
                Path(child, QUORUM_STATE), read_quorum_state, log_dir.errors
            )
    return listing


def read_log_dir(path: Path | str, topic: str | None = None) -> LogDir:
    """Read a broker log dir. Never raises; problems are in `errors` (and `readable`)."""
    listing = list_log_dir(path, topic)
    log_dir = listing.log_dir
    broker_id = log_dir.broker_id if log_dir.broker_id is not None else -1
    for child, tp in listing.partitions:
        log_dir.lineages[tp] = read_partition(Path(child), broker_id, tp, listing.offsets)
        if tp[0] in METADATA_TOPICS:
            log_dir.metadata_log = decode_metadata_log(child)
    return log_dir


def read_partition(
    pdir: Path,
    broker_id: int,
    tp: tuple[str, int],
    offsets: dict[str, dict[tuple[str, int], int]],
    *,
    cleaner_unknown: bool = False,
    clean_shutdown: bool = False,
) -> Lineage:
    """One replica: its segments, its own files, and what its log dir's checkpoints say of
    it (`offsets`: checkpoint name -> partition -> offset). `cleaner_unknown`: the log dir's
    cleaner-offset-checkpoint did not parse."""
    scan = scan_partition(pdir)
    errors = list(scan.errors)
    aborted: list[AbortedTxn] = []
    for path in scan.txn_indexes:
        aborted += read_optional(path, read_txn_index, errors) or []
    checkpointed = read_optional(
        pdir / LEADER_EPOCH_CHECKPOINT, read_leader_epoch_checkpoint, errors
    )
    metadata = read_optional(pdir / PARTITION_METADATA, read_partition_metadata, errors)
    first_segment = scan.segments[0].base_offset if scan.segments else None
    last_segment = scan.segments[-1].base_offset if scan.segments else 0
    checkpoint_start = offsets[LOG_START_OFFSET_CHECKPOINT].get(tp)
    # Kafka takes the larger of the checkpointed log start and the first segment's base
    # (LogLoader); the checkpoint only lists logs whose start moved past that base.
    candidates = [x for x in (checkpoint_start, first_segment) if x is not None]
    log_start = max(candidates) if candidates else 0
    # Below the first local segment, a checkpointed log start is the tiered partition's
    # (KIP-405: its older segments live in remote storage only; written from 3.8,
    # KAFKA-16146), or a start that retention has since moved past.
    remote_from = (
        checkpoint_start
        if checkpoint_start is not None
        and first_segment is not None
        and checkpoint_start < first_segment
        else None
    )
    leo = max(scan.batches[-1].last_offset + 1 if scan.batches else 0, last_segment, log_start)
    return Lineage(
        topic=tp[0],
        partition=tp[1],
        broker_id=broker_id,
        batches=scan.batches,
        checkpointed_epoch_starts=checkpointed,
        log_start_offset=log_start,
        high_watermark=offsets[REPLICATION_OFFSET_CHECKPOINT].get(tp),
        log_end_offset=leo,
        recovery_point=offsets[RECOVERY_POINT_CHECKPOINT].get(tp),
        torn_tail=scan.torn_tail,
        errors=errors,
        path=str(pdir),
        topic_id=metadata.topic_id if metadata else None,
        transient_files=[p.name for p in scan.transient],
        swapped_in=[p.name for p in scan.swapped_in],
        swapped_out=[p.name for p in scan.swapped_out],
        cleaned_to=offsets.get(CLEANER_OFFSET_CHECKPOINT, {}).get(tp),
        cleaner_unknown=cleaner_unknown,
        aborted=aborted,
        remote_from=remote_from,
        clean_shutdown=clean_shutdown,
    )


def cleaned_end(lineage: Lineage) -> int:
    """Where what this replica's cleaner may have rewritten ends: the end of the segment that
    holds its last cleaned offset (the cleaner rewrites whole segments), at least its
    cleaned offset; its log start when it has never cleaned."""
    start = lineage.log_start_offset or 0
    if lineage.cleaned_to is None or lineage.cleaned_to <= start:
        return start
    index = lineage.index_from(lineage.cleaned_to - 1)
    if index == len(lineage.batches):
        index -= 1
    holder = lineage.batches[index] if lineage.batches else None
    if holder is None or holder.base_offset >= lineage.cleaned_to:
        index -= 1
        holder = lineage.batches[index] if index >= 0 else None
    if holder is None:
        return lineage.cleaned_to
    segment = [b for b in lineage.batches if b.segment == holder.segment]
    return max(lineage.cleaned_to, segment[-1].last_offset + 1)


def read_optional(path: Path, reader: Any, errors: list[LogReadError]) -> Any:
    """Read an optional file; a missing file is None, a bad one an error."""
    if not path.exists():
        return None
    try:
        return reader(path)
    except LogReadError as exc:
        errors.append(exc)
        return None
