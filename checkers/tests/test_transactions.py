"""Transactions and idempotent writes judged from crafted segments, read back by the real
reader: what healthy producers, the log cleaner and retention leave is never flagged;
hanging and torn transactions and writes appended twice are, once each."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from checkers.checkpoints import LOG_START_OFFSET_CHECKPOINT
from checkers.compaction import ABORT, COMMIT
from checkers.encode import BASE_TIMESTAMP, encode_records_batch
from checkers.lineage import Lineage, read_log_dir
from checkers.records import Record
from checkers.transactions import (
    DEFAULT_TXN_TIMEOUT_MS,
    DuplicateSequence,
    HangingTransaction,
    TornTransaction,
    judge_transactions,
)
from testsupport import craft

T = ("t", 0)
PID, OTHER = 7, 8
MINUTE = 60_000
OLD = BASE_TIMESTAMP  # written an hour before the reference time
NOW = BASE_TIMESTAMP + 60 * MINUTE


def data(
    base: int,
    count: int = 1,
    *,
    pid: int = PID,
    epoch: int = 0,
    seq: int | None = None,
    txn: bool = True,
    ts: int = OLD,
) -> bytes:
    """A data batch of `count` records at `base`; its sequence is its base offset unless
    given (-1 with no producer id)."""
    records = [Record(base + i, ts, f"k{base + i}".encode(), b"v") for i in range(count)]
    if seq is None:
        seq = base if pid >= 0 else -1
    return encode_records_batch(
        base,
        records,
        last_offset=base + count - 1,
        leader_epoch=1,
        producer_id=pid,
        producer_epoch=epoch if pid >= 0 else -1,
        base_sequence=seq,
        is_transactional=txn,
    )


def marker(offset: int, kind: int, *, pid: int = PID, epoch: int = 0, empty: bool = False):
    """A transaction marker (EndTransactionMarker: key version 0 + type, value version 0 +
    coordinator epoch); `empty`: as the cleaner may leave it, with no record."""
    key = struct.pack(">hh", 0, kind)
    records = [] if empty else [Record(offset, OLD, key, struct.pack(">hi", 0, 3))]
    return encode_records_batch(
        offset,
        records,
        last_offset=offset,
        leader_epoch=1,
        producer_id=pid,
        producer_epoch=epoch,
        is_transactional=True,
        is_control=True,
        base_timestamp=OLD,
    )


def replica(
    tmp_path: Path,
    broker: int,
    *segments: list[bytes],
    log_start: int | None = None,
    aborted: tuple[tuple[int, int, int], ...] = (),
    cleaned_to: int | None = None,
) -> Lineage:
    """One broker's replica of T written as real segment files, read back from its log dir."""
    root = craft.write_cleaned_replica(
        tmp_path / f"b{broker}", broker, T, segments, aborted=aborted, cleaned_to=cleaned_to
    )
    if log_start is not None:
        craft.write_offset_checkpoint(root / LOG_START_OFFSET_CHECKPOINT, {T: log_start})
    lineage = read_log_dir(root).lineages[T]
    assert not lineage.errors and lineage.torn_tail is None
    return lineage


def judge(*lineages: Lineage, **kw):
    kw.setdefault("reference_ms", NOW)
    return judge_transactions(lineages, **kw)


def test_default_timeout_is_kafkas_transaction_max_timeout() -> None:
    assert DEFAULT_TXN_TIMEOUT_MS == 15 * MINUTE


def test_committed_and_aborted_transactions_are_healthy(tmp_path: Path) -> None:
    # Two producers interleaved: PID commits [0, 2] + 4 at 5; OTHER aborts 3 at 6; then
    # PID commits again 7 at 8. Both replicas hold it all.
    log = [
        data(0, 3),
        data(3, pid=OTHER),
        data(4),
        marker(5, COMMIT),
        marker(6, ABORT, pid=OTHER),
        data(7),
        marker(8, COMMIT),
    ]
    found = judge(replica(tmp_path, 1, log), replica(tmp_path, 2, log))
    assert not found.found
    assert found.to_dict() == {
        "hanging_transactions": [],
        "torn_transactions": [],
        "duplicate_sequences": [],
    }


def test_an_open_transaction_past_the_timeout_hangs(tmp_path: Path) -> None:
    # PID committed [0, 1]; its next transaction [3, 4] got no marker on either replica.
    log = [data(0, 2), marker(2, COMMIT), data(3), data(4), data(5, pid=-1, txn=False)]
    found = judge(replica(tmp_path, 1, log), replica(tmp_path, 2, log))
    assert found.hanging == [HangingTransaction(PID, 0, 3, OLD, 60 * MINUTE, (1, 2))]
    assert not found.torn and not found.duplicates
    as_json = json.loads(json.dumps(found.to_dict()))
    assert as_json["hanging_transactions"] == [
        {
            "producer_id": PID,
            "producer_epoch": 0,
            "first_offset": 3,
            "timestamp_ms": OLD,
            "age_ms": 60 * MINUTE,
            "brokers": [1, 2],
        }
    ]


