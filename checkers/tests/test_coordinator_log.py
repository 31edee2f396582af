"""The transaction coordinator's own log, crafted as real segments and read back: what it
completed is compared with each partition's markers, and only where (producer id, epoch)
names one transaction; a marker of the other kind is a torn transaction, in the audit's
JSON and text alike on both engines, and its healthy twin passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers.compaction import ABORT, COMMIT
from checkers.coordinator_log import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    TV2,
    TXN_STATE_TOPIC,
    Decision,
    decisions_of,
    decode_key,
    decode_value,
)
from checkers.encode import BASE_TIMESTAMP, encode_records_batch
from checkers.lineage import Lineage, read_log_dir
from checkers.records import Record
from checkers.tests.test_transactions import PID, T, data, judge, marker, replica
from checkers.transactions import TornTransaction
from suites.cli import main as logfork
from testsupport import craft

COORD = (TXN_STATE_TOPIC, 0)
TXN = "app-1"
ONGOING = 1


def states(*values: bytes, txn: str = TXN) -> list[bytes]:
    """One batch per coordinator record, from offset 0."""
    key = craft.encode_txn_log_key(txn)
    return [
        encode_records_batch(i, [Record(i, BASE_TIMESTAMP, key, v)], last_offset=i, leader_epoch=1)
        for i, v in enumerate(values)
    ]


def ended(kind: int, epoch: int = 0, *, version: int = 0, client: int | None = None) -> list:
    """Ongoing, Prepare and Complete of one transaction on T, of `kind` (COMMIT or ABORT)."""
    prepare, complete = (
        (PREPARE_COMMIT, COMPLETE_COMMIT) if kind == COMMIT else (PREPARE_ABORT, COMPLETE_ABORT)
    )
    on = {T[0]: [T[1]]}
    opts = {"version": version, "client_version": client}
    return [
        craft.encode_txn_log_value(PID, epoch, ONGOING, on, **opts),
        craft.encode_txn_log_value(PID, epoch, prepare, on, **opts),
        craft.encode_txn_log_value(PID, epoch, complete, {}, **opts),
    ]


def coordinator(tmp_path: Path, values: list[bytes], *, cleaned_to: int | None = None) -> Lineage:
    root = craft.write_cleaned_replica(
        tmp_path / "coord", 1, COORD, [states(*values)], cleaned_to=cleaned_to
    )
    return read_log_dir(root).lineages[COORD]


@pytest.mark.parametrize("version", [0, 1])
def test_a_value_decodes_in_both_versions(version: int) -> None:
    raw = craft.encode_txn_log_value(
        PID, 3, PREPARE_COMMIT, {"a": [0, 2], "b": [1]}, version=version, client_version=TV2
    )
    state = decode_value(raw)
    assert (state.producer_id, state.producer_epoch, state.status) == (PID, 3, PREPARE_COMMIT)
    assert state.partitions == (("a", 0), ("a", 2), ("b", 1))
    assert state.client_version == (TV2 if version else 0)
    assert decode_key(craft.encode_txn_log_key(TXN)) == TXN


def test_a_completed_transaction_is_a_decision_for_each_partition_it_listed(
    tmp_path: Path,
) -> None:
    found = decisions_of([coordinator(tmp_path, ended(COMMIT))])
    assert found == {T: {(PID, 0): Decision(TXN, PID, 0, "COMMIT", 2)}}


def test_a_transaction_only_prepared_decides_nothing(tmp_path: Path) -> None:
    assert decisions_of([coordinator(tmp_path, ended(ABORT)[:2])]) == {}


def test_two_transactions_of_one_epoch_decide_nothing_in_v1(tmp_path: Path) -> None:
    # Transactions v1 keep the epoch: a marker (PID, 0) could be either's.
    assert decisions_of([coordinator(tmp_path, ended(COMMIT) + ended(ABORT))]) == {}


def test_a_cleaned_coordinator_log_decides_nothing_in_v1(tmp_path: Path) -> None:
    # Compaction may have taken an earlier transaction of the same epoch.
    assert decisions_of([coordinator(tmp_path, ended(COMMIT), cleaned_to=3)]) == {}


def test_transactions_v2_name_each_transaction_by_its_epoch(tmp_path: Path) -> None:
    values = ended(COMMIT, 1, version=1, client=TV2) + ended(ABORT, 2, version=1, client=TV2)
    found = decisions_of([coordinator(tmp_path, values, cleaned_to=6)])
    assert {pe: d.kind for pe, d in found[T].items()} == {(PID, 1): "COMMIT", (PID, 2): "ABORT"}


def test_a_marker_of_the_other_kind_is_torn_against_the_coordinator(tmp_path: Path) -> None:
    decisions = decisions_of([coordinator(tmp_path, ended(COMMIT))])[T]
    log = [data(0, 2), marker(2, ABORT)]
    found = judge(replica(tmp_path, 1, log), replica(tmp_path, 2, log), decisions=decisions)
    assert found.torn == [TornTransaction(PID, 0, 2, ((1, "ABORT"), (2, "ABORT")), "COMMIT", TXN)]
    # The healthy twin: the marker the coordinator completed.
    ok = [data(0, 2), marker(2, COMMIT)]
    assert not judge(replica(tmp_path, 3, ok), decisions=decisions).found


def test_v1_markers_of_both_kinds_are_not_paired_with_one_decision(tmp_path: Path) -> None:
    # The coordinator log holds one transaction of (PID, 0), the partition two markers of it
    # (one whose Prepare record the coordinator's log no longer has): no pairing is safe.
    decisions = decisions_of([coordinator(tmp_path, ended(COMMIT))])[T]
    log = [data(0), marker(1, ABORT), data(2), marker(3, COMMIT)]
    assert not judge(replica(tmp_path, 1, log), decisions=decisions).found


@pytest.mark.parametrize(
    "options", [["--engine", "local"], ["--engine", "spark"], ["--topic", T[0]]]
)
def test_the_audit_names_the_coordinators_kind(
    tmp_path: Path, options: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Also when the audit is of the topic alone: the coordinator's log is read, not judged."""
    dirs = []
    for b in (1, 2):  # both replicas ABORT where the coordinator completed a COMMIT
        log = [data(0, 2), marker(2, ABORT)]
        root = craft.write_cleaned_replica(tmp_path / f"b{b}", b, T, [log])
        craft.write_cleaned_replica(root, b, COORD, [states(*ended(COMMIT))])
        dirs.append(str(root))
    out = tmp_path / "audit.json"
    code = logfork(["audit", *dirs, "--json", str(out), *options])
    text = capsys.readouterr().out
    assert code == 1, text
    partitions = {
        (p["topic"], p["partition"]): p for p in json.loads(out.read_text())["partitions"]
    }
    (torn,) = partitions[T]["torn_transactions"]
    assert (torn["producer_id"], torn["first_offset"], torn["marker_offset"]) == (PID, 0, 2)
    assert (torn["coordinator"], torn["transactional_id"]) == ("COMMIT", TXN)
    if "--topic" in options:
        assert list(partitions) == [T]
    else:
        assert partitions[COORD]["torn_transactions"] == []
    assert "its coordinator completed COMMIT ('app-1')" in text, text
