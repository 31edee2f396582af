"""A broker's log dirs in its own view (DescribeLogDirs, KIP-113): online or offline, and
which replicas each holds, current or being moved in."""

from __future__ import annotations

from collections.abc import Callable

from basics.errors import NotReached
from fixtures.config import EXTERNAL_PORT
from fixtures.nodes import Node
from fixtures.waiting import WaitTimeout, wait_until
from observe import wire

ONLINE, OFFLINE = "NONE", "KAFKA_STORAGE_ERROR"


def log_dir_states(node: Node) -> dict[str, wire.LogDirState]:
    """By the path the broker's process sees (`fixtures.config.log_dir_path`)."""
    with wire.Connection("127.0.0.1", node.published[EXTERNAL_PORT]) as conn:
        return {d.path: d for d in conn.describe_log_dirs()}


def seen_state(node: Node, path: str) -> wire.LogDirState | str:
    """The dir's state, or what was seen instead (no answer, not listed): for waits."""
    try:
        state = log_dir_states(node).get(path)
    except (OSError, wire.ProtocolError) as exc:
        return f"no answer: {exc}"
    return "not listed" if state is None else state


def await_log_dir(
    node: Node,
    path: str,
    done: Callable[[wire.LogDirState], bool],
    what: str,
    timeout: float = 30.0,
) -> None:
    """Until the broker's view of its dir `path` is `done`; NotReached, with what was seen
    last, when it never is."""
    try:
        wait_until(
            lambda: seen_state(node, path),
            lambda s: not isinstance(s, str) and done(s),
            what=f"{path}: {what}",
            timeout=timeout,
        )
    except WaitTimeout as exc:
        raise NotReached(f"{node.name}'s {path}: {what}", exc.last) from None
