"""A run's timeline for the report: its events and observed states as plain data for the
templates and charts, numbered fault marks, and the rows that line events up with the
partition state in effect.

Events and states come typed from the run record (`runrecord.events.Event`,
`runrecord.states.StateRecord`); this module only lays them out.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from typing import Any

from runrecord.events import Event, EventKind
from runrecord.states import StateRecord
from runrecord.typed import to_json

FAULT_KINDS = (EventKind.FAULT, EventKind.HEAL, EventKind.ELECTION)
PLAIN_FIELDS = ("kind", "name", "wall", "mono")


def utc(seconds: float | None) -> str:
    if seconds is None:
        return ""
    stamp = dt.datetime.fromtimestamp(seconds, tz=dt.UTC)
    return stamp.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def rel(seconds: float | None, start: float | None) -> str:
    if seconds is None or start is None:
        return ""
    return f"{seconds - start:+.2f} s"


def event_dict(event: Event) -> dict[str, Any]:
    """An event as one flat mapping: kind, name, times, its typed fields that are set, and
    its data (the timeline.jsonl line, without the nulls)."""
    flat = {k: v for k, v in to_json(event).items() if k != "data" and v is not None}
    return {**flat, **event.data}


def state_dict(state: StateRecord) -> dict[str, Any]:
    return to_json(state)


def _elr(state: StateRecord) -> str:
    """KIP-966's eligible leader replicas, where the controller recorded any."""
    if not (state.elr or state.last_known_elr):
        return ""
    return f" elr {state.elr} last-known-elr {state.last_known_elr}"


def event_text(event: dict[str, Any]) -> str:
    """`name key=value ...` for the fields of a timeline event beyond its kind and times."""
    parts = [str(event.get("name", ""))]
    for key, value in event.items():
        if key in PLAIN_FIELDS or key == "lines":
            continue
        if isinstance(value, dict | list):
            value = json.dumps(value, separators=(",", ":"), default=str)
        parts.append(f"{key}={value}")
    return " ".join(p for p in parts if p)


def describe_event(event: dict[str, Any]) -> str:
    """A fault, heal or election in a few words; other events as `event_text`."""
    kind, name = event.get("kind"), str(event.get("name", ""))
    if kind == EventKind.ELECTION and event.get("leader") is not None:
        return f"{name} election: broker {event['leader']} became leader" + (
            f" in epoch {event['epoch']}" if event.get("epoch") is not None else ""
        )
    if kind in (EventKind.FAULT, EventKind.HEAL):
        if event.get("cut") is not None:
            return f"{name} {event['cut']}"
        if event.get("node") is not None and name == "power-loss":
            return f"{name} {event['node']}: {power_loss_text(event)}"
        if event.get("node") is not None:
            signal = f" ({event['signal']})" if event.get("signal") else ""
            return f"{name} {event['node']}{signal}"
        if event.get("broker") is not None:
            return f"{name} broker {event['broker']}"
    return event_text(event)


def power_loss_text(event: dict[str, Any], most: int = 6) -> str:
    """What a power loss dropped, by its model: per partition the log end before and after;
    under a filesystem model, per file the byte ranges lost (or the file itself) and each
    create, rename or unlink undone."""
    model = event.get("model") or "cut"
    ends = "; ".join(f"{tp} {a} -> {b}" for tp, (a, b) in (event.get("losses") or {}).items())
    parts = [f"{model}" + (f", seed {event['seed']}" if event.get("seed") is not None else "")]
    if ends:
        parts.append(f"log ends {ends}")
    lost: list[str] = []
    for disk in event.get("dropped") or []:
        for f in disk.get("files", []):
            if not f.get("survives", True):
                lost.append(f"{f['path']} as last written: gone")
            elif f.get("dropped"):
                ranges = ", ".join(f"{a}-{b}" for a, b in f["dropped"])
                lost.append(f"{f['path']} bytes {ranges}")
        for n in disk.get("namespace", []):
            lost.append(f"{n['op']} {n['path']}" + (f" -> {n['to']}" if n.get("to") else "")
                        + " undone")  # fmt: skip
    if lost:
        more = f" (+{len(lost) - most} more)" if len(lost) > most else ""
        parts.append("; ".join(lost[:most]) + more)
    return ": ".join(parts)


def short_label(event: dict[str, Any]) -> str:
    name = str(event.get("name", ""))
    if event.get("cut") is not None:
        return f"{name} {event['cut']}"
    if event.get("kind") == EventKind.ELECTION and event.get("leader") is not None:
        epoch = f" e{event['epoch']}" if event.get("epoch") is not None else ""
        return f"{name} → {event['leader']}{epoch}"
    node = event.get("node") if event.get("node") is not None else event.get("broker")
    return f"{name} {node}" if node is not None else name


def event_marks(events: Sequence[dict[str, Any]], start: float | None) -> list[dict[str, Any]]:
    """Faults, heals and elections in time order, numbered: the timeline chart labels its
    markers with these numbers and the timeline table shows them beside each event."""
    found = [(i, e) for i, e in enumerate(events) if e["kind"] in FAULT_KINDS]
    found.sort(key=lambda item: (item[1]["wall"], item[0]))
    return [
        {
            "n": n,
            "index": i,
            "wall": e["wall"],
            "rel": rel(e["wall"], start),
            "kind": e["kind"],
            "short": short_label(e),
        }
        for n, (i, e) in enumerate(found, start=1)
    ]


def aligned_rows(
    events: Sequence[dict[str, Any]],
    states: Iterable[StateRecord],
    focus: tuple[str, int] | None,
    start: float | None,
) -> list[dict[str, Any]]:
    """Timeline events and observed states in time order; each row also shows the state of
    the focus partition in effect at that moment."""
    numbers = {m["index"]: m["n"] for m in event_marks(events, start)}
    observed = [s for s in states if s.source not in ("timeline", "metadata-log")]
    rows: list[dict[str, Any]] = []
    for i, e in enumerate(events):
        if observed and e["kind"] == EventKind.STATE:
            continue  # the same observation is in states.jsonl, with its version
        lines = e.get("lines")
        rows.append(
            {
                "wall": e["wall"],
                "kind": str(e["kind"]),
                "n": numbers.get(i),
                "text": event_text(e),
                "lines": [str(x) for x in lines] if isinstance(lines, list) else [],
            }
        )
    for s in observed:
        if s.wall is None:
            continue
        rows.append(
            {
                "wall": s.wall,
                "kind": "state",
                "text": f"{s.topic}-{s.partition}: leader {s.leader} epoch {s.leader_epoch} "
                f"isr {s.isr}{_elr(s)} {s.recovery_state} (v{s.version}, {s.source})",
                "lines": [],
                "n": None,
                "state": s,
            }
        )
    rows.sort(key=lambda r: (r["wall"], r["kind"] != "state"))
    current: StateRecord | None = None
    for row in rows:
        state = row.pop("state", None)
        if state is not None and focus is not None and (state.topic, state.partition) == focus:
            current = state
        row["rel"] = rel(row["wall"], start)
        row["utc"] = utc(row["wall"])
        row["leader"] = None if current is None else current.leader
        row["epoch"] = None if current is None else current.leader_epoch
        row["isr"] = None if current is None else current.isr
        row["recovery"] = None if current is None else str(current.recovery_state)
    return rows
