"""The JBOD steps of a schedule: a replica moved between its broker's log dirs, and the log
dir holding one failing under its running broker. Each checks its precondition first and
is skipped, saying what it saw, where the precondition does not hold."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from basics.errors import NotReached
from checkers.checkpoints import LEADER_EPOCH_CHECKPOINT, read_leader_epoch_checkpoint
from checkers.errors import LogReadError
from faults import disk, moves
from fixtures.config import log_dir_path
from fixtures.waiting import Aborted, WaitTimeout, wait_until
from observe.log_dirs import log_dir_states
from observe.state import PartitionState
from runrecord import schedule_roles as roles
from runrecord.steps.base import QUORUM, Target
from runrecord.steps.disks import FailDir, MoveDir
from suites.explore.live.quorum import majority_up
from suites.explore.live.registry import action

if TYPE_CHECKING:
    from suites.explore.live.context import Live


@dataclass(frozen=True)
class FailedDir:
    """A broker's log dir that a fail-dir step took away, and the schedule topic's replicas
    it held then."""

    index: int
    held: frozenset[tuple[str, int]]


def _target(live: Live, target: Target, failing: bool, what: str) -> int:
    view = live.view()
    up = majority_up(live.cluster, live.voter_cuts)

    def cannot(b: int) -> str | None:
        quorum = up and live.linked(b, QUORUM)
        return roles.cannot_use_log_dir(b, view, live.running(b), failing=failing, quorum=quorum)

    return roles.pick(target, view, cannot, what)


@action(MoveDir)
def move(live: Live, step: MoveDir) -> tuple[dict[str, Any], float]:
    """The replica into its broker's other log dir: swapped in, or (throttled) on its way.
    A swap must keep every leader epoch the replica cached (noted where it does not)."""
    b = _target(live, step.target, False, "move the replica of")
    node = live.node(b)
    held = holding_dir(live, b)
    to = 1 - held
    before = _epoch_cache(live, b, held)
    if step.throttle:
        moves.throttle_dir_moves(live.cluster, node, moves.IN_FLIGHT_RATE)
        live.dir_throttled.add(b)
    elif b in live.dir_throttled:
        # The cap is the broker's: an earlier throttled move would slow this one too.
        moves.throttle_dir_moves(live.cluster, node, None)
        live.dir_throttled.discard(b)
    moves.move_to_dir(live.cluster, node, live.topic, 0, to)
    if not step.throttle:
        moves.await_moved(live.cluster, node, live.topic, 0, to)
    future = (live.topic, 0) in log_dir_states(node)[log_dir_path(to)].future
    targets: dict[str, Any] = {"broker": b, "to": log_dir_path(to), "in_flight": future}
    if not future:
        after = _epoch_cache(live, b, to)
        lost = sorted({e for e, _ in before} - {e for e, _ in after})
        if lost:
            # KAFKA-20961: the future log rebuilds its cache from the batches it copied,
            # and epochs that hold none (a leader elected that wrote nothing) are gone.
            live.epochs_lost.setdefault(
                b,
                f"broker {b}'s replica of {live.topic}-0, swapped in from "
                f"{log_dir_path(held)} to {log_dir_path(to)}, lost leader epoch(s) {lost} of "
                f"its cache: {before} before the move, {after} after",
            )
            targets["epochs_lost"] = lost
    return targets, 0.0


def _epoch_cache(live: Live, b: int, index: int) -> list[tuple[int, int]]:
    """The broker's leader-epoch-checkpoint for the partition in its log dir `index`, as the
    host reads it (written before the broker serves what it records: LeaderEpochFileCache)."""
    path = live.node(b).log_dirs[index] / f"{live.topic}-0" / LEADER_EPOCH_CHECKPOINT
    if not path.is_file():
        return []  # nothing cached yet
    try:
        return read_leader_epoch_checkpoint(path)
    except LogReadError as exc:
        raise NotReached(f"broker {b}'s leader-epoch-checkpoint of {live.topic}-0", exc) from None


@action(FailDir)
def fail(live: Live, step: FailDir) -> tuple[dict[str, Any], float]:
    """The dir holding the replica fails; proven by the broker's own view, then by the
    controller's reaction, or by the replica re-created in another dir (the finding)."""
    b = _target(live, step.target, True, "fail the log dir of")
    node = live.node(b)
    index, moved = holding_dir(live, b), False
    if live.cluster.mode == "kraft" and index == 0:
        # The first log dir holds the broker's metadata log, whose loss stops the broker
        # (KIP-858): the replica moves to the second first, a no-op for the schedule.
        moves.move_to_dir(live.cluster, node, live.topic, 0, 1)
        moves.await_moved(live.cluster, node, live.topic, 0, 1)
        index, moved = 1, True
    before = live.state()
    held = log_dir_states(node)[log_dir_path(index)].partitions
    disk.fail_log_dir(live.cluster, node, index)
    live.failed_dirs[b] = FailedDir(index, frozenset(tp for tp in held if tp[0] == live.topic))

    def reacted(seen: tuple[PartitionState, bool]) -> bool:
        # The ISR keeps its last member when nobody can replace it (leader -1).
        state, recreated = seen
        return recreated or (state.leader != b and (b not in state.isr or state.leader < 0))

    try:
        wait_until(
            lambda: (live.state(), note_recreated(live, b)),
            reacted,
            what=f"the controller to take broker {b}'s offline replica out of the ISR",
            timeout=60,
            describe=lambda seen: (
                f"leader {seen[0].leader}, ISR {list(seen[0].isr)} (was {before})"
            ),
        )
    except WaitTimeout as exc:
        raise NotReached(exc.what, str(exc.last)) from None
    targets = {"broker": b, "log_dir": log_dir_path(index), "moved_first": moved}
    if b in live.recreated:
        targets["recreated"] = live.recreated[b]
    return targets, 0.0