def test_an_open_transaction_younger_than_the_timeout_is_in_flight(tmp_path: Path) -> None:
    log = [data(0, ts=NOW - 14 * MINUTE)]
    assert not judge(replica(tmp_path, 1, log)).found
    # A shorter timeout (the producer's own, say) makes the same transaction hang.
    found = judge(replica(tmp_path, 2, log), txn_timeout_ms=10 * MINUTE)
    assert [(h.first_offset, h.brokers) for h in found.hanging] == [(0, (2,))]


def test_the_default_reference_is_the_newest_timestamp_of_the_partition(tmp_path: Path) -> None:
    # The open transaction is aged against the newest batch of any replica, not the wall
    # clock: 10 minutes behind it is in flight, 16 minutes behind it hangs.
    one = replica(tmp_path, 1, [data(0), data(1, pid=-1, txn=False, ts=OLD + 10 * MINUTE)])
    assert not judge_transactions([one]).found
    two = replica(tmp_path, 2, [data(0), data(1, pid=-1, txn=False, ts=OLD + 16 * MINUTE)])
    (hanging,) = judge_transactions([two]).hanging
    assert (hanging.first_offset, hanging.age_ms, hanging.brokers) == (0, 16 * MINUTE, (2,))


def test_a_replica_behind_the_marker_lags_it_does_not_hang(tmp_path: Path) -> None:
    # Broker 1 holds the COMMIT at 2; broker 2 stopped before fetching it: lag, not a hang.
    full = [data(0), data(1), marker(2, COMMIT)]
    leader = replica(tmp_path, 1, full)
    assert not judge(leader, replica(tmp_path, 2, full[:2])).found
    # Broker 3 holds offset 2 and more, but no marker there: open on broker 3 alone.
    found = judge(leader, replica(tmp_path, 3, [*full[:2], data(2, pid=-1, txn=False)]))
    assert [(h.first_offset, h.brokers) for h in found.hanging] == [(0, (3,))]


def test_a_marker_closes_its_producer_whatever_its_epoch(tmp_path: Path) -> None:
    # Fenced (or transactions v2, KIP-890): data at epoch 0, ABORT marker at epoch 1;
    # then a transaction at epoch 1 committed with epoch 2.
    log = [data(0), marker(1, ABORT, epoch=1), data(2, epoch=1), marker(3, COMMIT, epoch=2)]
    assert not judge(replica(tmp_path, 1, log)).found


def test_what_the_cleaner_leaves_is_healthy(tmp_path: Path) -> None:
    # The original log: PID aborts [0, 1] at 2 and commits [3, 4] at 5; OTHER aborts 6 at 7.
    # Broker 1's cleaner removed the aborted data (its ABORT marker left alone, with its
    # .txnindex entry) and the superseded committed records, leaving an empty batch
    # (RETAIN_EMPTY) before the COMMIT; the ABORT at 7, its data gone, is an empty
    # control batch. Broker 2's cleaner, further on, removed PID's markers too.
    one = [
        marker(2, ABORT),
        encode_records_batch(
            3, [], last_offset=4, leader_epoch=1, producer_id=PID, producer_epoch=0,
            base_sequence=3, is_transactional=True, base_timestamp=OLD,
        ),
        marker(5, COMMIT),
        marker(7, ABORT, pid=OTHER, empty=True),
        data(8, pid=-1, txn=False),
    ]  # fmt: skip
    two = [data(8, pid=-1, txn=False)]
    lineages = (
        replica(tmp_path, 1, one, aborted=((PID, 0, 2), (OTHER, 6, 7)), cleaned_to=8),
        replica(tmp_path, 2, two, aborted=((OTHER, 6, 7),), cleaned_to=8),
    )
    assert not judge(*lineages).found


def test_data_below_the_log_start_offset_is_healthy(tmp_path: Path) -> None:
    # Broker 1: DeleteRecords moved the log start to 2, inside the first segment, whose
    # transaction data [0, 1] is still on disk; its COMMIT is at 2. Broker 2: retention
    # deleted the segment of the data; its log begins at the marker.
    log = [data(0), data(1), marker(2, COMMIT), data(3, pid=OTHER), marker(4, ABORT, pid=OTHER)]
    lineages = (replica(tmp_path, 1, log, log_start=2), replica(tmp_path, 2, log[2:]))
    assert lineages[0].log_start_offset == 2 and lineages[1].log_start_offset == 2
    assert not judge(*lineages).found


