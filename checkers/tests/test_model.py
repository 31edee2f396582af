"""The protocol model against the KIP texts' own walk-throughs, line by line, and the
KIP-279 truncation point against a brute-force search."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.abstract import from_spec
from checkers.model import (
    Fate,
    Protocol,
    end_offset_current,
    end_offset_kip101,
    end_offset_kip279,
    truncate_follower,
)


def spans(batches: list) -> list[tuple[int, int, int]]:
    return [(b.base_offset, b.last_offset, b.leader_epoch) for b in batches]


# --------------------------------------------------------------------------------------
# KIP-279 scenario 1 (KAFKA-6361): A leads epoch 1 with [0, 10] and [11, 20]; B has only
# [0, 10] when it is elected in epoch 2 and appends [11, n]; A is elected again in epoch 3
# and appends [21, 30]; B becomes a follower.

A_STEP3 = [(0, 10, 1), (11, 20, 1), (21, 30, 3)]


def scenario1(n: int, protocol: Protocol):
    leader = from_spec(1, A_STEP3)
    follower = from_spec(2, [(0, 10, 1), (11, n, 2)])
    return truncate_follower(leader, follower, protocol)


def test_kip279_scenario1_n_below_20_under_kip101_rules() -> None:
    # "broker B will not do any truncation. It will begin fetching from offset n, which will
    # ultimately cause an out of order offset error because broker A will return the full
    # batch beginning from offset 11 which broker B will be unable to append."
    result = scenario1(15, Protocol.KIP_101)
    assert result.describe() == [
        "follower asked for epoch 2; leader answered offset 21 (KIP-101 rules); "
        "follower kept [11, 15]",
        "follower fetched from offset 16; leader returned [11, 20]; follower could not append "
        "them: batch [11, 20] starts below the follower's log end offset 16: out-of-order "
        "offsets",
        "the follower is stuck: it cannot replicate this partition",
    ]
    assert result.truncation_offset == 16 and result.outcome is Fate.STUCK
    assert len(result.rounds) == 1


def test_kip279_scenario1_n_equals_20_under_kip101_rules() -> None:
    # "Broker B does not truncate. It will fetch from offset 21 and everything will appear
    # fine though the logs have actually diverged."
    result = scenario1(20, Protocol.KIP_101)
    assert result.describe() == [
        "follower asked for epoch 2; leader answered offset 21 (KIP-101 rules); "
        "follower kept [11, 20]",
        "follower fetched from offset 21; leader returned [21, 30]; follower appended them",
        "the follower's log still differs from the leader's from offset 11: the replicas have "
        "silently diverged",
    ]
    assert result.truncation_offset == 21
    assert result.outcome is Fate.DIVERGED and result.diverged_at == 11
    assert spans(result.follower_log) == [(0, 10, 1), (11, 20, 2), (21, 30, 3)]


def test_kip279_scenario1_n_above_20_under_kip101_rules() -> None:
    # "Broker B will attempt to truncate to offset 21. Since this is in the middle of the
    # batch, it will truncate all the way to offset 10. It can begin fetching from offset 11
    # and everything is fine."
    result = scenario1(25, Protocol.KIP_101)
    assert result.describe() == [
        "follower asked for epoch 2; leader answered offset 21 (KIP-101 rules); "
        "follower truncated [11, 25] (log end offset now 11)",
        "follower fetched from offset 11; leader returned [11, 20], [21, 30]; follower "
        "appended them",
        "the follower's log is consistent with the leader's",
    ]
    assert result.truncation_offset == 11 and result.outcome is Fate.CONSISTENT
    assert spans(result.follower_log) == A_STEP3


@pytest.mark.parametrize("n", [15, 20, 25])
def test_kip279_scenario1_under_kip279_rules(n: int) -> None:
    # "Broker A finds largest epoch <= 2 and log end offset in this epoch, and sends response
    # {leader_epoch=1, offset = 21}. Broker B truncates all offsets for epochs > 1, in our
    # example offsets [11, n], its LEO becomes 11. Since 21 > 11, broker B starts fetching
    # from offset 11."
    result = scenario1(n, Protocol.KIP_279)
    assert result.describe() == [
        "follower asked for epoch 2; leader answered epoch 1, offset 21 (KIP-279 rules); "
        f"follower truncated [11, {n}] (log end offset now 11)",
        "follower fetched from offset 11; leader returned [11, 20], [21, 30]; follower "
        "appended them",
        "the follower's log is consistent with the leader's",
    ]
    assert len(result.rounds) == 1 and result.truncation_offset == 11
    assert (
        result.rounds[0].asked_epoch,
        result.rounds[0].answer_epoch,
        result.rounds[0].answer_offset,
    ) == (2, 1, 21)
    assert spans(result.follower_log) == A_STEP3


@pytest.mark.parametrize("n", [15, 20, 25])
def test_kip279_scenario1_with_a_diverging_epoch_fetch(n: int) -> None:
    result = scenario1(n, Protocol.DIVERGING_EPOCH)
    assert result.describe()[0] == (
        f"follower fetched from offset {n + 1} with last fetched epoch 2; leader answered "
        "diverging epoch 1 ending at offset 21 (KIP-320/KIP-595 rules); follower truncated "
        f"[11, {n}] (log end offset now 11)"
    )
    assert result.truncation_offset == 11 and result.outcome is Fate.CONSISTENT


# --------------------------------------------------------------------------------------
# KIP-279 scenario 2 (scenario 1 of KIP-101): A restarts as a follower with HW 11.


def test_kip279_scenario2() -> None:
    # "Broker A sends OffsetForLeaderEpoch request to broker B with leader_epoch = 1. Broker B
    # responds with {leader_epoch 1, offset 21}. Broker A does not truncate."
    a = from_spec(1, [(0, 10, 1), (11, 20, 1)], high_watermark=11)
    b = from_spec(2, [(0, 10, 1), (11, 20, 1)], high_watermark=21)
    result = truncate_follower(b, a, Protocol.KIP_279)
    assert result.describe() == [
        "follower asked for epoch 1; leader answered epoch 1, offset 21 (KIP-279 rules); "
        "follower kept [0, 10], [11, 20]",
        "the follower's log is consistent with the leader's",
    ]
    assert result.truncation_offset == 21


# --------------------------------------------------------------------------------------
# KIP-279 scenario 3 (appendix (a) of KIP-101): four unclean elections, one message each.
# A: offset 0 in epoch 0, offset 1 in epoch 2; B: offset 0 in epoch 1, offset 1 in epoch 3.

A_UNCLEAN = [(0, 0, 0), (1, 1, 2)]
B_UNCLEAN = [(0, 0, 1), (1, 1, 3)]


def test_kip279_scenario3_two_rounds() -> None:
    # "broker A sends OffsetForLeaderEpoch to broker B with leader_epoch 2. Broker B responds
    # with (leader_epoch 1, offset 1). Broker A sends another OffsetForLeaderEpoch to broker B
    # with leader_epoch 0. Broker B responds with UNKNOWN_OFFSET_FOR_LEADER_EPOCH ... Broker A
    # will truncate to its HW which is offet 0 and starts fetching from offset 0."
    a = from_spec(1, A_UNCLEAN, high_watermark=0)
    b = from_spec(2, B_UNCLEAN, high_watermark=2)
    result = truncate_follower(b, a, Protocol.KIP_279)
    assert result.describe() == [
        "follower asked for epoch 2; leader answered epoch 1, offset 1 (KIP-279 rules); "
        "follower truncated [1, 1] (log end offset now 1)",
        "follower asked for epoch 0; leader answered unknown offset (KIP-279 rules); "
        "follower fell back to its high watermark 0, truncated [0, 0] (log end offset now 0)",
        "follower fetched from offset 0; leader returned [0, 0], [1, 1]; follower appended them",
        "the follower's log is consistent with the leader's",
    ]
    assert len(result.rounds) == 2 and result.truncation_offset == 0
    assert [(r.asked_epoch, r.answer_epoch, r.answer_offset) for r in result.rounds] == [
        (2, 1, 1),
        (0, None, None),
    ]


def test_kip101_appendix_a_under_kip101_rules() -> None:
    # KIP-101 appendix (a): "It sends a Epoch Request for Epoch 2 to broker B. B has only
    # epochs 1,3, not 2, so it replies with the first offset of Epoch 3 (which is 1). So
    # offset 0 is divergent."
    a = from_spec(1, A_UNCLEAN, high_watermark=0)
    b = from_spec(2, B_UNCLEAN)
    result = truncate_follower(b, a, Protocol.KIP_101)
    assert result.describe()[0] == (
        "follower asked for epoch 2; leader answered offset 1 "
        "(KIP-101 rules); follower truncated [1, 1] (log end "
        "offset now 1)"
    )
    assert result.outcome is Fate.DIVERGED and result.diverged_at == 0


# --------------------------------------------------------------------------------------
# KIP-101 scenarios. m1 and m2 are offsets 0 and 1, written in leader epoch 0.


def test_kip101_scenario1() -> None:
    # A (follower) has m1 and m2 but only knows m1 is committed (high watermark 1: the
    # figure's "HW -> 0 m1"). A restarts.
    a = from_spec(1, [(0, 0, 0), (1, 1, 0)], high_watermark=1)
    b = from_spec(2, [(0, 0, 0), (1, 1, 0)], high_watermark=2)
    # Before KIP-101: "It truncates its log to the high watermark" -- if B fails now, m2 is
    # gone for good.
    before = truncate_follower(b, a, Protocol.HIGH_WATERMARK)
    assert before.describe()[0] == (
        "follower truncated to its high watermark 1 (pre-KIP-101 "
        "rules); follower truncated [1, 1] (log end offset now 1)"
    )
    assert spans(before.truncated_log) == [(0, 0, 0)]
    # With KIP-101: "This returns offset 2 (Log End offset LE0). Broker A thus has nothing to
    # truncate."
    after = truncate_follower(b, a, Protocol.KIP_101)
    assert after.describe() == [
        "follower asked for epoch 0; leader answered offset 2 (KIP-101 rules); follower kept "
        "[0, 0], [1, 1]",
        "the follower's log is consistent with the leader's",
    ]
    assert spans(after.truncated_log) == [(0, 0, 0), (1, 1, 0)]


def test_kip101_scenario2() -> None:
    # After a power outage, B (which lost m2) leads epoch 1 and writes m3 at offset 1. A had
    # m2 committed (high watermark 2).
    a = from_spec(1, [(0, 0, 0), (1, 1, 0)], high_watermark=2)
    b = from_spec(2, [(0, 0, 0), (1, 1, 1)])
    # Before KIP-101 the replicas diverge: A keeps m2 where B has m3.
    before = truncate_follower(b, a, Protocol.HIGH_WATERMARK)
    assert before.outcome is Fate.DIVERGED and before.diverged_at == 1
    # "This returns the first offset of LE1, which is offset 1. The follower knows that m2 is
    # orphaned and truncates it. It then fetches from offset 1 and the logs are consistent."
    after = truncate_follower(b, a, Protocol.KIP_101)
    assert after.describe() == [
        "follower asked for epoch 0; leader answered offset 1 (KIP-101 rules); follower "
        "truncated [1, 1] (log end offset now 1)",
        "follower fetched from offset 1; leader returned [1, 1]; follower appended them",
        "the follower's log is consistent with the leader's",
    ]


# --------------------------------------------------------------------------------------
# Leader answers and corner cases


def test_leader_answers() -> None:
    epochs = [(1, 0), (3, 21)]
    assert end_offset_kip101(epochs, 31, 3) == 31
    assert end_offset_kip101(epochs, 31, 2) == 21
    assert end_offset_kip101(epochs, 31, 0) is None
    assert end_offset_kip279(epochs, 31, 2) == (1, 21)
    assert end_offset_kip279(epochs, 31, 7) == (3, 31)
    assert end_offset_kip279(epochs, 31, 0) is None
    assert end_offset_current(epochs, 31, 0) == (0, 0)
    assert end_offset_current(epochs, 31, 7) is None
    assert end_offset_current(epochs, 31, 2) == (1, 21)


def test_follower_without_epochs_falls_back_to_its_high_watermark() -> None:
    leader = from_spec(1, [(0, 0, -1), (1, 1, -1), (2, 2, -1)])
    follower = from_spec(2, [(0, 0, -1), (1, 1, -1, "x")], high_watermark=1)
    for protocol in (Protocol.KIP_101, Protocol.KIP_279):
        result = truncate_follower(leader, follower, protocol)
        assert result.rounds[0].request == "high-watermark" and result.truncation_offset == 1
        assert result.outcome is Fate.CONSISTENT


def test_follower_below_the_leaders_log_start() -> None:
    leader = from_spec(1, [(100, 109, 4)], log_start_offset=100)
    follower = from_spec(2, [(0, 9, 1)])
    result = truncate_follower(leader, follower, Protocol.KIP_279)
    assert "restarts its log there" in result.describe()[-3]
    assert spans(result.follower_log) == [(100, 109, 4)]


def test_follower_ahead_of_the_leader_in_the_same_epoch() -> None:
    # The leader was elected at offset 15 with epoch 2 and has written nothing yet.
    leader = from_spec(1, [(0, 14, 1)], epochs=[(1, 0), (2, 15)])
    follower = from_spec(2, [(0, 14, 1), (15, 20, 1)])
    for protocol in (Protocol.KIP_101, Protocol.KIP_279, Protocol.DIVERGING_EPOCH):
        result = truncate_follower(leader, follower, protocol)
        assert result.truncation_offset == 15, protocol
        assert result.outcome is Fate.CONSISTENT


# --------------------------------------------------------------------------------------
# Property: under KIP-279 rules the follower truncates to the largest common (epoch, offset)
# prefix, which brute force finds by comparing the two logs offset by offset.


@st.composite
def valid_histories(draw: st.DrawFn) -> tuple[list, list, list]:
    """(leader batches, follower batches, leader epoch cache) from a history Kafka allows:
    a common prefix, then suffixes written in different epochs (one epoch, one leader, one
    set of writes), and a current leader holding the highest epoch of all."""
    offset, epoch = 0, draw(st.integers(0, 3))
    prefix = []
    for _ in range(draw(st.integers(0, 4))):
        epoch += draw(st.integers(0, 2))
        size = draw(st.integers(1, 4))
        prefix.append((offset, offset + size - 1, epoch))
        offset += size
    floor = prefix[-1][2] + 1 if prefix else 0
    fresh = draw(st.lists(st.integers(floor, floor + 15), unique=True, max_size=6))
    sides = draw(st.lists(st.booleans(), min_size=len(fresh), max_size=len(fresh)))
    leader_epochs = sorted(e for e, side in zip(fresh, sides, strict=True) if side)
    follower_epochs = sorted(e for e, side in zip(fresh, sides, strict=True) if not side)
    # Only one side can have gone on writing in the prefix's last epoch.
    continuing = draw(st.sampled_from(["none", "leader", "follower"])) if prefix else "none"
    if continuing == "leader":
        leader_epochs.insert(0, prefix[-1][2])
    elif continuing == "follower":
        follower_epochs.insert(0, prefix[-1][2])

    def suffix(epochs: list[int]) -> list:
        out, at = [], offset
        for e in epochs:
            for _ in range(draw(st.integers(1, 2))):
                size = draw(st.integers(1, 4))
                out.append(
                    (at, at + size - 1, e, "leader" if epochs is leader_epochs else "follower")
                )
                at += size
        return out

    leader = prefix + suffix(leader_epochs)
    follower = prefix + suffix(follower_epochs)
    top = max([b[2] for b in leader + follower], default=0) + 1
    cache: list = []
    for b in leader:
        if not cache or b[2] > cache[-1][0]:
            cache.append((b[2], b[0]))
    cache.append((top, leader[-1][1] + 1 if leader else 0))  # elected, nothing written yet
    return leader, follower, cache


def brute_force_prefix(leader: list, follower: list) -> int:
    def epoch_at(batches: list) -> dict[int, tuple]:
        return {o: (b[2], b[0], b[1]) for b in batches for o in range(b[0], b[1] + 1)}

    a, b = epoch_at(leader), epoch_at(follower)
    offset = 0
    while offset in a and offset in b and a[offset] == b[offset]:
        offset += 1
    return offset


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_histories())
def test_kip279_truncates_to_the_largest_common_prefix(history: tuple) -> None:
    leader_spec, follower_spec, cache = history
    leader = from_spec(1, leader_spec, epochs=cache)
    follower = from_spec(2, follower_spec, high_watermark=0)
    expected = brute_force_prefix(leader_spec, follower_spec)
    result = truncate_follower(leader, follower, Protocol.KIP_279)
    assert result.truncation_offset == expected
    assert result.outcome is Fate.CONSISTENT
    assert [b.key for b in result.follower_log] == [b.key for b in leader.batches]
    # Fetch-time divergence detection reaches the same point.
    assert (
        truncate_follower(leader, follower, Protocol.DIVERGING_EPOCH).truncation_offset == expected
    )
