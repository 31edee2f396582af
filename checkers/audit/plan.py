"""The audit's first stage: inputs to read tasks, and the order errors are reported in.

Listing reads directories and the small files beside the logs (meta.properties, the offset
checkpoints, quorum-state); segments are left to the read tasks. Every replica of every log
dir becomes a task, judged or not: a log dir without a readable meta.properties belongs to
no known broker, and a broker's second copy of a partition is left out of the judgement,
but both are still read for their torn tails and errors.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from checkers.audit.result import AuditError
from checkers.checkpoints import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    QuorumState,
)
from checkers.coordinator_log import TXN_STATE_TOPIC
from checkers.errors import UnreadableFile
from checkers.gcpause import gc_paused
from checkers.lineage import LogDir, list_log_dir
from checkers.metadata_log import METADATA_TOPICS
from checkers.segments import segment_bytes
from checkers.storage import is_remote, local_path, relabel, staged_listing, unreadable
from checkers.transactions import DEFAULT_TXN_TIMEOUT_MS
from runrecord.rundir import RunDir, is_run_dir
from runrecord.typed import RunRecordError

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class ReadTask:
    """One partition dir of one log dir: the unit of reading."""

    log_dir: int  # index of the log dir in `AuditPlan.log_dirs`
    child: int  # position of the partition dir among the log dir's sorted children
    broker: int  # -1 when the log dir's meta.properties could not be read
    topic: str
    partition: int
    path: str
    high_watermark: int | None
    log_start_checkpoint: int | None
    recovery_point: int | None
    cleaned_to: int | None  # the log dir's cleaner-offset-checkpoint for the partition
    cleaner_unknown: bool  # that checkpoint file did not parse
    metadata: bool  # a KRaft metadata log: also decoded
    judged: bool  # False: an unreadable log dir or a second copy; read but not judged
    size: int = 0  # bytes of its .log segments: how the work is spread
    clean_shutdown: bool = False  # its log dir holds the clean-shutdown marker

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class LineageSlot:
    """Where the errors found reading one judged replica go in the error list."""

    log_dir: int
    topic: str
    partition: int


@dataclass(frozen=True)
class MetadataSlot:
    """Where the errors found decoding a log dir's metadata log go in the error list."""

    log_dir: int


ErrorSlot = AuditError | LineageSlot | MetadataSlot


@dataclass
class AuditPlan:
    inputs: list[str]
    topic: str | None = None
    compacted: tuple[str, ...] = ()  # topics named as compacted (--compacted)
    # An open transaction older than this (behind its partition's newest batch) hangs.
    txn_timeout_ms: int = DEFAULT_TXN_TIMEOUT_MS
    # ... behind this time instead, where a run recorded when it judged its transactions.
    txn_reference_ms: int | None = None
    log_dirs: list[LogDir] = field(default_factory=list)
    tasks: list[ReadTask] = field(default_factory=list)
    slots: list[ErrorSlot] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # inputs not read at all
    quorum_states: dict[int, QuorumState] = field(default_factory=dict)  # by log dir
    # The transaction coordinators' partitions, read but not judged when the audit is of
    # another topic: what they completed is what that topic's markers are compared with.
    coordinator_only: list[ReadTask] = field(default_factory=list)

    def by_partition(self) -> Iterator[tuple[TopicPartition, list[ReadTask]]]:
        """Every task, grouped by partition in partition order; each group in log dir order."""
        groups: dict[TopicPartition, list[ReadTask]] = defaultdict(list)
        for task in self.tasks:
            groups[task.tp].append(task)
        for tp in sorted(groups):
            yield tp, sorted(groups[tp], key=lambda t: (t.log_dir, t.child))

    def judged_partitions(self) -> list[TopicPartition]:
        return sorted({t.tp for t in self.tasks if t.judged})

    def coordinator_tasks(self) -> list[list[ReadTask]]:
        """The transaction coordinators' own partitions, read before the others are judged
        (`checkers.coordinator_log`)."""
        groups: dict[TopicPartition, list[ReadTask]] = defaultdict(list)
        for task in [*self.tasks, *self.coordinator_only]:
            if task.topic == TXN_STATE_TOPIC and task.judged:
                groups[task.tp].append(task)
        return [groups[tp] for tp in sorted(groups)]

    def metadata_tasks(self) -> list[ReadTask]:
        """The metadata logs to decode: those of log dirs that belong to a known broker."""
        return [
            t
            for t in self.tasks
            if t.metadata
            and self.log_dirs[t.log_dir].broker_id is not None
            and self.log_dirs[t.log_dir].readable
        ]