def test_commit_on_one_replica_and_abort_on_another_is_torn(tmp_path: Path) -> None:
    head = [data(0, pid=OTHER, txn=False), data(1), data(2, 2)]
    found = judge(
        replica(tmp_path, 1, [*head, marker(4, COMMIT)]),
        replica(tmp_path, 2, [*head, marker(4, ABORT)]),
        replica(tmp_path, 3, [*head, marker(4, COMMIT)]),
    )
    assert found.torn == [TornTransaction(PID, 1, 4, ((1, "COMMIT"), (2, "ABORT"), (3, "COMMIT")))]
    assert not found.hanging and not found.duplicates
    assert found.to_dict()["torn_transactions"] == [
        {
            "producer_id": PID,
            "first_offset": 1,
            "marker_offset": 4,
            "kinds": [
                {"broker": 1, "kind": "COMMIT"},
                {"broker": 2, "kind": "ABORT"},
                {"broker": 3, "kind": "COMMIT"},
            ],
            "coordinator": None,
            "transactional_id": None,
        }
    ]


def test_an_abort_only_the_txnindex_remembers_is_torn_against_a_commit(tmp_path: Path) -> None:
    # Broker 2's cleaner removed the aborted data and its marker; its .txnindex still says
    # PID's transaction [1, 3] was aborted at 3, where broker 1 committed it.
    committed = replica(tmp_path, 1, [data(0, pid=-1, txn=False), data(1, 2), marker(3, COMMIT)])
    aborted = replica(tmp_path, 2, [data(0, pid=-1, txn=False)], aborted=((PID, 1, 3),))
    (torn,) = judge(committed, aborted).torn
    assert (torn.first_offset, torn.marker_offset, torn.kinds) == (
        1,
        3,
        ((1, "COMMIT"), (2, "ABORT")),
    )


def test_a_write_appended_twice_is_a_duplicate_sequence(tmp_path: Path) -> None:
    # An idempotent producer's batch with sequence 0 appended at 0 and again at 3 on
    # broker 1 (and a transactional one, sequence 5, at 5 and 6); broker 2 holds each once.
    one = [
        data(0, 2, txn=False, seq=0),
        data(2, txn=False, seq=2),
        data(3, 2, txn=False, seq=0),
        data(5, pid=OTHER, seq=5),
        data(6, pid=OTHER, seq=5),
        marker(7, COMMIT, pid=OTHER),
    ]
    two = [one[0], one[1], one[3], one[5]]
    found = judge(replica(tmp_path, 1, one), replica(tmp_path, 2, two))
    assert found.duplicates == [
        DuplicateSequence(PID, 0, 0, 0, (0, 3), 1),
        DuplicateSequence(OTHER, 0, 5, 5, (5, 6), 1),
    ]
    assert not found.hanging and not found.torn
    assert found.to_dict()["duplicate_sequences"][0] == {
        "producer_id": PID,
        "producer_epoch": 0,
        "base_sequence": 0,
        "first_offset": 0,
        "offsets": [0, 3],
        "broker": 1,
    }


def test_a_retry_on_diverged_replicas_is_not_a_duplicate(tmp_path: Path) -> None:
    # After a leader change the retried write (sequence 1) landed at 2 on the new leader;
    # the old leader still holds its first copy at 1. One copy per replica: no duplicate.
    old = replica(tmp_path, 1, [data(0, txn=False, seq=0), data(1, txn=False, seq=1)])
    new = replica(tmp_path, 2, [data(0, txn=False, seq=0), data(2, txn=False, seq=1)])
    assert not judge(old, new).found


def test_writes_without_sequences_and_markers_are_never_duplicates(tmp_path: Path) -> None:
    log = [
        craft.encode_legacy_message(0, b"a", magic=0),
        craft.encode_legacy_message(1, b"a", magic=1),
        craft.encode_legacy_message(2, b"a", magic=1),
        data(3, pid=-1, txn=False),
        data(4, pid=-1, txn=False),
        data(5, txn=False, seq=0),
        data(6, txn=False, epoch=1, seq=0),  # a bumped epoch starts its sequences again
        data(7),
        marker(8, COMMIT),
        data(9),
        marker(10, COMMIT),
        data(11, pid=OTHER),
        marker(12, ABORT, pid=OTHER),
    ]
    lineage = replica(tmp_path, 1, log)
    assert [b.magic for b in lineage.batches[:3]] == [0, 1, 1]
    assert not judge(lineage).found
