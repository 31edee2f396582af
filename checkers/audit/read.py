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
from checkers.lineage import Lineage, read_partition
from checkers.metadata_log import MetadataLog, decode_metadata_log


def read_task(task: ReadTask) -> Lineage:
    """The replica's lineage, with the offsets its log dir's checkpoints hold for it."""
    tp = task.tp
    offsets = {
        REPLICATION_OFFSET_CHECKPOINT: task.high_watermark,
        RECOVERY_POINT_CHECKPOINT: task.recovery_point,
        LOG_START_OFFSET_CHECKPOINT: task.log_start_checkpoint,
        CLEANER_OFFSET_CHECKPOINT: task.cleaned_to,
    }
    return read_partition(
        Path(task.path),
        task.broker,
        tp,
        {name: {} if value is None else {tp: value} for name, value in offsets.items()},
        cleaner_unknown=task.cleaner_unknown,
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


def read_metadata(task: ReadTask) -> MetadataLog:
    """A metadata-log task's history of partition states (`checkers.metadata_log`)."""
    return decode_metadata_log(task.path)
