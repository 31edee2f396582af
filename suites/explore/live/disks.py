"""The JBOD steps of a schedule: a replica moved between its broker's log dirs, and the log
dir holding one failing under its running broker. Each checks its precondition first and
is skipped, saying what it saw, where the precondition does not hold."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from basics.errors import NotReached
from checkers.checkpoints import LEADER_EPOCH_CHECKPOINT, read_leader_epoch_checkpoint
from checkers.errors import LogReadError
from faults import disk, moves, network
from fixtures.cluster import Cluster
from fixtures.config import log_dir_path
from fixtures.nodes import Node
from fixtures.waiting import Aborted, WaitTimeout, wait_until
from observe.log_dirs import log_dir_states
from observe.state import PartitionState
from runrecord import schedule_roles as roles
from runrecord.schedule_roles import View
from runrecord.steps.base import QUORUM, Target
from runrecord.steps.disks import FailDir, MoveDir
from suites.explore.live.quorum import majority_up
from suites.explore.live.registry import action


@dataclass(frozen=True)
class FailedDir:
    """A broker's log dir that a fail-dir step took away, and the schedule topic's replicas
    it held then."""

    index: int
    held: frozenset[tuple[str, int]]


class Runner(Protocol):
    """What of a schedule's runner (`suites.explore.live.context`) these steps use."""

    cluster: Cluster
    topic: str
    failed_dirs: dict[int, FailedDir]
    recreated: dict[int, str]
    exited: dict[int, str]
    epochs_lost: dict[int, str]
    dir_throttled: set[int]
    voter_cuts: dict[str, network.LinkCut]

    def view(self) -> View: ...
    def state(self) -> PartitionState: ...
    def node(self, broker: int) -> Node: ...
    def _running(self, b: Any) -> str | None: ...
    def linked(self, a: Any, b: Any) -> bool: ...


def _target(run: Runner, target: Target, failing: bool, what: str) -> int:
    view = run.view()
    up = majority_up(run.cluster, run.voter_cuts)

    def cannot(b: int) -> str | None:
        quorum = up and run.linked(b, QUORUM)
        return roles.cannot_use_log_dir(b, view, run._running(b), failing=failing, quorum=quorum)

    return roles.pick(target, view, cannot, what)


@action(MoveDir)
def move(run: Runner, step: MoveDir) -> tuple[dict[str, Any], float]:
    """The replica into its broker's other log dir: swapped in, or (throttled) on its way.
    A swap must keep every leader epoch the replica cached (noted where it does not)."""
    b = _target(run, step.target, False, "move the replica of")
    node = run.node(b)
    held = holding_dir(run, b)
    to = 1 - held
    before = _epoch_cache(run, b, held)
    if step.throttle:
        moves.throttle_dir_moves(run.cluster, node, moves.IN_FLIGHT_RATE)
        run.dir_throttled.add(b)
    elif b in run.dir_throttled:
        # The cap is the broker's: an earlier throttled move would slow this one too.
        moves.throttle_dir_moves(run.cluster, node, None)
        run.dir_throttled.discard(b)
    moves.move_to_dir(run.cluster, node, run.topic, 0, to)
    if not step.throttle:
        moves.await_moved(run.cluster, node, run.topic, 0, to)
    future = (run.topic, 0) in log_dir_states(node)[log_dir_path(to)].future
    targets: dict[str, Any] = {"broker": b, "to": log_dir_path(to), "in_flight": future}
    if not future:
        after = _epoch_cache(run, b, to)
        lost = sorted({e for e, _ in before} - {e for e, _ in after})
        if lost:
            # KAFKA-20961: the future log rebuilds its cache from the batches it copied,
            # and epochs that hold none (a leader elected that wrote nothing) are gone.
            run.epochs_lost.setdefault(
                b,
                f"broker {b}'s replica of {run.topic}-0, swapped in from "
                f"{log_dir_path(held)} to {log_dir_path(to)}, lost leader epoch(s) {lost} of "
                f"its cache: {before} before the move, {after} after",
            )
            targets["epochs_lost"] = lost
    return targets, 0.0


