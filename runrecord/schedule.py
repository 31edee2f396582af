"""Schedules: a fault schedule as data, its JSON file format, loader and writer.

A schedule is what `logfork replay` runs and `logfork explore` draws, simulates and shrinks:
a format version, the cluster shape (runrecord.schedule_cluster), a seed, and a list of
steps (runrecord.steps, a module per family of step kinds). The file format is documented
in docs/schedules.md; its `format` field is the schedule's own version, as `schema` is a
run directory file's.

Loading never stops at the first problem: every bad field is reported with its path
(``steps[3].count: must be a positive integer``) and the file it came from, in one
`ScheduleError` (a run record error: the CLIs print it as one paragraph).

A schedule and its cluster can be imported from here; a step kind from its family's module.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from runrecord.schedule_cluster import (
    DEFAULT_CHECKPOINT_MS,
    DEFAULT_LAG_MS,
    DEFAULT_SESSION_MS,
    MAX_BROKERS,
    MODES,
    BrokerConfig,
    Cluster,
    TopicConfig,
    cluster_to_dict,
    load_cluster,
    session_key,
)
from runrecord.schedule_expect import Expectation, load_expect
from runrecord.schedule_fields import (
    Problems,
    ScheduleError,
    is_int,
    json_type,
    unknown_fields,
)
from runrecord.schedule_load import load_step
from runrecord.steps.base import Step, step_to_dict
from runrecord.typed import write_text

__all__ = [
    "DEFAULT_CHECKPOINT_MS",
    "DEFAULT_LAG_MS",
    "DEFAULT_SESSION_MS",
    "FORMAT",
    "MAX_BROKERS",
    "MODES",
    "BrokerConfig",
    "Cluster",
    "Schedule",
    "ScheduleError",
    "TopicConfig",
    "cluster_to_dict",
    "dumps",
    "load_schedule",
    "loads",
    "parse_schedule",
    "session_key",
    "to_dict",
    "validate",
    "write_schedule",
]

FORMAT = 1  # the version this logfork reads and writes


@dataclass(frozen=True)
class Schedule:
    cluster: Cluster
    seed: int = 0
    steps: tuple[Step, ...] = ()
    origin: dict[str, Any] = field(default_factory=dict)  # provenance, free-form scalars
    # What the brokers should show, per release range (runrecord.schedule_expect).
    expect: tuple[Expectation, ...] = ()

    def with_steps(self, steps: Iterable[Step]) -> Schedule:
        return replace(self, steps=tuple(steps))

    def describe(self) -> list[str]:
        return [f"{i}: {s.describe()}" for i, s in enumerate(self.steps)]


# --------------------------------------------------------------------------------------
# Loading


def parse_schedule(data: Any, source: str | None = None) -> Schedule:
    """A Schedule from the decoded JSON of a schedule file; ScheduleError names every bad
    field."""
    problems = Problems()
    if not isinstance(data, dict):
        raise ScheduleError([("", f"a schedule is a JSON object, not {json_type(data)}")], source)
    version = data.get("format")
    if version is None:
        raise ScheduleError([("format", f"missing (this logfork reads format {FORMAT})")], source)
    if version != FORMAT or not is_int(version):
        raise ScheduleError(
            [
                (
                    "format",
                    f"unknown format version {version!r}: this logfork reads version {FORMAT} "
                    "only (a newer logfork wrote this file?)",
                )
            ],
            source,
        )
    unknown_fields(data, ("format", "seed", "cluster", "steps", "origin", "expect"), "", problems)
    seed = data.get("seed", 0)
    if not (is_int(seed) and seed >= 0):
        problems.add("seed", "must be a non-negative integer")
        seed = 0
    if "cluster" not in data:
        problems.add("cluster", "missing")
        cluster = None
    else:
        cluster = load_cluster(data["cluster"], problems)
    steps: list[Step] = []
    raw_steps = data.get("steps")
    if raw_steps is None:
        problems.add("steps", "missing")
    elif not isinstance(raw_steps, list):
        problems.add("steps", f"must be a list, not {json_type(raw_steps)}")
    else:
        for i, raw in enumerate(raw_steps):
            step = load_step(raw, f"steps[{i}]", problems, cluster)
            if step is not None:
                steps.append(step)
    origin = data.get("origin", {})
    if not isinstance(origin, dict) or not all(
        isinstance(v, str | int | float | bool) or v is None for v in origin.values()
    ):
        problems.add("origin", "must be an object of plain values (strings, numbers)")
        origin = {}
    expect = load_expect(data["expect"], problems) if "expect" in data else ()
    if problems.items or cluster is None:
        raise ScheduleError(problems.items or [("cluster", "invalid")], source)
    return Schedule(cluster, seed, tuple(steps), dict(origin), expect)


def load_schedule(path: Path | str) -> Schedule:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ScheduleError(
            [("", f"cannot read the file: {exc.strerror or exc}")], str(path)
        ) from None
    return loads(text, str(path))


def loads(text: str, source: str | None = None) -> Schedule:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScheduleError(
            [("", f"not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}")], source
        ) from None
    return parse_schedule(data, source)


def validate(schedule: Schedule) -> Schedule:
    """Check a Schedule built in code by writing and reading it back."""
    return parse_schedule(to_dict(schedule))


# --------------------------------------------------------------------------------------
# Writing


def to_dict(schedule: Schedule) -> dict[str, Any]:
    out: dict[str, Any] = {
        "format": FORMAT,
        "seed": schedule.seed,
        "cluster": cluster_to_dict(schedule.cluster),
        "steps": [step_to_dict(s) for s in schedule.steps],
    }
    if schedule.origin:
        out["origin"] = dict(schedule.origin)
    if schedule.expect:
        out["expect"] = [e.to_dict() for e in schedule.expect]
    return out


def _one_line(value: Any) -> str:
    return json.dumps(value, separators=(", ", ": "))


def dumps(schedule: Schedule) -> str:
    """Stable, pretty JSON: one line per cluster field and per step, so that two schedules
    diff step by step and a file can be pasted into an issue."""
    data = to_dict(schedule)
    lines = ["{", f'  "format": {data["format"]},', f'  "seed": {data["seed"]},', '  "cluster": {']
    cluster = data["cluster"]
    items = [f"    {json.dumps(k)}: {_one_line(v)}" for k, v in cluster.items()]
    lines.append(",\n".join(items))
    lines.append("  },")
    steps = data["steps"]
    extra = [k for k in ("origin", "expect") if k in data]
    tail = "," if extra else ""
    if steps:
        lines.append('  "steps": [')
        lines.append(",\n".join(f"    {_one_line(s)}" for s in steps))
        lines.append(f"  ]{tail}")
    else:
        lines.append(f'  "steps": []{tail}')
    for i, key in enumerate(extra):
        comma = "," if i < len(extra) - 1 else ""
        lines.append(f'  "{key}": {_one_line(data[key])}{comma}')
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_schedule(path: Path | str, schedule: Schedule) -> Path:
    """Write a schedule file atomically, as every run record is written."""
    return write_text(Path(path), dumps(schedule))
