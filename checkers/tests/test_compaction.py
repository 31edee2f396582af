"""The audit on compacted partitions, from crafted bytes: everything the log cleaner does on
purpose is consistent, every real divergence is caught at its exact offset."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from checkers.audit import audit
from checkers.audit.render import render
from checkers.checkpoints import CLEAN_SHUTDOWN
from checkers.encode import BASE_TIMESTAMP, encode_records_batch
from checkers.records import Record
from testsupport import craft, damage

T = ("c", 0)
PID = 7  # the transactional producer


def rec(offset: int, key: str | None, value: str | None) -> Record:
    return Record(
        offset,
        BASE_TIMESTAMP + offset,
        None if key is None else key.encode(),
        None if value is None else value.encode(),
    )


def batch(base: int, last: int, records: list[Record], epoch: int = 1, **kw: object) -> bytes:
    return encode_records_batch(base, records, last_offset=last, leader_epoch=epoch, **kw)


def marker(offset: int, kind: int, epoch: int = 1) -> bytes:
    """A transaction marker: key version 0 + type (ABORT 0, COMMIT 1), value version 0 +
    coordinator epoch (EndTransactionMarker)."""
    key = struct.pack(">hh", 0, kind)
    record = Record(offset, BASE_TIMESTAMP + offset, key, struct.pack(">hi", 0, 3))
    return batch(
        offset, offset, [record], epoch, producer_id=PID, is_transactional=True, is_control=True
    )


# What the leader appended, in two segments: [0, 4] keys k0..k4; [5, 9] k0..k2 again,
# a tombstone of k4 at 8 and a keyless record at 9; [10, 14] k5..k9; then a transaction
# of producer 7 at [15, 16] and its marker at 17.
B0 = [rec(o, f"k{o}", f"a{o}") for o in range(5)]
B1 = [rec(5, "k0", "b0"), rec(6, "k1", "b1"), rec(7, "k2", "b2"), rec(8, "k4", None)]
B1 += [rec(9, None, "nokey")]
B2 = [rec(o, f"k{o - 5}", f"c{o}") for o in range(10, 15)]
TXN = [rec(15, "t0", "x"), rec(16, "t1", "y")]


def raw(commit: bool = True) -> list[list[bytes]]:
    return [
        [batch(0, 4, B0), batch(5, 9, B1)],
        [
            batch(10, 14, B2),
            batch(15, 16, TXN, producer_id=PID, is_transactional=True),
            marker(17, 1 if commit else 0),
        ],
    ]


def cleaned() -> list[list[bytes]]:
    """Broker 1's replica once its cleaner ran up to 10: of [0, 4], k0..k2 are superseded
    by [5, 9] and k4 by its tombstone at 8, so k3 stays; the tombstone (past its horizon)
    and the keyless record go from [5, 9], which is stamped with a delete horizon."""
    return [
        [
            batch(0, 4, [B0[3]]),
            batch(5, 9, B1[:3], delete_horizon=BASE_TIMESTAMP + 999_000),
        ],
        raw()[1],
    ]


def brokers(tmp_path: Path, one: list[list[bytes]], two: list[list[bytes]], **kw) -> list[Path]:
    return [
        craft.write_cleaned_replica(
            tmp_path / "b1", 1, T, one, cleaned_to=10, high_watermark=18, **kw
        ),
        craft.write_cleaned_replica(tmp_path / "b2", 2, T, two, high_watermark=18),
    ]


def test_what_the_cleaner_does_is_consistent(tmp_path: Path) -> None:
    result = audit(brokers(tmp_path, cleaned(), raw()))
    (verdict,) = result.partitions
    assert verdict.status == "consistent", render(result)
    (lenient,) = verdict.lenient
    assert (lenient["start"], lenient["end"], lenient["rule"]) == (0, 10, "compaction")
    assert "cleaner-offset-checkpoint" in lenient["why"]
    assert "compared" in render(result) or result.exit_code == 0


@pytest.mark.parametrize("value", ["a3", "zz"])
def test_an_interrupted_swap_is_compared_as_kafka_will_load_it(tmp_path: Path, value: str) -> None:
    # Broker 1 stopped while its cleaner swapped [0, 9]: the old segment is .deleted and
    # the cleaned one still a .swap. Kafka completes the swap on load, so it is broker 1's
    # log below 10 and is compared record by record (a changed record shows at its offset).
    dirs = brokers(tmp_path, cleaned(), raw())
    pdir = dirs[0] / f"{T[0]}-{T[1]}"
    first = pdir / craft.segment_name(0)
    first.rename(first.with_name(first.name + ".deleted"))
    swapped = [batch(0, 4, [rec(3, "k3", value)]), cleaned()[0][1]]
    (pdir / craft.segment_name(0, ".log.swap")).write_bytes(b"".join(swapped))
    result = audit(dirs)
    (verdict,) = result.partitions
    text = render(result)
    assert "in place of no segment" in text and "completes when it loads the log" in text
    if value == "a3":
        assert verdict.status == "consistent", text
        assert [(x["start"], x["end"]) for x in verdict.lenient] == [(0, 10)]
    else:
        assert (verdict.status, verdict.diverged_at) == ("diverged", 3), text


def test_without_compaction_the_same_logs_diverge(tmp_path: Path) -> None:
    dirs = brokers(tmp_path, cleaned(), raw())
    (dirs[0] / "cleaner-offset-checkpoint").write_text("0\n0\n")
    verdict = audit(dirs).partitions[0]
    assert verdict.status == "diverged" and verdict.diverged_at == 0


def test_aborted_data_and_markers_removed_by_the_cleaner(tmp_path: Path) -> None:
    # Broker 1 cleaned past the aborted transaction: its data goes, the marker stays with
    # its .txnindex entry; then broker 1 removes the marker too (past its horizon).
    one = [[batch(0, 4, [B0[3]]), batch(5, 9, B1[:3])], [batch(10, 14, B2), marker(17, 0)]]
    dirs = [
        craft.write_cleaned_replica(
            tmp_path / "b1", 1, T, one, cleaned_to=18, aborted=[(PID, 15, 17)]
        ),
        craft.write_cleaned_replica(tmp_path / "b2", 2, T, raw(commit=False)),
    ]
    assert audit(dirs).partitions[0].status == "consistent"
    gone = [[batch(0, 4, [B0[3]]), batch(5, 9, B1[:3])], [batch(10, 14, B2)]]
    (dirs[0] / "c-0" / craft.segment_name(10)).write_bytes(b"".join(gone[1]))
    (dirs[0] / "c-0" / craft.segment_name(10, ".txnindex")).unlink(missing_ok=True)
    (dirs[0] / "c-0" / craft.segment_name(0, ".txnindex")).unlink()
    # Broker 2 still holds the ABORT marker: it says the data broker 1 lacks was aborted.
    assert audit(dirs).partitions[0].status == "consistent"


@pytest.mark.parametrize(
    ("case", "one", "at"),
    [
        # The same batch, another leader epoch.
        ("epoch", [[batch(0, 4, [B0[3]]), batch(5, 9, B1[:3], epoch=2)], raw()[1]], 5),
        # A record's value changed (its CRC recomputed): only the comparison sees it.
        (
            "value",
            [[batch(0, 4, [B0[3]]), batch(5, 9, [B1[0], rec(6, "k1", "zz"), B1[2]])], raw()[1]],
            6,
        ),
        # k3 removed from [0, 4] although no later record has its key.
        ("unexplained", [[batch(0, 4, []), batch(5, 9, B1[:3])], raw()[1]], 3),
        # A record removed above the cleaned range, where nothing may differ.
        (
            "uncleaned",
            [
                cleaned()[0],
                [batch(10, 14, [*B2[:2], *B2[3:]]), *raw()[1][1:]],
            ],
            12,
        ),
        # A record's timestamp changed.
        (
            "timestamp",
            [
                [batch(0, 4, [Record(3, 1, b"k3", b"a3")]), batch(5, 9, B1[:3])],
                raw()[1],
            ],
            3,
        ),
    ],
)
def test_real_divergences_are_caught_at_their_offset(
    tmp_path: Path, case: str, one: list[list[bytes]], at: int
) -> None:
    result = audit(brokers(tmp_path, one, raw()))
    verdict = result.partitions[0]
    assert (verdict.status, verdict.diverged_at) == ("diverged", at), (case, render(result))
    assert result.exit_code == 1


def test_committed_on_one_replica_aborted_on_the_other(tmp_path: Path) -> None:
    one = [cleaned()[0], [batch(10, 14, B2), marker(17, 0)]]
    dirs = [
        craft.write_cleaned_replica(
            tmp_path / "b1", 1, T, one, cleaned_to=18, aborted=[(PID, 15, 17)]
        ),
        craft.write_cleaned_replica(tmp_path / "b2", 2, T, raw(commit=True)),
    ]
    verdict = audit(dirs).partitions[0]
    assert (verdict.status, verdict.diverged_at) == ("diverged", 17)
    # The marker gone too: the data broker 2 committed lacks any explanation on broker 1.
    (dirs[0] / "c-0" / craft.segment_name(10)).write_bytes(batch(10, 14, B2))
    for index in (dirs[0] / "c-0").glob("*.txnindex"):
        index.unlink()
    verdict = audit(dirs).partitions[0]
    assert (verdict.status, verdict.diverged_at) == ("diverged", 15)


def test_internal_topics_are_compacted_by_name(tmp_path: Path) -> None:
    tp = ("__consumer_offsets", 0)
    one = [cleaned()[0], raw()[1]]
    dirs = [
        craft.write_cleaned_replica(tmp_path / "b1", 1, tp, one, cleaned_to=10),
        craft.write_cleaned_replica(tmp_path / "b2", 2, tp, raw()),
    ]
    assert audit(dirs).partitions[0].status == "consistent"


def test_named_compacted_topic(tmp_path: Path) -> None:
    # No replica's checkpoint names it, so nothing counts as cleaned: --compacted changes
    # nothing there. The name is what makes a partition compacted, not what is cleaned.
    dirs = [
        craft.write_cleaned_replica(tmp_path / "b1", 1, T, raw()),
        craft.write_cleaned_replica(tmp_path / "b2", 2, T, raw()),
    ]
    assert audit(dirs, compacted=["c"]).partitions[0].status == "consistent"


def test_a_corrupt_cleaner_checkpoint_means_strict_and_says_so(tmp_path: Path) -> None:
    dirs = brokers(tmp_path, cleaned(), raw())
    (dirs[0] / "cleaner-offset-checkpoint").write_text("0\n1\nc 0 ten\n")
    result = audit(dirs)
    (error,) = [e.error for e in result.errors]
    assert error.kind == "bad-checkpoint" and error.path.endswith("cleaner-offset-checkpoint")
    assert error.offset == 4  # the byte where the bad line starts
    verdict = result.partitions[0]
    assert verdict.status == "diverged" and not verdict.lenient
    assert any("could not be read: judged byte for byte" in n for n in verdict.notes)
    assert "judged byte for byte" in render(result)


def test_a_corrupt_txn_index_is_a_typed_error(tmp_path: Path) -> None:
    dirs = brokers(tmp_path, cleaned(), raw(), aborted=[(PID, 15, 17)])
    index = dirs[0] / "c-0" / craft.segment_name(0, ".txnindex")
    index.write_bytes(index.read_bytes()[:-3])
    result = audit(dirs)
    (error,) = [e.error for e in result.errors]
    assert (error.kind, error.path, error.offset) == ("bad-txn-index", str(index), 0)


def test_jbod_log_dirs_and_a_partition_moving_between_them(tmp_path: Path) -> None:
    log = [(0, 9, 1), (10, 19, 2)]
    spec = {("t", 0): craft.PartitionSpec(log), ("t", 1): craft.PartitionSpec(log)}
    b1a = craft.write_log_dir(tmp_path / "b1-a", 1, {("t", 0): spec[("t", 0)]}, kraft=True)
    b1b = craft.write_log_dir(tmp_path / "b1-b", 1, {("t", 1): spec[("t", 1)]}, kraft=True)
    # t-0 is being moved from b1-a to b1-b: the future log is a sidelined copy.
    future = b1b / "t-0.0123456789abcdef0123456789abcdef-future"
    craft.write_segments(future, log[:1])
    b2 = craft.write_log_dir(tmp_path / "b2", 2, spec, kraft=True)
    result = audit([b1a, b1b, b2])
    assert [(v.topic, v.partition, v.status, v.replicas) for v in result.partitions] == [
        ("t", 0, "consistent", [1, 2]),
        ("t", 1, "consistent", [1, 2]),
    ]
    assert result.errors == [] and result.exit_code == 0


def test_preallocated_segments_and_a_tiered_log_start(tmp_path: Path) -> None:
    log = [(0, 9, 1), (10, 19, 1), (20, 29, 2)]
    b1 = craft.write_log_dir(
        tmp_path / "b1", 1, {("t", 0): craft.PartitionSpec(log, preallocate=1 << 16)}
    )
    # Broker 2 keeps only [20, 29] locally; its partition starts at 0 in remote storage.
    b2 = craft.write_log_dir(
        tmp_path / "b2",
        2,
        {("t", 0): craft.PartitionSpec(log[2:], leader_epochs=[(1, 0), (2, 20)])},
    )
    craft.write_offset_checkpoint(b2 / "log-start-offset-checkpoint", {("t", 0): 0})
    result = audit([b1, b2])
    verdict = result.partitions[0]
    assert verdict.status == "consistent" and result.exit_code == 0
    assert verdict.unchecked == [
        {
            "start": 0,
            "end": 20,
            "broker": 2,
            "why": "below the first local segment: held in remote storage only "
            "(tiered storage, KIP-405), so not compared",
        }
    ]


@pytest.mark.parametrize(("how", "offset"), [("value", 6), ("value", 11), ("drop", 12)])
def test_damage_shows_at_its_offset(tmp_path: Path, how: str, offset: int) -> None:
    dirs = brokers(tmp_path, cleaned(), raw())
    segment = dirs[1] / "c-0" / craft.segment_name(0 if offset < 10 else 10)
    if how == "value":
        damage.change_record_value(segment, offset, b"changed")
    else:
        damage.drop_record(segment, offset)
    assert audit(dirs).partitions[0].status == "diverged"
    assert audit(dirs).partitions[0].diverged_at == offset


# A replica stopped for maintenance while its peers' cleaners go on: broker 1 holds the
# raw [0, 9] and stops there; broker 2 (the leader) took [10, 12] (k0..k2 again, which
# supersede [5, 7]) and cleaned up to 13, past broker 1's end.
LATE = [rec(o, f"k{o - 10}", f"d{o}") for o in range(10, 13)]


def lagging_and_cleaned(tmp_path: Path, *, third: bool = False) -> list[Path]:
    leader = [[batch(0, 4, [B0[3]]), batch(5, 9, [])], [batch(10, 12, LATE)]]
    dirs = [
        craft.write_cleaned_replica(tmp_path / "b1", 1, T, raw()[:1], high_watermark=10),
        craft.write_cleaned_replica(
            tmp_path / "b2", 2, T, leader, cleaned_to=13, high_watermark=13
        ),
    ]
    if third:  # a replica that really diverged, so that the audit predicts every follower
        other = [raw()[0], [batch(10, 12, [*LATE[:2], rec(12, "k2", "zz")])]]
        dirs.append(craft.write_cleaned_replica(tmp_path / "b3", 3, T, other, high_watermark=13))
    return dirs


def test_a_lagging_replica_is_a_prefix_of_a_cleaner_that_ran_past_its_end(
    tmp_path: Path,
) -> None:
    result = audit(lagging_and_cleaned(tmp_path))
    (verdict,) = result.partitions
    assert verdict.status == "consistent", render(result)
    assert result.exit_code == 0
    # Compared as compaction allows only over what both hold: up to broker 1's end.
    assert [(x["start"], x["end"]) for x in verdict.lenient] == [(0, 10)]
    assert verdict.lagging == {1: 10}
    assert "broker 1" in render(result) and "lags" in render(result)


def test_the_prediction_for_a_lagging_compacted_follower_uses_the_same_rule(
    tmp_path: Path,
) -> None:
    verdict = audit(lagging_and_cleaned(tmp_path, third=True)).partitions[0]
    assert (verdict.status, verdict.diverged_at) == ("diverged", 12)
    assert verdict.leader == 2
    assert verdict.predictions[1].outcome.value == "consistent"
    assert verdict.predictions[3].outcome.value == "diverged"
    assert verdict.predictions[3].diverged_at == 12


@pytest.mark.parametrize("broker", [1, 2])
def test_a_changed_record_below_the_lagging_end_is_still_found(tmp_path: Path, broker: int) -> None:
    dirs = lagging_and_cleaned(tmp_path)
    damage.change_record_value(dirs[broker - 1] / "c-0" / craft.segment_name(0), 3, b"changed")
    verdict = audit(dirs).partitions[0]
    assert (verdict.status, verdict.diverged_at) == ("diverged", 3)


def test_a_record_the_lagging_replica_lacks_below_its_end_is_found(tmp_path: Path) -> None:
    dirs = lagging_and_cleaned(tmp_path)
    # Broker 1 lost k3 (offset 3), which nothing supersedes and broker 2 kept.
    damage.drop_record(dirs[0] / "c-0" / craft.segment_name(0), 3)
    verdict = audit(dirs).partitions[0]
    assert (verdict.status, verdict.diverged_at) == ("diverged", 3)


def test_a_key_whose_tombstone_is_gone_past_the_lagging_end(tmp_path: Path) -> None:
    # The leader deleted k3 with a tombstone at 13, past broker 1's end, and its cleaner
    # then removed k3 (offset 3) and, past its delete horizon, the tombstone too: nothing of
    # k3 is left on the leader, and broker 1 ends before the tombstone.
    leader = [[batch(0, 4, []), batch(5, 9, [])], [batch(10, 12, LATE), batch(13, 13, [])]]
    dirs = [
        craft.write_cleaned_replica(tmp_path / "b1", 1, T, raw()[:1], high_watermark=10),
        craft.write_cleaned_replica(
            tmp_path / "b2", 2, T, leader, cleaned_to=14, high_watermark=14
        ),
    ]
    verdict = audit(dirs).partitions[0]
    assert verdict.status == "consistent", render(audit(dirs))


def test_an_unreplicated_tail_shows_against_a_follower_where_the_leader_cleaned_it(
    tmp_path: Path,
) -> None:
    # Broker 1 led in epoch 1 and stopped cleanly with [10, 10] (k0) unreplicated, above its
    # own high watermark 10. Broker 2, the new leader, wrote [10, 10] (k0) in epoch 2, then
    # k0 again at 13, and its cleaner dropped that batch; broker 3 holds it uncleaned. The
    # tail differs from broker 3 only, and broker 1's next fetch truncates it.
    tail = [*raw()[:1], [batch(10, 10, [rec(10, "k0", "lost")])]]
    later = [rec(13, "k0", "e13")]
    epoch2 = [batch(10, 10, LATE[:1], epoch=2), batch(11, 12, LATE[1:], epoch=2)]
    epoch2.append(batch(13, 13, later, epoch=2))
    leader = [[batch(0, 4, [B0[3]]), batch(5, 9, [])], epoch2[1:]]
    follower = [raw()[0], epoch2]
    dirs = [
        craft.write_cleaned_replica(tmp_path / "b1", 1, T, tail, high_watermark=10),
        craft.write_cleaned_replica(
            tmp_path / "b2", 2, T, leader, cleaned_to=13, high_watermark=14
        ),
        craft.write_cleaned_replica(tmp_path / "b3", 3, T, follower, high_watermark=14),
    ]
    (dirs[0] / CLEAN_SHUTDOWN).write_text('{"version":0,"brokerEpoch":12}')
    for d in dirs[1:]:
        craft.write_leader_epoch_checkpoint(d / f"{T[0]}-{T[1]}", [(1, 0), (2, 10)])
    result = audit(dirs)
    (verdict,) = result.partitions
    assert verdict.status == "consistent", render(result)
    assert verdict.pending_truncation is not None
    assert (verdict.pending_truncation.replicas, verdict.pending_truncation.start) == ([1], 10)
    assert any("broker 1 differs from broker(s) 3 from offset 10" in n for n in verdict.notes)
    # Had broker 1 counted [10, 10] committed, committed data would differ.
    (dirs[0] / "replication-offset-checkpoint").write_text(f"0\n1\n{T[0]} {T[1]} 11\n")
    assert audit(dirs).partitions[0].status == "diverged"
