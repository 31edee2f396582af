"""How a follower finds where to truncate its log, under four generations of the protocol.

- `Protocol.HIGH_WATERMARK` (before 0.11): the follower truncates to its own high watermark
  (KIP-101, "Scenario 1").
- `Protocol.KIP_101` (OffsetsForLeaderEpoch v0, 0.11 to 1.1): the follower sends its latest
  epoch; the leader answers the start offset of the first epoch above it, or its log end
  offset if that is its current epoch (KIP-101, "Request Semantics"); the follower truncates
  to that offset if it is below its own log end offset (step 4.5).
- `Protocol.KIP_279` (v1+, 2.0): the leader answers the largest epoch at or below the
  requested one with that epoch's end offset; a follower that does not know that epoch
  truncates to the end of its largest smaller epoch and asks again, for as many rounds as
  needed (KIP-279, "Proposed Changes", steps 2 to 4).
- `Protocol.DIVERGING_EPOCH` (2.7+, KIP-320 fencing with KIP-595's diverging epoch): the
  follower's fetch carries the epoch of its last batch; the leader checks it against its
  own epoch cache and answers a diverging epoch and end offset instead of data when the
  two disagree (KIP-595, "Fetch", check 3).

After truncating, the follower fetches from its log end offset. The leader returns whole
batches, starting with the one that holds the fetch offset; a batch that starts below the
follower's log end offset cannot be appended (out-of-order offsets: KIP-279 scenario 1,
case n < 20). Truncating to an offset inside a batch drops the whole batch (KIP-279
scenario 1, case n > 20).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from basics.protocol import Protocol
from checkers.lineage import EpochStarts, Lineage, first_divergence
from checkers.records import Batch


class Fate(Enum):
    """What becomes of a follower once it has truncated and fetched from the leader."""

    CONSISTENT = "consistent"  # the follower's log ends up a prefix of (or equal to) the leader's
    DIVERGED = "diverged"  # the follower fetched without error, yet holds different batches
    STUCK = "stuck"  # the follower cannot append what the leader returns


def _spans(batches: list[Batch]) -> tuple[str, ...]:
    return tuple(b.span for b in batches)


def _list_spans(spans: tuple[str, ...]) -> str:
    if len(spans) > 4:
        return f"{spans[0]}, {spans[1]} ... {spans[-1]} ({len(spans)} batches)"
    return ", ".join(spans)


@dataclass(frozen=True)
class Round:
    """One step of the truncation phase: what the follower asked, the leader answered, and
    what the follower did about it."""

    request: str  # "high-watermark", "offsets-for-leader-epoch" or "fetch"
    rules: str
    asked_epoch: int | None = None
    fetch_offset: int | None = None
    answer_epoch: int | None = None
    answer_offset: int | None = None  # None: the leader had no answer (UNDEFINED_EPOCH_OFFSET)
    truncated_to: int = 0  # the follower's log end offset after this round
    kept: tuple[str, ...] = ()  # the follower's batches of the asked epoch that stayed
    removed: tuple[str, ...] = ()
    fallback: str = ""  # set when the follower fell back to its high watermark

    def describe(self) -> str:
        if self.request == "high-watermark":
            # answer_offset holds the offset the follower truncated towards
            head = (
                f"follower {self.fallback}"
                if self.fallback
                else f"follower truncated to its high watermark {self.answer_offset}"
            )
            return f"{head} ({self.rules}); {self._action(with_fallback=False)}"
        if self.request == "fetch":
            asked = (
                f"follower fetched from offset {self.fetch_offset} with last fetched epoch "
                f"{self.asked_epoch}"
            )
            if self.answer_offset is None:
                answer = "leader could not place that epoch (offset out of range)"
            else:
                answer = (
                    f"leader answered diverging epoch {self.answer_epoch} ending at offset "
                    f"{self.answer_offset}"
                )
        else:
            asked = f"follower asked for epoch {self.asked_epoch}"
            if self.answer_offset is None:
                answer = "leader answered unknown offset"
            elif self.answer_epoch is None:
                answer = f"leader answered offset {self.answer_offset}"
            else:
                answer = f"leader answered epoch {self.answer_epoch}, offset {self.answer_offset}"
        return f"{asked}; {answer} ({self.rules}); {self._action()}"

    def _action(self, with_fallback: bool = True) -> str:
        prefix = f"follower {self.fallback}, " if self.fallback and with_fallback else "follower "
        if self.removed:
            return (
                f"{prefix}truncated {_list_spans(self.removed)} (log end offset now "
                f"{self.truncated_to})"
            )
        if self.kept:
            return f"{prefix}kept {_list_spans(self.kept)}"
        return f"{prefix}truncated nothing (log end offset {self.truncated_to})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "request": self.request,
            "asked_epoch": self.asked_epoch,
            "fetch_offset": self.fetch_offset,
            "answer_epoch": self.answer_epoch,
            "answer_offset": self.answer_offset,
            "truncated_to": self.truncated_to,
            "removed": list(self.removed),
            "describe": self.describe(),
        }


@dataclass(frozen=True)
class FetchStep:
    """One fetch of the catch-up phase."""

    fetch_offset: int
    returned: tuple[str, ...]
    appended: bool
    note: str

    def describe(self) -> str:
        if not self.returned:
            return f"follower fetched from offset {self.fetch_offset}; {self.note}"
        verb = "appended" if self.appended else "could not append"
        return (
            f"follower fetched from offset {self.fetch_offset}; leader returned "
            f"{_list_spans(self.returned)}; follower {verb} them"
            + (f": {self.note}" if self.note else "")
        )


@dataclass
class TruncationResult:
    protocol: Protocol
    truncation_offset: int  # the follower's log end offset once truncation is over
    rounds: list[Round]
    truncated_log: list[Batch]  # the follower's log once truncation is over
    fetches: list[FetchStep]
    follower_log: list[Batch]  # after fetching from the leader (or where it got stuck)
    outcome: Fate
    diverged_at: int | None = None  # first offset where the follower's final log differs

    def describe(self) -> list[str]:
        lines = [r.describe() for r in self.rounds] + [f.describe() for f in self.fetches]
        if self.outcome is Fate.DIVERGED:
            lines.append(
                f"the follower's log still differs from the leader's from offset "
                f"{self.diverged_at}: the replicas have silently diverged"
            )
        elif self.outcome is Fate.STUCK:
            lines.append("the follower is stuck: it cannot replicate this partition")
        else:
            lines.append("the follower's log is consistent with the leader's")
        return lines

    def compact(self) -> TruncationResult:
        """Without the follower's logs: what a verdict keeps of a prediction (its rounds,
        fetches and outcome), so that verdicts stay small however long the logs are."""
        return dataclasses.replace(self, truncated_log=[], follower_log=[])

    def to_dict(self) -> dict[str, Any]:
        return {
            "protocol": self.protocol.value,
            "truncation_offset": self.truncation_offset,
            "rounds": [r.to_dict() for r in self.rounds],
            "fetches": [f.describe() for f in self.fetches],
            "outcome": self.outcome.value,
            "diverged_at": self.diverged_at,
            "describe": self.describe(),
        }


# --------------------------------------------------------------------------------------
# The leader's answers


def end_offset_kip101(epochs: EpochStarts, leo: int, requested: int) -> int | None:
    """OffsetsForLeaderEpoch v0. KIP-101 "Request Semantics" 1: the start offset of the first
    epoch larger than the requested one, or the log end offset if the requested epoch is the
    leader's current one. None (UNDEFINED_EPOCH_OFFSET) when there is no such epoch or the
    requested epoch predates the leader's first, as 0.11's LeaderEpochFileCache answers."""
    if not epochs:
        return None
    if requested == epochs[-1][0]:
        return leo
    later = [start for epoch, start in epochs if epoch > requested]
    if not later or requested < epochs[0][0]:
        return None
    return later[0]


def end_offset_kip279(epochs: EpochStarts, leo: int, requested: int) -> tuple[int, int] | None:
    """OffsetsForLeaderEpoch v1+. KIP-279 step 2: the largest epoch less than or equal to the
    requested one and that epoch's end offset (the start of the next epoch, or the log end
    offset for the current one). None (UNKNOWN_OFFSET_FOR_LEADER_EPOCH) when the leader
    knows no epoch that small (KIP-279 scenario 3)."""
    floor = [(e, s) for e, s in epochs if e <= requested]
    if not floor:
        return None
    epoch = floor[-1][0]
    return epoch, _end_of(epochs, epoch, leo)


def end_offset_current(epochs: EpochStarts, leo: int, requested: int) -> tuple[int, int] | None:
    """The leader epoch cache's answer since 2.x (LeaderEpochFileCache.endOffsetFor), used by
    diverging-epoch fetches: like KIP-279, except that an epoch older than every cached one
    gets the start offset of the first cached epoch (its data is gone from the log anyway),
    and an epoch above every cached one has no answer."""
    if not epochs:
        return None
    if requested == epochs[-1][0]:
        return requested, leo
    higher = [(e, s) for e, s in epochs if e > requested]
    if not higher:
        return None
    floor = [e for e, _ in epochs if e <= requested]
    return (floor[-1] if floor else requested), higher[0][1]


def _end_of(epochs: EpochStarts, epoch: int, leo: int) -> int:
    later = [s for e, s in epochs if e > epoch]
    return later[0] if later else leo


# --------------------------------------------------------------------------------------
# The follower


@dataclass
class _Follower:
    batches: list[Batch]
    leo: int
    epochs: EpochStarts
    high_watermark: int | None
    log_start: int
    rounds: list[Round] = field(default_factory=list)

    @property
    def latest_epoch(self) -> int | None:
        return self.epochs[-1][0] if self.epochs else None

    def knows(self, epoch: int) -> bool:
        return any(e == epoch for e, _ in self.epochs)

    def end_of(self, epoch: int) -> int:
        return _end_of(self.epochs, epoch, self.leo)

    def hw_target(self) -> tuple[int, str]:
        if self.high_watermark is None:
            return self.log_start, (
                f"fell back to its log start offset {self.log_start} (its "
                "high watermark is unknown)"
            )
        return self.high_watermark, f"fell back to its high watermark {self.high_watermark}"

    def truncate(self, offset: int) -> tuple[str, ...]:
        """Truncate to `offset`; a batch holding it goes whole. Returns the removed spans."""
        kept = [b for b in self.batches if b.last_offset < offset]
        removed = self.batches[len(kept) :]
        self.leo = min(offset, removed[0].base_offset) if removed else min(offset, self.leo)
        self.batches = kept
        # The epoch cache forgets epochs that start at or past the new end (truncateFromEnd).
        self.epochs = [(e, s) for e, s in self.epochs if s < self.leo]
        return _spans(removed)

    def record(self, *, target: int, **round_fields: Any) -> None:
        """Truncate to `target` and note the round that led there."""
        removed = self.truncate(target)
        asked = round_fields.get("asked_epoch")
        kept = () if removed else _spans([b for b in self.batches if b.leader_epoch == asked])
        self.rounds.append(Round(truncated_to=self.leo, kept=kept, removed=removed, **round_fields))


def truncate_follower(
    leader: Lineage,
    follower: Lineage,
    protocol: Protocol,
    *,
    differs: Callable[[int], int | None] | None = None,
) -> TruncationResult:
    """Run `protocol` between two replicas: where the follower truncates, in which rounds,
    and what its log looks like once it has fetched from the leader again.

    `differs(end)`: where the follower's own log first differs from the leader's below
    `end`, by a rule other than byte for byte (a compacted partition, whose replicas'
    cleaners rewrite each copy on its own schedule). Without it the final logs are compared
    batch by batch."""
    f = _Follower(
        list(follower.batches),
        follower.leo,
        follower.epoch_cache(),
        follower.high_watermark,
        follower.log_start_offset or 0,
    )
    leader_epochs = leader.epoch_cache()
    if protocol is Protocol.HIGH_WATERMARK or f.latest_epoch is None:
        # Before KIP-101, and after it for a follower with no epochs to ask about (its log is
        # empty or pre-v2: KIP-101 "Compatibility"), the high watermark decides.
        target, how = f.hw_target()
        f.record(
            request="high-watermark",
            rules=protocol.rules,
            answer_offset=target,
            target=min(target, f.leo),
            fallback=how if follower.high_watermark is None else "",
        )
    elif protocol is Protocol.KIP_101:
        _kip101(f, leader_epochs, leader.leo, protocol)
    elif protocol is Protocol.KIP_279:
        _kip279(f, leader_epochs, leader.leo, protocol)
    else:
        _diverging_epoch(f, leader_epochs, leader.leo, protocol)
    truncated = list(f.batches)
    truncation_offset = f.leo
    fetches, stuck = _catch_up(f, leader)
    if stuck:
        outcome, diverged_at = Fate.STUCK, None
    elif differs is None:
        diverged_at = first_divergence(f.batches, leader.batches)
    else:
        # What the follower fetched is the leader's own; what it kept of its own log is
        # judged by `differs`, up to where it ends.
        own = {id(b) for b in follower.batches}
        kept = [b for b in f.batches if id(b) in own]
        diverged_at = differs(kept[-1].last_offset + 1) if kept else None
    if not stuck:
        outcome = Fate.CONSISTENT if diverged_at is None else Fate.DIVERGED
    return TruncationResult(
        protocol, truncation_offset, f.rounds, truncated, fetches, f.batches, outcome, diverged_at
    )


def _kip101(f: _Follower, leader_epochs: EpochStarts, leader_leo: int, protocol: Protocol) -> None:
    asked = f.latest_epoch
    assert asked is not None
    answer = end_offset_kip101(leader_epochs, leader_leo, asked)
    if answer is None:
        # KIP-101 step 4.3: no LastOffset from the leader, so back to the high watermark.
        target, how = f.hw_target()
        f.record(
            request="offsets-for-leader-epoch",
            rules=protocol.rules,
            asked_epoch=asked,
            target=min(target, f.leo),
            fallback=how,
        )
        return
    # KIP-101 step 4.5: truncate to the leader's LastOffset (no-op when it is past our end).
    f.record(
        request="offsets-for-leader-epoch",
        rules=protocol.rules,
        asked_epoch=asked,
        answer_offset=answer,
        target=min(answer, f.leo),
    )


def _kip279(f: _Follower, leader_epochs: EpochStarts, leader_leo: int, protocol: Protocol) -> None:
    asked = f.latest_epoch
    for _ in range(len(f.epochs) + 1):
        assert asked is not None
        answer = end_offset_kip279(leader_epochs, leader_leo, asked)
        if answer is None:
            # KIP-279 "backward compatibility": UNKNOWN_OFFSET_FOR_LEADER_EPOCH sends the
            # follower back to its high watermark (scenario 3, second round).
            target, how = f.hw_target()
            f.record(
                request="offsets-for-leader-epoch",
                rules=protocol.rules,
                asked_epoch=asked,
                target=min(target, f.leo),
                fallback=how,
            )
            return
        epoch, end = answer
        if f.knows(epoch):
            # Step 4: drop every epoch above the leader's (our log now ends where our copy of
            # that epoch ends), then truncate to the leader's end offset if it is smaller.
            f.record(
                request="offsets-for-leader-epoch",
                rules=protocol.rules,
                asked_epoch=asked,
                answer_epoch=epoch,
                answer_offset=end,
                target=min(f.end_of(epoch), end, f.leo),
            )
            return
        smaller = [e for e, _ in f.epochs if e < epoch]
        if not smaller:
            # The KIP does not say what a follower with no epoch below the leader's answer
            # does. It shares no epoch with the leader, so nothing of its log is known to be
            # common: it truncates to its log start. (Kafka 2.0 instead truncates to the
            # leader's offset, AbstractFetcherThread.getOffsetTruncationState.)
            f.record(
                request="offsets-for-leader-epoch",
                rules=protocol.rules,
                asked_epoch=asked,
                answer_epoch=epoch,
                answer_offset=end,
                target=min(f.log_start, f.leo),
            )
            return
        # Step 3: truncate to the end of our largest epoch below the answer, ask about it.
        previous = smaller[-1]
        f.record(
            request="offsets-for-leader-epoch",
            rules=protocol.rules,
            asked_epoch=asked,
            answer_epoch=epoch,
            answer_offset=end,
            target=min(f.end_of(previous), f.leo),
        )
        asked = previous


def _diverging_epoch(
    f: _Follower, leader_epochs: EpochStarts, leader_leo: int, protocol: Protocol
) -> None:
    for _ in range(len(f.epochs) + 2):
        last_epoch = f.latest_epoch
        if last_epoch is None:
            return  # truncated to before every epoch: nothing left to check
        fetch_offset = f.leo
        answer = end_offset_current(leader_epochs, leader_leo, last_epoch)
        if answer is None:
            # The leader cannot place the epoch (Partition.readRecords throws
            # OffsetOutOfRange); the follower's out-of-range handling truncates to the
            # leader's log end offset when its own log is longer.
            f.record(
                request="fetch",
                rules=protocol.rules,
                asked_epoch=last_epoch,
                fetch_offset=fetch_offset,
                target=min(leader_leo, f.leo),
            )
            return
        epoch, end = answer
        if epoch == last_epoch and end >= fetch_offset:
            return  # no divergence: the leader returns data
        # The follower handles the diverging epoch as an OffsetsForLeaderEpoch answer
        # (AbstractFetcherThread.truncateOnFetchResponse, KIP-279 steps 3-4).
        mine = end_offset_current(f.epochs, f.leo, epoch)
        if mine is None:
            target = min(end, f.leo)
        elif mine[0] != epoch:
            target = min(mine[1], f.leo)
        else:
            target = min(mine[1], end, f.leo)
        before = f.leo
        f.record(
            request="fetch",
            rules=protocol.rules,
            asked_epoch=last_epoch,
            fetch_offset=fetch_offset,
            answer_epoch=epoch,
            answer_offset=end,
            target=target,
        )
        if f.leo >= before and f.latest_epoch == last_epoch:
            return  # no progress possible; the catch-up phase shows what happens next


def _catch_up(f: _Follower, leader: Lineage) -> tuple[list[FetchStep], bool]:
    """Fetch from the leader until caught up or stuck. Returns (steps, stuck)."""
    steps: list[FetchStep] = []
    leader_start = leader.log_start_offset or 0
    offset = f.leo
    if offset < leader_start:
        # OffsetOutOfRange below the leader's log start: the follower empties its log and
        # starts over at the leader's log start offset.
        steps.append(
            FetchStep(
                offset,
                (),
                False,
                f"offset below the leader's log start "
                f"{leader_start}: follower restarts its log there",
            )
        )
        f.batches, f.leo, f.epochs = [], leader_start, []
        offset = leader_start
    index = leader.index_from(offset)
    if index == len(leader.batches):
        if offset > leader.leo:
            # Past the leader's end: out of range, and the follower truncates to the leader's
            # log end offset (the unclean-leader path of handleOutOfRangeError).
            removed = f.truncate(leader.leo)
            steps.append(
                FetchStep(
                    offset,
                    (),
                    False,
                    f"offset beyond the leader's log end "
                    f"offset {leader.leo}: follower truncated "
                    f"{_list_spans(removed)} to it",
                )
            )
        return steps, False
    first = leader.batches[index]
    returned = leader.batches[index:]
    if first.base_offset < offset:
        steps.append(
            FetchStep(
                offset,
                _spans(returned[:1]),
                False,
                f"batch {first.span} starts below the follower's log end offset "
                f"{offset}: out-of-order offsets",
            )
        )
        return steps, True
    f.batches = f.batches + returned
    f.leo = leader.leo
    steps.append(FetchStep(offset, _spans(returned), True, ""))
    return steps, False
