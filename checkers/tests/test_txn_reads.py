"""What consumers read, judged against crafted transactional histories."""

from checkers.txn_reads import (
    ABORTED_READ,
    LOST_WRITE,
    OUT_OF_ORDER,
    PAST_STABLE,
    TORN,
    PartitionRead,
    ReadRecord,
    check_read_passes,
    check_txn_reads,
)
from runrecord.history import (
    ABORTED,
    COMMITTED,
    IN_DOUBT,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    ReadPass,
    Send,
)
from runrecord.outcome import PAST_HIGH_WATERMARK


def send(txn, outcome, offset, partition=0, topic="t"):
    return Send(topic, f"k{offset}", f"v{partition}-{offset}", "all", 0.0, partition=partition,
                offset=offset, transaction=outcome, txn=txn)  # fmt: skip


def read(offsets, end, partition=0):
    records = [ReadRecord(o, f"k{o}", f"v{partition}-{o}") for o in offsets]
    return PartitionRead(records, end)


def kinds(check):
    return sorted((a.kind, a.partition, a.offset) for a in check.anomalies)


def test_healthy_reads_pass():
    # t#1 committed at 0-1, t#2 aborted at 2-3 (its marker at 4), t#3 committed at 5-6.
    sends = [send("t#1", COMMITTED, o) for o in (0, 1)]
    sends += [send("t#2", ABORTED, o) for o in (2, 3)]
    sends += [send("t#3", COMMITTED, o) for o in (5, 6)]
    check = check_txn_reads(sends, {("t", 0): read([0, 1, 5, 6], 8)})
    assert check.clean and check.transactions == 3 and check.read == 4


def test_an_aborted_record_read():
    sends = [send("t#1", ABORTED, o) for o in (0, 1)]
    check = check_txn_reads(sends, {("t", 0): read([1], 3)})
    assert kinds(check) == [(ABORTED_READ, 0, 1)]
    assert check.anomalies[0].transaction == "t#1"


def test_a_committed_transaction_torn_across_partitions():
    sends = [send("t#1", COMMITTED, 0, partition=0), send("t#1", COMMITTED, 0, partition=1)]
    check = check_txn_reads(sends, {("t", 0): read([0], 2), ("t", 1): read([], 2, 1)})
    assert kinds(check) == [(LOST_WRITE, 1, 0), (TORN, 1, 0)]


def test_committed_data_past_the_readers_end_is_not_lost():
    # The last stable offset stops at an open transaction: what lies past it is not yet
    # visible, which is a hang (judged on disk and by the stable offset), not a lost write.
    sends = [send("t#1", COMMITTED, o) for o in (5, 6)]
    assert check_txn_reads(sends, {("t", 0): read([0, 1], 5)}).clean


def test_in_doubt_must_be_all_or_nothing():
    none = [send("t#1", IN_DOUBT, o) for o in (0, 1)]
    assert check_txn_reads(none, {("t", 0): read([], 3)}).clean
    assert check_txn_reads(none, {("t", 0): read([0, 1], 3)}).clean
    assert kinds(check_txn_reads(none, {("t", 0): read([0], 3)})) == [(TORN, 0, 1)]


def test_order_and_reads_past_the_stable_offset():
    check = check_txn_reads([], {("t", 0): read([0, 2, 1, 5], 5)})
    assert kinds(check) == [(OUT_OF_ORDER, 0, 1), (PAST_STABLE, 0, 5)]


def test_another_record_at_the_offset_is_not_a_read_of_it():
    sends = [send("t#1", COMMITTED, 0)]
    other = PartitionRead([ReadRecord(0, "k0", "something else")], 1)
    assert kinds(check_txn_reads(sends, {("t", 0): other})) == [(LOST_WRITE, 0, 0)]


def test_unlabelled_sends_and_unread_partitions_are_not_judged():
    plain = Send("t", "k", "v", "all", 0.0, partition=0, offset=0)
    elsewhere = send("t#1", COMMITTED, 0, partition=7)
    assert check_txn_reads([plain, elsewhere], {("t", 0): read([], 1)}).clean


def uncommitted(offsets, end, partition=0):
    records = [ReadRecord(o, f"k{o}", f"v{partition}-{o}") for o in offsets]
    return ReadPass("t", partition, READ_UNCOMMITTED, end, 0.0, 0.0, records)


def test_a_read_uncommitted_consumer_reads_every_acknowledged_write_aborted_or_not():
    sends = [send("t#1", COMMITTED, 0), send("t#2", ABORTED, 2), send("t#3", IN_DOUBT, 4)]
    # Markers at 1 and 3 hold nothing a consumer is handed.
    assert check_read_passes(sends, [uncommitted([0, 2, 4], 5)]).clean
    check = check_read_passes(sends, [uncommitted([0, 4], 5)])
    assert kinds(check) == [(LOST_WRITE, 0, 2)]
    assert check.anomalies[0].isolation == READ_UNCOMMITTED
    # Below its end only: the high watermark it was given.
    assert check_read_passes(sends, [uncommitted([0], 2)]).clean


def test_read_uncommitted_order_and_reads_past_the_high_watermark():
    check = check_read_passes([], [uncommitted([0, 2, 1, 5], 5)])
    assert kinds(check) == [(OUT_OF_ORDER, 0, 1), (PAST_HIGH_WATERMARK, 0, 5)]


def test_both_levels_are_judged_each_by_its_own_rules():
    sends = [send("t#1", ABORTED, 0)]
    committed = ReadPass("t", 0, READ_COMMITTED, 2, 0.0, 0.0, [])
    check = check_read_passes(sends, [committed, uncommitted([0], 2)])
    assert check.clean and check.read == 1 and check.transactions == 1
    # An aborted record is not the committed reader's to see, and is the other's.
    committed.records = [ReadRecord(0, "k0", "v0-0")]
    check = check_read_passes(sends, [committed, uncommitted([], 2)])
    assert kinds(check) == [(ABORTED_READ, 0, 0), (LOST_WRITE, 0, 0)]
    assert [a.isolation for a in check.anomalies] == [READ_COMMITTED, READ_UNCOMMITTED]
