"""A real run's log dirs, read and damaged for the audit tests: which replicas hold which
records, and a copy of the run directory with one record changed."""

from __future__ import annotations

import shutil
from pathlib import Path

from checkers.audit import audit
from checkers.audit.plan import plan_audit
from checkers.audit.read import read_task
from checkers.lineage import Lineage
from checkers.recordlog import ReplicaLog
from checkers.verdict import PartitionVerdict
from testsupport import damage


def replicas(run_dir: Path, topic: str, partition: int) -> list[Lineage]:
    """The judged replicas of one partition of a run, as the audit reads them."""
    plan = plan_audit([run_dir], topic)
    return [read_task(t) for t in plan.tasks if t.tp == (topic, partition) and t.judged]


def held_by_all(lineages: list[Lineage], lo: int, hi: int) -> list[int]:
    """Offsets in [lo, hi) where every replica holds a record."""
    sets = []
    for lin in lineages:
        log = ReplicaLog(lin)
        sets.append({r.offset for _b, r in log.with_batches(lo, hi) if lo <= r.offset < hi})
        log.close()
    return sorted(set.intersection(*sets))


def damaged_copy(run_dir: Path, to: Path) -> Path:
    """A copy of the run directory (its report tables left out), to damage."""
    shutil.copytree(run_dir, to, ignore=shutil.ignore_patterns("tables"))
    return to


def change_in_copy(
    run_dir: Path, to: Path, victim: Lineage, offset: int, how: str = "value"
) -> PartitionVerdict:
    """Change (`value`) or drop (`drop`) the record at `offset` of one replica in a copy of
    the run, and audit the copy: the verdict of that partition."""
    copy = damaged_copy(run_dir, to)
    batch = victim.batch_containing(offset)
    assert batch is not None and victim.path is not None
    segment = copy / Path(victim.path).relative_to(run_dir) / batch.segment
    if how == "value":
        damage.change_record_value(segment, offset, b"x")
    else:
        damage.drop_record(segment, offset)
    result = audit([copy], topic=victim.topic)
    (verdict,) = [v for v in result.partitions if v.partition == victim.partition]
    return verdict
