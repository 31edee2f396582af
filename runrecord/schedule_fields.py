"""Checking a schedule file's fields: the error every problem of a schedule ends up in, and
the checks the cluster and step loaders share (runrecord.schedule_cluster,
runrecord.steps).

Loading never stops at the first problem: every bad field is collected (`Problems`) with
its path, ``steps[3].count: must be a positive integer``, and reported at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from runrecord.typed import RunRecordError


class ScheduleError(RunRecordError):
    """A schedule file or object that cannot be used; every problem names its field.

    A run record error (a user error): the CLIs print it as one paragraph, exit code 2."""

    def __init__(self, problems: list[tuple[str, str]], source: str | None = None) -> None:
        self.problems = problems
        self.source = source
        where = f"{source}: " if source else ""
        lines = [
            f"{where}{path}: {message}" if path else f"{where}{message}"
            for path, message in problems
        ]
        head = "bad schedule" + (f" {source}" if source else "")
        super().__init__(lines[0] if len(lines) == 1 else f"{head}:\n  " + "\n  ".join(lines))


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def int_in(low: int, high: int, message: str) -> Callable[[Any], tuple[Any, str | None]]:
    """A field check: an integer from `low` to `high`, else `message`."""

    def check(value: Any) -> tuple[Any, str | None]:
        return (value, None) if is_int(value) and low <= value <= high else (None, message)

    return check


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class Problems:
    """The problems found so far: (field path, message)."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def add(self, path: str, message: str) -> None:
        self.items.append((path, message))


def an_object(value: Any, path: str, problems: Problems) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        problems.add(path, f"must be an object, not {json_type(value)}")
        return None
    return value


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def unknown_fields(
    obj: Mapping[str, Any], known: Iterable[str], path: str, problems: Problems
) -> None:
    known = list(known)
    for key in obj:
        if key not in known:
            problems.add(
                f"{path}.{key}" if path else key,
                f"unknown field (expected one of: {', '.join(known)})",
            )


def positive_int(
    value: Any, path: str, problems: Problems, *, low: int = 1, high: int | None = None
) -> int | None:
    if is_int(value) and value >= low and (high is None or value <= high):
        return value
    bound = (
        f" from {low} to {high}"
        if high is not None
        else (" (positive)" if low == 1 else f" of at least {low}")
    )
    problems.add(path, f"must be an integer{bound}")
    return None
