"""`logfork audit` on crafted log dirs holding transactions: a hanging transaction and a write
appended twice are named per partition in the JSON and the text, with exit 1, alike on the
local and the Spark engine; their healthy twin (committed, aborted) is consistent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers.audit.local import audit
from checkers.compaction import ABORT, COMMIT
from checkers.tests.test_transactions import MINUTE, NOW, OTHER, PID, T, data, marker
from suites.cli import main as logfork
from testsupport import craft

HEALTHY = [data(0, 2), marker(2, COMMIT), data(3, pid=OTHER), marker(4, ABORT, pid=OTHER)]
# PID's second transaction, from 3, never got its marker, and a plain write came an hour
# later (its partition's newest batch).
STALE = [data(0, 2), marker(2, COMMIT), data(3), data(4, pid=-1, txn=False, ts=NOW)]
# OTHER's idempotent write 5 appended again at 6 (same producer, epoch and sequence).
TWICE = [data(5, pid=OTHER, txn=False, seq=0), data(6, pid=OTHER, txn=False, seq=0)]


def audited(
    tmp_path: Path, logs: dict[int, list[bytes]], *extra: str
) -> tuple[int, dict[str, object]]:
    dirs = [craft.write_cleaned_replica(tmp_path / f"b{b}", b, T, [log]) for b, log in logs.items()]
    out = tmp_path / "audit.json"
    code = logfork(["audit", *map(str, dirs), "--json", str(out), *extra])
    (partition,) = json.loads(out.read_text())["partitions"]
    return code, partition


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_hanging_and_duplicate_are_named_with_exit_1(
    tmp_path: Path, engine: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, p = audited(tmp_path, {1: STALE, 2: STALE + TWICE}, "--engine", engine)
    text = capsys.readouterr().out
    assert code == 1, text
    assert [(h["producer_id"], h["first_offset"]) for h in p["hanging_transactions"]] == [(PID, 3)]
    assert p["hanging_transactions"][0]["brokers"] == [1, 2]
    duplicates = [
        (d["producer_id"], d["first_offset"], d["offsets"], d["broker"])
        for d in p["duplicate_sequences"]
    ]
    assert duplicates == [(OTHER, 5, [5, 6], 2)]
    assert p["torn_transactions"] == []
    assert "HANGING transaction: producer 7 (epoch 0) open from offset 3" in text, text
    assert "DUPLICATE sequence: producer 8 epoch 0 sequence 0 appended 2 times" in text, text
    assert "transaction finding(s) (exit 1)" in text


def test_the_timeout_decides_what_hangs(tmp_path: Path) -> None:
    # An hour behind the newest batch: hanging past Kafka's 15 minutes, not past two hours.
    code, p = audited(tmp_path, {1: STALE, 2: STALE}, "--txn-timeout", str(120 * MINUTE))
    assert (code, p["hanging_transactions"]) == (0, [])


def test_healthy_transactions_are_consistent(tmp_path: Path) -> None:
    code, p = audited(tmp_path, {1: HEALTHY, 2: HEALTHY})
    assert code == 0 and p["status"] == "consistent"
    found = (p["hanging_transactions"], p["torn_transactions"], p["duplicate_sequences"])
    assert found == ([], [], [])


def test_a_transaction_nothing_came_after_hangs_behind_the_time_given(tmp_path: Path) -> None:
    # The transaction is its partition's newest batch: by that it is no age at all. A run
    # that judged its transactions an hour later records the time, and the audit takes it.
    logs = [data(0, 2), marker(2, COMMIT), data(3, ts=NOW)]
    dirs = [craft.write_cleaned_replica(tmp_path / f"b{b}", b, T, [logs]) for b in (1, 2)]
    (fresh,) = audit(dirs).partitions
    assert fresh.transactions.hanging == []
    (late,) = audit(dirs, txn_reference_ms=NOW + 60 * MINUTE).partitions
    assert [(h.producer_id, h.first_offset) for h in late.transactions.hanging] == [(PID, 3)]
