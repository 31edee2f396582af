"""The passes of the shrinker (`suites.explore.shrink`): each takes the current schedule and
returns a smaller one that still fails, or None. A pass proposes candidates in order and asks
the shrinker which is the first that fails, confirmed (`Trier.first`, `Trier.check`); the
shrinker decides how they are run (one at a time, or several at once)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any, Protocol

from runrecord.schedule import Cluster, Schedule
from runrecord.steps.base import QUORUM, Role, Step, step_targets
from runrecord.steps.disks import MoveDir
from runrecord.steps.links import Heal
from runrecord.steps.processes import Kill, PowerLoss
from runrecord.steps.reassign import Reassign
from runrecord.steps.txn import TxnEnd, TxnWrite
from runrecord.steps.waits import Wait
from runrecord.steps.writes import Produce


class Trier(Protocol):
    def check(self, candidate: Schedule, change: str) -> bool: ...

    def first(self, candidates: Iterable[tuple[Schedule, str]]) -> tuple[int, Schedule] | None: ...


# Simpler first: the roles a replay resolves most predictably, then broker ids.
ROLE_ORDER: tuple[Any, ...] = (
    Role.LEADER,
    Role.FOLLOWER_IN_ISR,
    Role.OUT_OF_SYNC,
    Role.ANY_BROKER,
    Role.CONTROLLER,
)


def _first_failing(
    current: Schedule, s: Trier, candidates: Iterator[tuple[Schedule, str]]
) -> Schedule | None:
    found = s.first(candidates)
    return found[1] if found is not None else None


def _drop(current: Schedule, s: Trier) -> Schedule | None:
    """Remove chunks of steps: halves, then quarters, down to single steps (delta
    debugging's complements). After a chunk goes, the next chunk starts where it was."""
    improved = None
    size = max(1, len(current.steps) // 2)
    while current.steps and size >= 1:
        start = 0
        while start < len(current.steps):
            found = s.first(_chunks(current, start, size))
            if found is None:
                break
            # The chunk at start + k * size went; those before it stay, and the next chunk
            # starts where it was.
            k, current = found
            improved = current
            start += k * size
        size //= 2
    return improved


def _chunks(current: Schedule, start: int, size: int) -> Iterator[tuple[Schedule, str]]:
    """`current` without the chunk of `size` steps at start, start + size, ..."""
    steps = list(current.steps)
    for at in range(start, len(steps), size):
        end = min(at + size, len(steps)) - 1
        what = f"drop step {at}" if at == end else f"drop steps {at}-{end}"
        yield current.with_steps(steps[:at] + steps[at + size :]), what


def _drop_pairs(current: Schedule, s: Trier) -> Schedule | None:
    """Remove two steps that are not next to each other: a fault and what it set up for
    (a hold-back and the write it held back) often go only together."""

    def candidates(current: Schedule) -> Iterator[tuple[Schedule, str]]:
        steps = list(current.steps)
        for i in range(len(steps)):
            for j in range(i + 2, len(steps)):
                rest = steps[:i] + steps[i + 1 : j] + steps[j + 1 :]
                yield current.with_steps(rest), f"drop steps {i} and {j}"

    return _repeat(current, s, candidates)


def _merge(current: Schedule, s: Trier) -> Schedule | None:
    def candidates(current: Schedule) -> Iterator[tuple[Schedule, str]]:
        steps = list(current.steps)
        for i in range(len(steps) - 1):
            a, b = steps[i], steps[i + 1]
            if isinstance(a, Heal) and isinstance(b, Heal):
                merged = [*steps[:i], Heal(), *steps[i + 2 :]]
                yield current.with_steps(merged), f"merge the heals at steps {i} and {i + 1}"
            if (
                isinstance(a, Produce)
                and isinstance(b, Produce)
                and (a.acks, a.to) == (b.acks, b.to)
                and not b.filler  # a's filler, if any, still goes first
            ):
                merged = [*steps[:i], replace(a, count=a.count + b.count), *steps[i + 2 :]]
                yield current.with_steps(merged), f"merge the produces at steps {i} and {i + 1}"
        for i, step in enumerate(steps):
            if isinstance(step, Heal) and step.a is not None:
                yield (
                    current.with_steps([*steps[:i], Heal(), *steps[i + 1 :]]),
                    (f"step {i} heals every cut"),
                )

    return _repeat(current, s, candidates)


def _repeat(
    current: Schedule,
    s: Trier,
    make: Callable[[Schedule], Iterator[tuple[Schedule, str]]],
) -> Schedule | None:
    """Apply a pass's first failing candidate, again and again, while one fails."""
    improved = None
    while True:
        found = _first_failing(current, s, make(current))
        if found is None:
            return improved
        current = improved = found


def _smaller(value: int) -> list[int]:
    return sorted({v for v in (1, value // 2, value - 1) if 1 <= v < value})


def _reduce(current: Schedule, s: Trier) -> Schedule | None:
    def candidates(current: Schedule) -> Iterator[tuple[Schedule, str]]:
        steps = list(current.steps)
        for i, step in enumerate(steps):
            options: list[tuple[Step, str]] = []
            if isinstance(step, Produce):
                options = [
                    (replace(step, count=c), f"count {step.count} -> {c}")
                    for c in _smaller(step.count)
                ]
                if step.filler:
                    options.append((replace(step, filler=None), "filler dropped"))
            elif isinstance(step, PowerLoss) and step.lose is not None:
                options = [
                    (replace(step, lose=c), f"lose {step.lose} -> {c}") for c in _smaller(step.lose)
                ]
            elif isinstance(step, MoveDir | Reassign) and step.throttle:
                # Unthrottled, a move is swapped in, a reassignment done, within its step.
                options = [(replace(step, throttle=None), "throttle dropped")]
            elif isinstance(step, TxnWrite) and step.partitions:
                options = [(replace(step, partitions=None), "write to partition 0 only")]
            elif isinstance(step, TxnEnd) and step.held:
                options = [(replace(step, held=None), "EndTxn no longer held")]
            elif isinstance(step, Wait) and step.seconds > 1:
                options = [
                    (replace(step, seconds=v), f"wait {step.seconds:g} -> {v:g} s")
                    for v in sorted({1, step.seconds / 2})
                    if v < step.seconds
                ]
            for new, what in options:
                yield current.with_steps([*steps[:i], new, *steps[i + 1 :]]), f"step {i}: {what}"

    return _repeat(current, s, candidates)


def _simpler_targets(value: Any) -> list[Any]:
    if value == QUORUM or value is None:
        return []
    if isinstance(value, Role):
        return list(ROLE_ORDER[: ROLE_ORDER.index(value)])
    return [*ROLE_ORDER, *range(1, value)]


def _simplify_targets(current: Schedule, s: Trier) -> Schedule | None:
    def candidates(current: Schedule) -> Iterator[tuple[Schedule, str]]:
        steps = list(current.steps)
        for i, step in enumerate(steps):
            for name, value in step_targets(step):
                for simpler in _simpler_targets(value):
                    new = replace(step, **{name: simpler})
                    yield (
                        current.with_steps([*steps[:i], new, *steps[i + 1 :]]),
                        (f"step {i}: {name} {value} -> {simpler}"),
                    )
            if isinstance(step, Kill) and step.signal == "SIGTERM":
                new = replace(step, signal="SIGKILL")
                yield (
                    current.with_steps([*steps[:i], new, *steps[i + 1 :]]),
                    (f"step {i}: SIGTERM -> SIGKILL"),
                )

    return _repeat(current, s, candidates)


def _simplify_cluster(current: Schedule, s: Trier) -> Schedule | None:
    def candidates(current: Schedule) -> Iterator[tuple[Schedule, str]]:
        c = current.cluster
        options: list[tuple[Cluster, str]] = []
        if c.replication_factor == 3:
            topic = replace(
                c.topic_config, min_insync_replicas=min(c.topic_config.min_insync_replicas, 2)
            )
            options.append(
                (
                    replace(c, replication_factor=2, replicas=c.replicas[:2], topic_config=topic),
                    "replication factor 3 -> 2",
                )
            )
        if c.topic_config.min_insync_replicas > 1:
            topic = replace(c.topic_config, min_insync_replicas=1)
            options.append((replace(c, topic_config=topic), "min.insync.replicas -> 1"))
        if c.topic_config.flush_messages is not None:
            topic = replace(c.topic_config, flush_messages=None)
            options.append((replace(c, topic_config=topic), "no flush.messages"))
        if c.node_config:
            options.append((replace(c, node_config={}), "no per-broker overrides"))
        needed = max([*c.replicas, c.controller or 0, *_named_brokers(current)])
        if c.brokers > max(needed, c.replication_factor, 2):
            options.append(
                (replace(c, brokers=c.brokers - 1), f"brokers {c.brokers} -> {c.brokers - 1}")
            )
        for cluster, what in options:
            yield replace(current, cluster=cluster), what

    return _repeat(current, s, candidates)


def _named_brokers(schedule: Schedule) -> list[int]:
    return [
        v
        for step in schedule.steps
        for _, v in step_targets(step)
        if isinstance(v, int) and not isinstance(v, bool)
    ]


# Cheap passes first: the shrinker goes back to the first after any progress.
PASSES: tuple[Callable[[Schedule, Trier], Schedule | None], ...] = (
    _drop,
    _merge,
    _reduce,
    _simplify_targets,
    _simplify_cluster,
    _drop_pairs,
)
