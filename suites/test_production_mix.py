"""production-mix on real brokers: the audit calls healthy production traffic consistent,
and one damaged record on one replica diverged at exactly its offset."""

from __future__ import annotations

from pathlib import Path

import pytest

from checkers.lineage import cleaned_end
from suites.cli import main as logfork
from suites.scenarios.production_mix import COMPACTED
from testsupport.audits import change_in_copy, held_by_all, replicas
from testsupport.scenarios import run_scenario

pytestmark = pytest.mark.cluster


def test_production_mix(kafka_target, logfork_runs, request, tmp_path: Path) -> None:
    verdict = run_scenario("production-mix", kafka_target, logfork_runs, request)
    txns = verdict.details["transactions"]
    assert txns["committed"] > 0 and txns["renewed"] == 0, txns
    run_dir = Path(verdict.run_dir)
    assert logfork(["audit", str(run_dir)]) == 0

    lineages = replicas(run_dir, COMPACTED, 0)
    start = max(lin.log_start_offset for lin in lineages)
    cleaned = [cleaned_end(lin) for lin in lineages]
    # A record inside the range some cleaner rewrote, held by every replica: a changed
    # value (its batch's CRC recomputed) only the comparison can see.
    inside = held_by_all(lineages, start, max(cleaned))
    above = held_by_all(lineages, max(cleaned), min(lin.leo for lin in lineages))
    assert inside and above, (start, cleaned, [lin.leo for lin in lineages])
    for name, offset in (("value", inside[len(inside) // 2]), ("drop", above[len(above) // 2])):
        victim = next(lin for lin in lineages if lin.batch_containing(offset) is not None)
        v = change_in_copy(run_dir, tmp_path / name, victim, offset, name)
        assert (v.status, v.diverged_at) == ("diverged", offset), (name, v.notes)
        assert logfork(["audit", str(tmp_path / name), "--topic", COMPACTED]) == 1
