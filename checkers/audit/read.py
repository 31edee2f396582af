"""The audit's second stage: one read task to what is on disk. Runs wherever the executor
runs it (this process, or a Spark executor)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from checkers.audit.plan import ReadTask
from checkers.audit.result import ReplicaSummary
from checkers.checkpoints import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)
from checkers.coordinator_log import Decisions, decisions_of
from checkers.lineage import Lineage, read_partition
from checkers.metadata_log import MetadataLog, decode_metadata_log
from checkers.storage import is_remote, relabel, staged_dir, unreadable


def read_task(task: ReadTask) -> Lineage:
    """The replica's lineage, with the offsets its log dir's checkpoints hold for it. A
    remote partition dir is read from a local copy (`checkers.storage`), named by its URI."""
    if not is_remote(task.path):
        return _read_local(task, Path(task.path))
    try:
        with staged_dir(task.path) as local:
            return relabel(_read_local(task, local), str(local), task.path)
    except Exception as exc:  # noqa: BLE001 - any filesystem failure is bad input
        error = unreadable(task.path, exc)
        return Lineage(task.topic, task.partition, task.broker, errors=[error], path=task.path)


def _read_local(task: ReadTask, path: Path) -> Lineage:
    tp = task.tp
    offsets = {
        REPLICATION_OFFSET_CHECKPOINT: task.high_watermark,
        RECOVERY_POINT_CHECKPOINT: task.recovery_point,
        LOG_START_OFFSET_CHECKPOINT: task.log_start_checkpoint,
        CLEANER_OFFSET_CHECKPOINT: task.cleaned_to,
    }
    return read_partition(
        path,
        task.broker,
        tp,
        {name: {} if value is None else {tp: value} for name, value in offsets.items()},
        cleaner_unknown=task.cleaner_unknown,
        clean_shutdown=task.clean_shutdown,
    )


def read_replicas(
    tasks: Iterable[ReadTask], on_read: Callable[[ReadTask, Lineage], None] | None = None
) -> tuple[list[ReplicaSummary], list[Lineage]]:
    """One partition's read tasks, in order: the summary of every replica read, and the
    lineages to judge. `on_read` sees each replica as it is read (the Spark engine writes
    its table rows there); only the judged ones are kept."""
    summaries: list[ReplicaSummary] = []
    judged: list[Lineage] = []
    for task in tasks:
        lineage = read_task(task)
        summaries.append(
            ReplicaSummary.of(
                lineage,
                log_dir=task.log_dir,
                child=task.child,
                judged=task.judged,
                metadata=task.metadata,
            )
        )
        if on_read is not None:
            on_read(task, lineage)
        if task.judged:
            judged.append(lineage)
    return summaries, judged


def read_decisions(tasks: Iterable[ReadTask]) -> Decisions:
    """What one `__transaction_state` partition's coordinator completed
    (`checkers.coordinator_log`), from the replicas its tasks read."""
    _, judged = read_replicas(tasks)
    return decisions_of(judged)


def read_metadata(task: ReadTask) -> MetadataLog:
    """A metadata-log task's history of partition states (`checkers.metadata_log`)."""
    return metadata_at(task.path)


def metadata_at(path: str) -> MetadataLog:
    """The metadata log in a partition dir, local or remote."""
    if not is_remote(path):
        return decode_metadata_log(path)
    try:
        with staged_dir(path) as local:
            return relabel(decode_metadata_log(local), str(local), path)
    except Exception as exc:  # noqa: BLE001 - any filesystem failure is bad input
        return MetadataLog(path=path, errors=[unreadable(path, exc)])
