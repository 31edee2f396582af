"""No verdict without its evidence: where a scenario's checks could not look, the run is not
reached, never consistent. Crafted log dirs and histories, no cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from basics.errors import NotReached
from checkers.audit import audit
from checkers.verdict import PartitionVerdict
from runrecord.outcome import HANGING, VIOLATED
from suites.convergence import Convergence
from suites.scenarios.production_mix import TxnRounds
from suites.steps import disk_symptom, judged, require_settled
from testsupport import craft

LOG = [(0, 9, 1), (10, 19, 1), (20, 29, 2)]


def _dirs(tmp_path: Path) -> list[Path]:
    return [craft.write_log_dir(tmp_path / f"b{b}", b, {("t", 0): LOG}) for b in (1, 2)]


def test_a_partition_read_whole_is_judged(tmp_path: Path) -> None:
    (verdict,) = judged(audit(_dirs(tmp_path), topic="t"), "t", [0])
    assert verdict.status == "consistent"


def test_an_unreadable_input_leaves_the_scenario_not_reached(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path)
    segment = dirs[1] / "t-0" / craft.segment_name(0)
    segment.unlink()
    segment.mkdir()  # unreadable as a segment, even for root
    result = audit(dirs, topic="t")
    assert result.errors and [v.status for v in result.partitions] == ["consistent"]
    with pytest.raises(NotReached) as caught:
        judged(result, "t", [0])
    assert str(segment) in caught.value.observed


def test_a_partition_no_replica_holds_is_not_reached(tmp_path: Path) -> None:
    with pytest.raises(NotReached, match="t-1 on disk"):
        judged(audit(_dirs(tmp_path), topic="t"), "t", [0, 1])


def test_a_hanging_transaction_on_disk_is_the_verdict(tmp_path: Path) -> None:
    # kafka-17754 judged its reads only: what the disk audit found reached the summary text.
    from checkers.tests.test_audit_transactions import HEALTHY, STALE, T

    def verdict(log: list[bytes]) -> PartitionVerdict:
        dirs = [craft.write_cleaned_replica(tmp_path / str(id(log)) / f"b{b}", b, T, [log])
                for b in (1, 2)]  # fmt: skip
        (v,) = audit(dirs).partitions
        return v

    hanging = disk_symptom(verdict(STALE))
    assert hanging is not None and (hanging.kind, hanging.offset) == (HANGING, 3)
    assert disk_symptom(verdict(HEALTHY)) is None


def test_a_verdict_needs_the_replicas_settled() -> None:
    moving = Convergence(False, 90.0, isr=(1,), log_end_offsets={1: 40, 2: 25})
    with pytest.raises(NotReached) as caught:
        require_settled(moving, "L converging with F")
    assert "log ends {1: 40, 2: 25}" in caught.value.observed
    stuck = Convergence(False, 12.0, stuck={2: "Error in fetch"}, isr=(1,))
    require_settled(stuck, "L converging with F")  # what the brokers did: judged
    with pytest.raises(NotReached):
        require_settled(stuck, "replicas converging", stuck_ok=False)
    require_settled(Convergence(True, 3.0, isr=(1, 2)), "L converging with F")


def test_a_fatal_transactional_error_on_healthy_brokers_is_a_finding() -> None:
    # production-mix once renewed its producer on every fatal error: a run whose every
    # round renewed passed with nothing committed.
    healthy = TxnRounds(committed=5, aborted=5)
    assert healthy.finding() is None and healthy.counts() == {
        "committed": 5, "aborted": 5, "renewed": 0
    }  # fmt: skip
    failed = healthy + TxnRounds(committed=1, renewed=1, fatal="INVALID_TXN_STATE")
    finding = failed.finding()
    assert finding is not None and finding.observed.kind == VIOLATED
    assert "failed fatally with no fault running (INVALID_TXN_STATE)" in finding.summary
    assert finding.details["transactions"] == {"committed": 6, "aborted": 5, "renewed": 1}