def run_log_dirs(run: RunDir) -> tuple[list[Path], list[AuditError]]:
    """The log dirs of a run's Kafka nodes. cluster.json names each node's role, so a
    ZooKeeper node's data dir (ZooKeeper's files, not a broker log dir) stays out."""
    errors: list[AuditError] = []
    names: list[str] | None = None
    try:
        cluster = run.cluster()
        names = cluster.broker_nodes() if cluster is not None else None
    except RunRecordError as exc:
        errors.append(
            AuditError(
                UnreadableFile(
                    str(run.path), None, f"{exc}; every node's data dir is taken as a log dir"
                ),
                None,
            )
        )
    nodes = run.path / "nodes"
    try:
        found = sorted(
            n.name
            for n in nodes.iterdir()
            if (n / "data").is_dir() and (names is None or n.name in names)
        )
    except OSError as exc:
        reason = f"run directory has no readable nodes/ folder: {exc}"
        return [], [*errors, AuditError(UnreadableFile(str(nodes), None, reason), None)]
    if not found:
        reason = "run directory has no nodes/<node>/data folders"
        errors.append(AuditError(UnreadableFile(str(nodes), None, reason), None))
    return [d for name in found for d in run.node_log_dirs(name)], errors


def expand_inputs(dirs: Iterable[Path | str]) -> tuple[list[Path | str], list[AuditError]]:
    """Broker log dirs named by the inputs (run directories expand to their nodes'),
    each once; a remote one stays its URI."""
    out: list[Path | str] = []
    errors: list[AuditError] = []
    for raw in dirs:
        if is_remote(raw):
            out.append(str(raw))
            continue
        path = Path(local_path(raw))
        if is_run_dir(path):
            found, problems = run_log_dirs(RunDir(path))
            out.extend(found)
            errors.extend(problems)
        else:
            out.append(path)
    seen: set[Path | str] = set()
    unique = []
    for p in out:
        key = p if isinstance(p, str) else p.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique, errors


def plan_audit(
    dirs: Sequence[Path | str],
    topic: str | None = None,
    compacted: Sequence[str] = (),
    txn_timeout_ms: int = DEFAULT_TXN_TIMEOUT_MS,
    txn_reference_ms: int | None = None,
) -> AuditPlan:
    """List every input down to its partition dirs. Never raises on bad input."""
    with gc_paused():  # a task and a path or two per partition dir, none of them cyclic
        plan = _plan(dirs, topic, compacted)
    plan.txn_timeout_ms, plan.txn_reference_ms = txn_timeout_ms, txn_reference_ms
    return plan


def _plan(dirs: Sequence[Path | str], topic: str | None, compacted: Sequence[str]) -> AuditPlan:
    plan = AuditPlan([str(d) for d in dirs], topic, tuple(compacted))
    paths, errors = expand_inputs(dirs)
    plan.slots.extend(errors)
    plan.unreadable.extend(e.error.path for e in errors)
    held: dict[TopicPartition, dict[int, str]] = {}
    for index, path in enumerate(paths):
        if not is_remote(path):
            _plan_log_dir(plan, index, Path(path), held)
            continue
        # A remote log dir is listed from a local stand-in, then every path it gave is
        # named by the URI again.
        marks = (len(plan.tasks), len(plan.slots), len(plan.unreadable), len(plan.coordinator_only))
        try:
            with staged_listing(str(path)) as local:
                _plan_log_dir(plan, index, local, held)
                _relabel_since(plan, index, marks, str(local), str(path))
                for copies in held.values():
                    copies.update(relabel(copies, str(local), str(path)))
        except Exception as exc:  # noqa: BLE001 - any filesystem failure is bad input
            del plan.tasks[marks[0] :], plan.slots[marks[1] :], plan.unreadable[marks[2] :]
            del plan.coordinator_only[marks[3] :]
            del plan.log_dirs[index:]
            plan.quorum_states.pop(index, None)
            error = unreadable(str(path), exc)
            plan.log_dirs.append(LogDir(str(path), readable=False, errors=[error]))
            plan.slots.append(AuditError(error, None))
            plan.unreadable.append(str(path))
    _place_offline(plan.log_dirs)
    return plan


