"""A schedule's `expect`: what it should show on the brokers, per release range and mode.

A schedule written to reproduce a known bug (docs/schedules/, docs/findings/) declares it,
so that `logfork replay` judges it as `logfork run` judges a scenario: "reproduced" only
when the brokers show exactly the declared symptom, "consistent" where the schedule says
the release is fixed. Entries are tried in order; the first whose range and modes hold the
release applies; with none, every invariant must hold (as without `expect`).

    "expect": [
      {"before": "2.0.0", "kind": "diverged", "offset": 11},
      {"kind": "consistent"}
    ]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from runrecord.outcome import (
    CONSISTENT,
    DIVERGED,
    EPOCH_CACHE_LOST,
    FENCED_LEADER,
    FETCH_LOOP,
    HANGING,
    LEFT_BEHIND,
    LOST,
    RECREATED,
    STUCK,
    Symptom,
)
from runrecord.schedule_fields import Problems, is_int, json_type, unknown_fields

# What a schedule's invariants can show (suites/explore/judge.py).
KINDS = (
    CONSISTENT, STUCK, DIVERGED, LOST, FENCED_LEADER, HANGING, RECREATED, FETCH_LOOP,
    EPOCH_CACHE_LOST, LEFT_BEHIND,
)  # fmt: skip
MODES = ("zk", "kraft")
_VERSION = re.compile(r"^\d+(\.\d+){1,3}$")


def version_parts(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("."))


@dataclass(frozen=True)
class Expectation:
    kind: str
    offset: int | None = None
    since: str | None = None  # the first release it applies to
    before: str | None = None  # the first release it no longer applies to
    modes: tuple[str, ...] = ()  # empty: every mode

    def applies(self, release: Sequence[int], mode: str) -> bool:
        parts = tuple(release)
        if self.since is not None and parts < version_parts(self.since):
            return False
        if self.before is not None and parts >= version_parts(self.before):
            return False
        return not self.modes or mode in self.modes

    @property
    def symptom(self) -> Symptom:
        return Symptom(self.kind, self.offset)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in ("since", "before"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.modes:
            out["modes"] = list(self.modes)
        out["kind"] = self.kind
        if self.offset is not None:
            out["offset"] = self.offset
        return out


def expected_symptom(
    expect: Sequence[Expectation], release: Sequence[int], mode: str
) -> Symptom | None:
    """The symptom the schedule declares for this release and mode; None: it declares none
    (the invariants alone judge it)."""
    found = next((e for e in expect if e.applies(release, mode)), None)
    return None if found is None else found.symptom


def fixed_in(expect: Sequence[Expectation]) -> str | None:
    """The release a schedule's expectations say fixed its bug: where the first entry that
    expects one ends (its `before`), when an entry expecting consistency follows it."""
    for i, e in enumerate(expect):
        if e.kind != CONSISTENT:
            later = [x for x in expect[i + 1 :] if x.kind == CONSISTENT]
            return e.before if later else None
    return None


def never_fixed(expect: Sequence[Expectation], mode: str) -> str | None:
    """Why the expectations declare the bug on every release from some on in `mode` (an
    entry with no `before` that expects one, the first to apply there), or None."""
    newest = next(
        (e for e in expect if e.before is None and (not e.modes or mode in e.modes)), None
    )
    if newest is None or newest.kind == CONSISTENT:
        return None
    since = f" from {newest.since}" if newest.since else ""
    return f"its expect names {newest.kind} on every release{since} in {mode} mode"


def load_expect(raw: Any, problems: Problems) -> tuple[Expectation, ...]:
    if not isinstance(raw, list):
        problems.add("expect", f"must be a list, not {json_type(raw)}")
        return ()
    out = []
    for i, item in enumerate(raw):
        path = f"expect[{i}]"
        if not isinstance(item, dict):
            problems.add(path, f"must be an object, not {json_type(item)}")
            continue
        unknown_fields(item, ("kind", "offset", "since", "before", "modes"), path, problems)
        kind = item.get("kind")
        if kind not in KINDS:
            problems.add(f"{path}.kind", f"must be one of {', '.join(KINDS)}")
            continue
        offset = item.get("offset")
        if offset is not None and not (is_int(offset) and offset >= 0):
            problems.add(f"{path}.offset", "must be a non-negative integer")
            offset = None
        bounds = {}
        for key in ("since", "before"):
            value = item.get(key)
            if value is not None and not (isinstance(value, str) and _VERSION.match(value)):
                problems.add(f"{path}.{key}", 'must be a release such as "2.0.0"')
                value = None
            bounds[key] = value
        modes = item.get("modes", [])
        if not isinstance(modes, list) or any(m not in MODES for m in modes):
            problems.add(f"{path}.modes", 'must be a list of "zk" and "kraft"')
            modes = []
        out.append(Expectation(kind, offset, bounds["since"], bounds["before"], tuple(modes)))
    return tuple(out)