def _epoch_cache(run: Runner, b: int, index: int) -> list[tuple[int, int]]:
    """The broker's leader-epoch-checkpoint for the partition in its log dir `index`, as the
    host reads it (written before the broker serves what it records: LeaderEpochFileCache)."""
    path = run.node(b).log_dirs[index] / f"{run.topic}-0" / LEADER_EPOCH_CHECKPOINT
    if not path.is_file():
        return []  # nothing cached yet
    try:
        return read_leader_epoch_checkpoint(path)
    except LogReadError as exc:
        raise NotReached(f"broker {b}'s leader-epoch-checkpoint of {run.topic}-0", exc) from None


@action(FailDir)
def fail(run: Runner, step: FailDir) -> tuple[dict[str, Any], float]:
    """The dir holding the replica fails; proven by the broker's own view, then by the
    controller's reaction, or by the replica re-created in another dir (the finding)."""
    b = _target(run, step.target, True, "fail the log dir of")
    node = run.node(b)
    index, moved = holding_dir(run, b), False
    if run.cluster.mode == "kraft" and index == 0:
        # The first log dir holds the broker's metadata log, whose loss stops the broker
        # (KIP-858): the replica moves to the second first, a no-op for the schedule.
        moves.move_to_dir(run.cluster, node, run.topic, 0, 1)
        moves.await_moved(run.cluster, node, run.topic, 0, 1)
        index, moved = 1, True
    before = run.state()
    held = log_dir_states(node)[log_dir_path(index)].partitions
    disk.fail_log_dir(run.cluster, node, index)
    run.failed_dirs[b] = FailedDir(index, frozenset(tp for tp in held if tp[0] == run.topic))

    def reacted(seen: tuple[PartitionState, bool]) -> bool:
        # The ISR keeps its last member when nobody can replace it (leader -1).
        state, recreated = seen
        return recreated or (state.leader != b and (b not in state.isr or state.leader < 0))

    try:
        wait_until(
            lambda: (run.state(), note_recreated(run, b)),
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
    if b in run.recreated:
        targets["recreated"] = run.recreated[b]
    return targets, 0.0


def note_recreated(run: Runner, b: int) -> bool:
    """Whether one of the replicas of the broker's offline dir (of the schedule's topic:
    the background partitions' too) has a partition dir in one of its online log dirs, as
    the host reads them. KIP-112 creates replicas on a good dir only while no dir is bad
    (KAFKA-16234). The disk, not DescribeLogDirs: 3.7.0 re-creates logs that it then fails
    to serve, and lists no such log. Noted once, in words."""
    failed = run.failed_dirs[b]
    dirs = run.node(b).log_dirs
    found = sorted(
        (f"{topic}-{p}", log_dir_path(i))
        for i, root in enumerate(dirs)
        if i != failed.index
        for topic, p in failed.held
        if (root / f"{topic}-{p}").is_dir()
    )
    if found and b not in run.recreated:
        names = ", ".join(name for name, _ in found)
        run.recreated[b] = (
            f"broker {b} re-created its replica(s) of {names} in {found[0][1]} while "
            f"{log_dir_path(failed.index)}, which held them, was offline"
        )
    return bool(found)


def restart(run: Runner, b: int, start: Callable[[], None]) -> None:
    """`start` the stopped broker; a broker stopped by a failed dir gets its disk back
    first, and proves the dir online after."""
    failed = run.failed_dirs.get(b)
    if failed is not None:
        note_recreated(run, b)  # the last look while the dir is offline
        del run.failed_dirs[b]
        disk.reattach_log_dir(run.cluster, run.node(b), failed.index)
    try:
        start()
    except (Aborted, WaitTimeout, NotReached) as exc:
        if b not in run.recreated or run.node(b).status() == "running":
            raise
        # A broker that re-created its replica elsewhere may refuse to start with two
        # copies (3.7.0, KAFKA-16234): the finding's doing, noted as the heal notes it.
        run.exited[b] = f"{exc}"[:300] + "\n" + run.node(b).tail_log()
        return
    if failed is not None:
        disk.await_online(run.cluster, run.node(b), failed.index)


def holding_dir(run: Runner, b: int) -> int:
    """Which of the broker's log dirs holds its replica of the partition."""
    node = run.node(b)
    paths = [log_dir_path(i) for i in range(len(node.log_dirs))]
    held = [p for p, s in log_dir_states(node).items() if (run.topic, 0) in s.partitions]
    if len(held) != 1 or held[0] not in paths:
        raise NotReached(f"broker {b}'s replica of {run.topic}-0 in one log dir", held)
    return paths.index(held[0])