def note_recreated(live: Live, b: int) -> bool:
    """Whether one of the replicas of the broker's offline dir (of the schedule's topic:
    the background partitions' too) has a partition dir in one of its online log dirs, as
    the host reads them. KIP-112 creates replicas on a good dir only while no dir is bad
    (KAFKA-16234). The disk, not DescribeLogDirs: 3.7.0 re-creates logs that it then fails
    to serve, and lists no such log. Noted once, in words."""
    failed = live.failed_dirs[b]
    dirs = live.node(b).log_dirs
    found = sorted(
        (f"{topic}-{p}", log_dir_path(i))
        for i, root in enumerate(dirs)
        if i != failed.index
        for topic, p in failed.held
        if (root / f"{topic}-{p}").is_dir()
    )
    if found and b not in live.recreated:
        names = ", ".join(name for name, _ in found)
        live.recreated[b] = (
            f"broker {b} re-created its replica(s) of {names} in {found[0][1]} while "
            f"{log_dir_path(failed.index)}, which held them, was offline"
        )
    return bool(found)


def restart(live: Live, b: int, start: Callable[[], None]) -> None:
    """`start` the stopped broker; a broker stopped by a failed dir gets its disk back
    first, and proves the dir online after."""
    failed = live.failed_dirs.get(b)
    if failed is not None:
        note_recreated(live, b)  # the last look while the dir is offline
        del live.failed_dirs[b]
        disk.reattach_log_dir(live.cluster, live.node(b), failed.index)
    try:
        start()
    except (Aborted, WaitTimeout, NotReached) as exc:
        if b not in live.recreated or live.node(b).status() == "running":
            raise
        # A broker that re-created its replica elsewhere may refuse to start with two
        # copies (3.7.0, KAFKA-16234): the finding's doing, noted as the heal notes it.
        live.exited[b] = f"{exc}"[:300] + "\n" + live.node(b).tail_log()
        return
    if failed is not None:
        disk.await_online(live.cluster, live.node(b), failed.index)


def holding_dir(live: Live, b: int) -> int:
    """Which of the broker's log dirs holds its replica of the partition."""
    node = live.node(b)
    paths = [log_dir_path(i) for i in range(len(node.log_dirs))]
    held = [p for p, s in log_dir_states(node).items() if (live.topic, 0) in s.partitions]
    if len(held) != 1 or held[0] not in paths:
        raise NotReached(f"broker {b}'s replica of {live.topic}-0 in one log dir", held)
    return paths.index(held[0])