def _place_offline(log_dirs: list[LogDir]) -> None:
    """An offline log dir cannot say whose it is: its meta.properties is on the failed
    disk. One broker's log dirs are often siblings (a run's nodes/<node>/data, data2):
    when every readable dir beside it belongs to one broker, it is that broker's."""
    for d in log_dirs:
        if d.offline is None or d.broker_id is not None or is_remote(d.path):
            continue
        parent = Path(d.path).parent
        owners = {
            o.broker_id
            for o in log_dirs
            if o.broker_id is not None and o.readable and Path(o.path).parent == parent
        }
        if len(owners) == 1:
            d.broker_id = owners.pop()


def _relabel_since(
    plan: AuditPlan, index: int, marks: tuple[int, int, int, int], old: str, new: str
) -> None:
    plan.tasks[marks[0] :] = relabel(plan.tasks[marks[0] :], old, new)
    plan.coordinator_only[marks[3] :] = relabel(plan.coordinator_only[marks[3] :], old, new)
    plan.slots[marks[1] :] = relabel(plan.slots[marks[1] :], old, new)
    plan.unreadable[marks[2] :] = relabel(plan.unreadable[marks[2] :], old, new)
    plan.log_dirs[index] = relabel(plan.log_dirs[index], old, new)
    if index in plan.quorum_states:
        plan.quorum_states[index] = relabel(plan.quorum_states[index], old, new)


def _plan_log_dir(
    plan: AuditPlan, index: int, path: Path, held: dict[TopicPartition, dict[int, str]]
) -> None:
    """One log dir's tasks and error slots, appended to `plan`."""
    topic = plan.topic
    listing = list_log_dir(path, topic, also=(TXN_STATE_TOPIC,))
    log_dir = listing.log_dir
    plan.log_dirs.append(log_dir)
    if log_dir.quorum_state is not None:
        plan.quorum_states[index] = log_dir.quorum_state
    plan.slots.extend(AuditError(e, log_dir.broker_id) for e in log_dir.errors)
    judged = log_dir.readable and log_dir.broker_id is not None
    if not judged and log_dir.offline is None:
        plan.unreadable.append(log_dir.path)
    broker = log_dir.broker_id if log_dir.broker_id is not None else -1
    # Each checkpoint's table looked up once per log dir, not once per partition.
    offsets = listing.offsets
    high_watermarks = offsets.get(REPLICATION_OFFSET_CHECKPOINT, {})
    log_starts = offsets.get(LOG_START_OFFSET_CHECKPOINT, {})
    recovery_points = offsets.get(RECOVERY_POINT_CHECKPOINT, {})
    cleaned = offsets.get(CLEANER_OFFSET_CHECKPOINT, {})
    cleaner_unknown = CLEANER_OFFSET_CHECKPOINT in log_dir.bad_checkpoints
    tasks: dict[TopicPartition, ReadTask] = {}
    for position, (child, tp) in enumerate(listing.partitions):
        tasks[tp] = ReadTask(
            log_dir=index,
            child=position,
            broker=broker,
            topic=tp[0],
            partition=tp[1],
            path=child,
            high_watermark=high_watermarks.get(tp),
            log_start_checkpoint=log_starts.get(tp),
            recovery_point=recovery_points.get(tp),
            cleaned_to=cleaned.get(tp),
            cleaner_unknown=cleaner_unknown,
            metadata=tp[0] in METADATA_TOPICS,
            judged=judged,
            size=segment_bytes(child),
            clean_shutdown=log_dir.clean_shutdown,
        )
    if judged:
        for tp in sorted(tasks):
            if topic not in (None, tp[0]):
                continue  # a coordinator's partition, only read (`coordinator_only`)
            plan.slots.append(LineageSlot(index, *tp))
            copies = held.setdefault(tp, {})
            if broker in copies:
                reason = (
                    f"broker {broker} holds {tp[0]}-{tp[1]} in two log dirs "
                    f"(also {copies[broker]}); this copy is left out"
                )
                plan.slots.append(AuditError(UnreadableFile(tasks[tp].path, None, reason), broker))
                tasks[tp] = replace(tasks[tp], judged=False)
                continue
            copies[broker] = tasks[tp].path
        if any(t.metadata for t in tasks.values()):
            plan.slots.append(MetadataSlot(index))
    ordered = sorted(tasks.values(), key=lambda t: t.child)
    plan.tasks.extend(t for t in ordered if topic in (None, t.topic))
    plan.coordinator_only.extend(t for t in ordered if topic not in (None, t.topic))
