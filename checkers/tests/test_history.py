"""The history checker on crafted logs: a write is lost only when it is gone for no reason
the protocol gives. The log cleaner removing a record a later record of its key superseded,
and an aborted transaction's write, are counted apart, never as lost."""

from __future__ import annotations

from pathlib import Path

from checkers.audit.plan import plan_audit
from checkers.audit.read import read_task
from checkers.encode import BASE_TIMESTAMP, encode_records_batch
from checkers.history import ReadLog, check_history
from checkers.recordlog import ReplicaLog
from checkers.records import Record
from runrecord.history import ABORTED, COMMITTED, Send
from testsupport import craft

T = ("c", 0)


def rec(offset: int, key: str, value: str | None) -> Record:
    return Record(offset, BASE_TIMESTAMP + offset, key.encode(),
                  None if value is None else value.encode())  # fmt: skip


def send(offset: int, key: str, value: str | None, **kw: object) -> Send:
    return Send("c", key, value, "all", 0.0, acked=1.0 + offset, partition=0, offset=offset,
                **kw)  # type: ignore[arg-type]  # fmt: skip


# What the producer wrote: k0..k4 at 0-4, then k0 again at 5 and a tombstone of k1 at 6.
WRITES = [send(o, f"k{o}", f"a{o}") for o in range(5)]
WRITES += [send(5, "k0", "b5"), send(6, "k1", None)]


def replica(tmp_path: Path, records: list[Record], cleaned_to: int | None) -> ReplicaLog:
    segment = [encode_records_batch(0, records, last_offset=6, leader_epoch=1)]
    log_dir = craft.write_cleaned_replica(tmp_path / "b1", 1, T, [segment],
                                          cleaned_to=cleaned_to)  # fmt: skip
    (task,) = plan_audit([log_dir]).tasks
    return ReplicaLog(read_task(task))


def test_records_the_cleaner_removed_for_a_later_one_of_their_key_are_not_lost(
    tmp_path: Path,
) -> None:
    # The cleaner ran to 7: k0 at 0 superseded by 5, k1 at 1 by its tombstone at 6.
    kept = [rec(2, "k2", "a2"), rec(3, "k3", "a3"), rec(4, "k4", "a4"), rec(5, "k0", "b5")]
    kept += [rec(6, "k1", None)]
    log = replica(tmp_path, kept, cleaned_to=7)
    check = check_history(WRITES, log)
    assert (check.lost_count, check.compacted, check.present) == (0, 2, 5)
    assert "not lost: 2 compacted away" in check.line()


def test_a_record_gone_without_a_later_one_of_its_key_is_lost(tmp_path: Path) -> None:
    # k2 at 2 is gone, and nothing later has its key: compaction does not explain it.
    kept = [rec(3, "k3", "a3"), rec(4, "k4", "a4"), rec(5, "k0", "b5"), rec(6, "k1", None)]
    log = replica(tmp_path, kept, cleaned_to=7)
    check = check_history(WRITES, log)
    assert (check.lost_count, check.compacted) == (1, 2)
    assert [w.offset for w in check.lost] == [2]
    assert check.durable_lost == 1


def test_a_superseded_record_gone_where_no_cleaner_ran_is_lost(tmp_path: Path) -> None:
    # The same log, but no cleaner-offset-checkpoint: nothing was compacted on purpose.
    kept = [rec(2, "k2", "a2"), rec(3, "k3", "a3"), rec(4, "k4", "a4"), rec(5, "k0", "b5")]
    kept += [rec(6, "k1", None)]
    log = replica(tmp_path, kept, cleaned_to=None)
    check = check_history(WRITES, log)
    assert (check.lost_count, check.compacted) == (2, 0)


def test_writes_of_aborted_transactions_are_not_lost() -> None:
    writes = [send(1, "t1", "y", transaction=COMMITTED), send(2, "t0", "x", transaction=ABORTED)]
    read = ReadLog([rec(1, "t1", "y"), rec(3, "t3", "w")])
    check = check_history(writes, read)
    assert (check.lost_count, check.aborted, check.present) == (0, 1, 1)
    assert "1 in aborted transactions" in check.line()
    # A committed write missing is lost.
    check = check_history([send(2, "t2", "z", transaction=COMMITTED)], read)
    assert check.lost_count == 1


def test_a_log_start_past_acknowledged_writes_that_nothing_deleted_loses_them() -> None:
    # The leader answers log start 3: writes 0-2 are gone, and no DeleteRecords or
    # retention removed them.
    read = ReadLog([rec(o, f"k{o}", f"a{o}") for o in range(3, 5)], log_start=3, log_end=5)
    check = check_history(WRITES[:5], read)
    assert (check.lost_count, check.below_log_start, check.present) == (3, 0, 2)
    assert "starts at offset 3, past it" in check.lost[0].why
    # Deleted on purpose below 3 (DeleteRecords): counted apart, never as lost.
    check = check_history(WRITES[:5], read, deleted_below=3)
    assert (check.lost_count, check.below_log_start) == (0, 3)


def test_a_read_that_begins_past_a_log_start_of_0_lost_what_it_skipped() -> None:
    # log start 0 is a log start like any other (it was once taken for "none given").
    read = ReadLog([rec(o, f"k{o}", f"a{o}") for o in range(2, 5)], log_start=0, log_end=5)
    check = check_history(WRITES[:5], read)
    assert [w.offset for w in check.lost] == [0, 1]


def test_a_write_in_a_batch_that_does_not_decode_leaves_the_check_unjudged(
    tmp_path: Path,
) -> None:
    records = [rec(o, f"k{o}", f"a{o}") for o in range(5)]
    first = encode_records_batch(0, records, last_offset=4, leader_epoch=1)
    tail = [rec(5, "k0", "b5"), rec(6, "k1", None)]
    second = encode_records_batch(5, tail, last_offset=6, leader_epoch=1)
    damaged = bytearray(first)
    damaged[22] |= 0x01  # attributes: gzip, which its records are not; its CRC fails too
    for name, segment in (("whole", first), ("damaged", bytes(damaged))):
        log_dir = craft.write_cleaned_replica(tmp_path / name, 1, T, [[segment, second]])
        (task,) = plan_audit([log_dir]).tasks
        check = check_history(WRITES, ReplicaLog(read_task(task)))
        if name == "whole":
            assert (check.present, check.unjudged) == (7, "")
            continue
        assert (check.unverifiable, check.lost_count, check.present) == (5, 0, 2)
        assert check.unjudged == (
            "5 acknowledged write(s) of replica 1 lie in batches that could not be decoded"
        )
        assert check.to_dict()["unjudged"] == check.unjudged
