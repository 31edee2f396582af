"""production-mix on real brokers: the audit calls healthy production traffic consistent,
and one damaged record on one replica diverged at exactly its offset."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from checkers.audit import audit
from checkers.audit.plan import plan_audit
from checkers.audit.read import read_task
from checkers.compaction import cleaned_end
from checkers.recordlog import ReplicaLog
from suites.cli import main as logfork
from suites.scenarios.production_mix import COMPACTED
from testsupport import damage
from testsupport.scenarios import run_scenario

pytestmark = pytest.mark.cluster


def replicas(run_dir: Path, partition: int) -> list:
    plan = plan_audit([run_dir], COMPACTED)
    return [read_task(t) for t in plan.tasks if t.tp == (COMPACTED, partition) and t.judged]


def held_by_all(lineages: list, lo: int, hi: int) -> list[int]:
    """Offsets in [lo, hi) where every replica holds a record."""
    sets = []
    for lin in lineages:
        log = ReplicaLog(lin)
        sets.append({r.offset for _b, r in log.with_batches(lo, hi) if lo <= r.offset < hi})
        log.close()
    return sorted(set.intersection(*sets))


def damaged_copy(run_dir: Path, to: Path) -> Path:
    shutil.copytree(run_dir, to, ignore=shutil.ignore_patterns("tables"))
    return to


def test_production_mix(kafka_target, logfork_runs, request, tmp_path: Path) -> None:
    verdict = run_scenario("production-mix", kafka_target, logfork_runs, request)
    run_dir = Path(verdict.run_dir)
    assert logfork(["audit", str(run_dir)]) == 0

    lineages = replicas(run_dir, 0)
    start = max(lin.log_start_offset for lin in lineages)
    cleaned = [cleaned_end(lin) for lin in lineages]
    # A record inside the range some cleaner rewrote, held by every replica: a changed
    # value (its batch's CRC recomputed) only the comparison can see.
    inside = held_by_all(lineages, start, max(cleaned))
    above = held_by_all(lineages, max(cleaned), min(lin.leo for lin in lineages))
    assert inside and above, (start, cleaned, [lin.leo for lin in lineages])
    for name, offset, change in (
        (
            "value",
            inside[len(inside) // 2],
            lambda seg, o: damage.change_record_value(seg, o, b"x"),
        ),
        ("drop", above[len(above) // 2], damage.drop_record),
    ):
        copy = damaged_copy(run_dir, tmp_path / name)
        victim = next(lin for lin in lineages if lin.batch_containing(offset) is not None)
        batch = victim.batch_containing(offset)
        segment = copy / Path(victim.path).relative_to(run_dir) / batch.segment
        change(segment, offset)
        result = audit([copy])
        (v,) = [p for p in result.partitions if (p.topic, p.partition) == (COMPACTED, 0)]
        assert (v.status, v.diverged_at) == ("diverged", offset), (name, v.notes)
        assert result.exit_code == 1
        assert logfork(["audit", str(copy), "--topic", COMPACTED]) == 1
