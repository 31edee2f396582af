"""judge_partition on lineages built from specs."""

from __future__ import annotations

import pytest

from basics.protocol import Protocol
from checkers.abstract import from_spec
from checkers.model import Fate
from checkers.verdict import CONSISTENT, DIVERGED, judge_partition, pick_leader

LOG = [(0, 9, 1), (10, 19, 1), (20, 29, 3)]


def test_identical_and_lagging_replicas_are_consistent() -> None:
    verdict = judge_partition(
        [
            from_spec(1, LOG, high_watermark=30),
            from_spec(2, LOG[:2], high_watermark=20),
            from_spec(3, LOG[1:], log_start_offset=10),
        ]
    )
    assert verdict.status == CONSISTENT and verdict.diverged_at is None
    assert verdict.replicas == [1, 2, 3] and not verdict.below_high_watermark
    assert verdict.log_end_offsets == {1: 30, 2: 20, 3: 30}
    assert verdict.to_dict()["status"] == "consistent"


def test_divergence_above_the_high_watermark() -> None:
    verdict = judge_partition(
        [
            from_spec(1, LOG, high_watermark=10),
            # No checkpoint: nothing says broker 2 never counted [10, 15] committed.
            from_spec(2, [(0, 9, 1), (10, 15, 2)]),
            from_spec(3, LOG[:2], high_watermark=10),
        ]
    )
    assert verdict.status == DIVERGED and verdict.diverged_at == 10
    assert not verdict.below_high_watermark and verdict.high_watermark == 10
    assert [(v.batch.span, v.replicas) for v in verdict.versions] == [
        ("[10, 19]", [1, 3]),
        ("[10, 15]", [2]),
    ]
    assert verdict.pairs == [(1, 2, 10), (2, 3, 10)]
    assert verdict.leader == 1 and set(verdict.predictions) == {2, 3}
    prediction = verdict.predictions[2]
    assert prediction.truncation_offset == 10 and prediction.outcome is Fate.CONSISTENT
    assert verdict.predictions[3].outcome is Fate.CONSISTENT


def test_divergence_below_the_high_watermark_and_absent_replicas() -> None:
    verdict = judge_partition(
        [
            from_spec(1, [(0, 9, 1), (10, 19, 1)], high_watermark=20),
            from_spec(2, [(0, 9, 1), (10, 19, 4)], high_watermark=10),
            from_spec(3, [(0, 9, 1)]),
        ]
    )
    assert verdict.diverged_at == 10 and verdict.below_high_watermark
    assert verdict.lacking == [3]
    assert verdict.leader == 2  # highest epoch at its tail
    assert verdict.predictions[1].truncation_offset == 10


def test_known_leader_and_protocol_choice() -> None:
    lineages = [
        from_spec(1, [(0, 10, 1), (11, 20, 1), (21, 30, 3)]),
        from_spec(2, [(0, 10, 1), (11, 20, 2)]),
    ]
    verdict = judge_partition(lineages, protocol=Protocol.KIP_101)
    assert verdict.leader == 1 and verdict.leader_source.startswith("replica with")
    assert verdict.predictions[2].outcome is Fate.DIVERGED
    verdict = judge_partition(lineages, leader=2)
    assert verdict.leader == 2 and verdict.leader_source.startswith("current leader")
    assert pick_leader(lineages).broker_id == 1


def test_same_offsets_and_epoch_but_other_crc_gets_a_note() -> None:
    verdict = judge_partition([from_spec(1, [(0, 9, 1)]), from_spec(2, [(0, 9, 1, "rewritten")])])
    assert verdict.diverged_at == 0
    assert any("differ only in CRC" in n for n in verdict.notes)


def test_single_replica_and_no_replicas() -> None:
    assert judge_partition([from_spec(1, LOG)]).status == CONSISTENT
    with pytest.raises(ValueError):
        judge_partition([])
