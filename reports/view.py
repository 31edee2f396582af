"""What a report says, worked out from a `RunResult`: plain data for the templates and
charts. Three questions drive it: where the replicas parted (the divergent offset and the
versions there), why the protocol let it happen (the model's rounds), and which fault
caused it (the election that started the divergent epoch, and the faults before it).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from typing import Any

from checkers.metadata_log import METADATA_TOPICS
from checkers.model import Protocol
from reports.judge import DETAILED_UP_TO
from reports.pipeline import PartitionResult, RunResult

OUTCOMES = ("reproduced", "consistent", "diverged", "not-reached", "not-applicable")
DRAW_ALL_UP_TO = DETAILED_UP_TO  # beyond this only diverged or lossy partitions get diagrams
DRAW_AT_MOST = 40
FAULT_KINDS = ("fault", "heal", "election")
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


def protocol_rules(value: str | None) -> str:
    try:
        return Protocol(value).rules if value else ""
    except ValueError:
        return str(value)


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


def _start(run: RunResult) -> float | None:
    doc = run.source.artifacts.run or {}
    started = doc.get("started")
    if isinstance(started, int | float):
        return float(started)
    walls = [e["wall"] for e in run.source.artifacts.timeline if _is_num(e.get("wall"))]
    return min(walls) if walls else None


def _is_num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# --------------------------------------------------------------------------------------
# The verdict banner


def overall(run: RunResult) -> dict[str, Any]:
    """The banner: the scenario's outcome when the run has one, else the checker's."""
    verdict = run.source.artifacts.verdict or {}
    run_doc = run.source.artifacts.run or {}
    diverged = [p for p in run.partitions if p.status == "diverged"]
    lost = sum(p.lost or 0 for p in run.partitions)
    outcome = verdict.get("outcome") or run_doc.get("outcome")
    expected = verdict.get("expected")
    as_expected = verdict.get("as_expected")
    if outcome not in OUTCOMES:
        outcome = (
            "diverged" if diverged else ("unreadable" if run.source.unreadable else "consistent")
        )
        if outcome == "consistent" and lost:
            outcome = "diverged"
        expected, as_expected = None, None
    if as_expected is None and expected in OUTCOMES:
        as_expected = outcome == expected
    if outcome in ("not-reached", "not-applicable"):
        # No verdict either way: the scenario could not create its state, or does not apply.
        as_expected = None
    if outcome == "not-reached":
        expect_line = "no verdict: the scenario did not reach the state it needs"
    elif outcome == "not-applicable":
        expect_line = "the release or mode lacks what the scenario tests"
    elif expected is None:
        expect_line = "checker's verdict on the logs" if run.source.path is None else ""
    elif as_expected:
        expect_line = f"as the KIP says (expected {expected})"
    else:
        expect_line = f"NOT as the KIP says (expected {expected})"
    findings = []
    for p in diverged:
        findings.append(partition_headline(p))
    for p in run.partitions:
        if p.lost:
            findings.append(f"{p.topic}-{p.partition}: {loss_line(p.report.get('loss'))}")
    if not findings and run.partitions:
        n = len([p for p in run.partitions if p.status == "consistent"])
        findings.append(f"all {n} partition(s) consistent: every replica holds the same batches")
    if run.source.unreadable:
        findings.append(f"{len(run.source.unreadable)} input(s) could not be read at all")
    return {
        "outcome": outcome,
        "label": outcome.upper().replace("-", " "),
        "expected": expected,
        "as_expected": as_expected,
        "expect_line": expect_line,
        "summary": verdict.get("summary"),
        "findings": findings,
    }


def loss_line(loss: dict[str, Any] | None) -> str:
    """ "10 of 41 acknowledged write(s) lost (acks=1: 10 of 30)", durable loss first."""
    if not loss:
        return ""
    parts = [
        f"acks={acks}: {c['lost']} of {c['acked']}"
        for acks, c in sorted((loss.get("by_acks") or {}).items())
        if c["lost"]
    ]
    text = f"{loss['lost_count']} of {loss['acked']} acknowledged write(s) lost"
    if parts:
        text += f" ({'; '.join(parts)})"
    if loss.get("durable_lost"):
        text += ": acks=all writes lost, which Kafka promises never to lose"
    elif loss.get("lost_count"):
        text += ", none with acks=all"
    return text


def partition_headline(p: PartitionResult) -> str:
    name = f"{p.topic}-{p.partition}"
    if p.status != "diverged":
        return f"{name}: {p.status}"
    versions = p.report.get("versions") or []
    held = "; ".join(
        f"{v['span']} is epoch {v['leader_epoch']} on broker "
        f"{', '.join(map(str, v['replicas']))}{' (leader)' if v.get('reference') else ''}"
        for v in versions
    )
    hw = p.high_watermark
    where = (
        "high watermark unknown"
        if hw is None
        else (
            f"below the high watermark {hw}: committed data differs"
            if p.below_high_watermark
            else f"at or above the high watermark {hw}"
        )
    )
    text = f"{name}: replicas parted at offset {p.diverged_at} ({where})"
    return f"{text}; {held}" if held else text


# --------------------------------------------------------------------------------------
# Which fault caused it


def _states_for(states: Sequence[dict[str, Any]], topic: str, partition: int) -> list[dict]:
    return sorted(
        (
            s
            for s in states
            if s.get("topic") == topic
            and (s.get("partition") in (partition, None))
            and _is_num(s.get("wall"))
        ),
        key=lambda s: s["wall"],
    )


def _stamp(ms: Any) -> float | None:
    """Seconds from a batch's max timestamp (ms); None when the batch has none."""
    return ms / 1000 if isinstance(ms, int) and ms > 0 else None


def attribution(p: PartitionResult, run: RunResult, start: float | None) -> dict[str, Any] | None:
    """How the replicas came apart, in time order: the last batch they share, then every
    fault, heal and election and every write of a divergent version, until the last of
    those writes. The first fault after the shared batch is what separated them.

    Write times are the batches' producer timestamps; without them, the story runs up to
    the election that started each divergent epoch."""
    if p.status != "diverged":
        return None
    timeline = sorted(
        (e for e in run.source.artifacts.timeline if _is_num(e.get("wall"))),
        key=lambda e: e["wall"],
    )
    states = _states_for(run.states, p.topic, p.partition)
    report = p.report
    common = report.get("common")
    common_at = _stamp(common.get("max_timestamp")) if common else None
    versions = []
    for v in report.get("versions") or []:
        at = _stamp(v.get("max_timestamp"))
        versions.append({**v, "at": at, "rel": rel(at, start), "utc": utc(at)})
    epochs = []
    for v in versions:
        if v.get("reference"):
            continue
        epoch = v["leader_epoch"]
        election = next(
            (
                e
                for e in timeline
                if e.get("kind") == "election"
                and e.get("epoch") == epoch
                and e.get("topic") in (p.topic, None)
            ),
            None,
        )
        state = next((s for s in states if s.get("leader_epoch") == epoch), None)
        if election is not None:
            epochs.append(
                {
                    "epoch": epoch,
                    "at": election["wall"],
                    "rel": rel(election["wall"], start),
                    "text": describe_event(election),
                }
            )
        elif state is not None:
            epochs.append(
                {
                    "epoch": epoch,
                    "at": state["wall"],
                    "rel": rel(state["wall"], start),
                    "text": f"broker {state.get('leader')} became leader in epoch {epoch} "
                    f"(seen in {state.get('source') or 'the state history'})",
                }
            )
    ends = [v["at"] for v in versions if v["at"] is not None] + [e["at"] for e in epochs]
    end = max(ends) if ends else None
    story = []
    if end is not None:
        for e in timeline:
            if e.get("kind") not in FAULT_KINDS or e["wall"] > end:
                continue
            if common_at is not None and e["wall"] < common_at:
                continue
            if e.get("topic") not in (p.topic, None) and e.get("kind") == "election":
                continue
            story.append(
                {
                    "at": e["wall"],
                    "rel": rel(e["wall"], start),
                    "kind": e["kind"],
                    "text": describe_event(e),
                }
            )
        for v in versions:
            if v["at"] is None:
                continue
            whose = ", ".join(map(str, v["replicas"]))
            story.append(
                {
                    "at": v["at"],
                    "rel": v["rel"],
                    "kind": "write",
                    "text": f"{v['span']} written in epoch {v['leader_epoch']}, now held "
                    f"by broker {whose}"
                    + (" (the leader's version)" if v.get("reference") else ""),
                }
            )
        story.sort(key=lambda item: item["at"])
    for item in story:
        item["cause"] = False
    cause = next((item for item in story if item["kind"] == "fault"), None)
    if cause is not None:
        cause["cause"] = True
    return {
        "common": None
        if common is None
        else {**common, "rel": rel(common_at, start), "utc": utc(common_at)},
        "versions": versions,
        "epochs": epochs,
        "story": story,
        "cause": cause,
    }


# --------------------------------------------------------------------------------------
# Partitions


def partition_view(p: PartitionResult, run: RunResult, start: float | None) -> dict[str, Any]:
    verdict = p.verdict or {}
    report = p.report
    replicas = report.get("replicas") or []
    predictions = [
        {"follower": int(f), **v} for f, v in sorted((report.get("predictions") or {}).items())
    ]
    versions = []
    for v in report.get("versions") or []:
        stamp = v.get("max_timestamp")
        when = stamp / 1000 if isinstance(stamp, int) and stamp > 0 else None
        versions.append({**v, "written": utc(when), "written_rel": rel(when, start)})
    return {
        "id": f"{p.topic}-{p.partition}",
        "anchor": "",
        "topic": p.topic,
        "partition": p.partition,
        "status": p.status,
        "headline": partition_headline(p),
        "diverged_at": p.diverged_at,
        "below_high_watermark": p.below_high_watermark,
        "high_watermark": p.high_watermark,
        "leader": p.leader,
        "leader_source": verdict.get("leader_source", ""),
        "replicas": p.replicas,
        "protocol": p.protocol,
        "rules": protocol_rules(p.protocol),
        "versions": versions,
        "lacking": verdict.get("lacking") or [],
        "replica_rows": replicas,
        "log_end_offsets": verdict.get("log_end_offsets") or {},
        "diagram": report.get("diagram"),
        "replays": report.get("replays") or [],
        "predictions": predictions,
        "notes": verdict.get("notes") or [],
        "kraft": run.kraft_state.get((p.topic, p.partition)),
        "loss": report.get("loss"),
        "attribution": attribution(p, run, start),
        "metadata": p.topic in METADATA_TOPICS,
        "draw": False,
    }


def model_notes(run: RunResult, start: float | None) -> list[dict[str, Any]]:
    """What the scenario's own model steps recorded while the run went on."""
    out = []
    for event in run.source.artifacts.timeline:
        if event.get("kind") == "note" and event.get("name") == "model":
            lines = event.get("lines")
            out.append(
                {
                    "rel": rel(event.get("wall") if _is_num(event.get("wall")) else None, start),
                    "protocol": protocol_rules(_str(event.get("protocol"))),
                    "leader": event.get("leader"),
                    "follower": event.get("follower"),
                    "outcome": event.get("outcome"),
                    "lines": [str(x) for x in lines] if isinstance(lines, list) else [],
                }
            )
    return out


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


# --------------------------------------------------------------------------------------
# The timeline, aligned with the partition-state history


def focus_partition(run: RunResult) -> tuple[str, int] | None:
    diverged = [p for p in run.partitions if p.status == "diverged"]
    if diverged:
        return diverged[0].topic, diverged[0].partition
    with_states = [(s["topic"], s.get("partition") or 0) for s in run.states if s.get("topic")]
    if with_states:
        return with_states[0]
    ordinary = [p for p in run.partitions if p.topic not in METADATA_TOPICS]
    return (ordinary[0].topic, ordinary[0].partition) if ordinary else None


def describe_event(event: dict[str, Any]) -> str:
    """A fault, heal or election in a few words; other events as `event_text`."""
    kind, name = event.get("kind"), str(event.get("name", ""))
    if kind == "election" and event.get("leader") is not None:
        return f"{name} election: broker {event['leader']} became leader" + (
            f" in epoch {event['epoch']}" if event.get("epoch") is not None else ""
        )
    if kind in ("fault", "heal"):
        if event.get("cut") is not None:
            return f"{name} {event['cut']}"
        if event.get("node") is not None:
            signal = f" ({event['signal']})" if event.get("signal") else ""
            return f"{name} {event['node']}{signal}"
        if event.get("broker") is not None:
            return f"{name} broker {event['broker']}"
    return event_text(event)


def short_label(event: dict[str, Any]) -> str:
    name = str(event.get("name", ""))
    if event.get("cut") is not None:
        return f"{name} {event['cut']}"
    if event.get("kind") == "election" and event.get("leader") is not None:
        epoch = f" e{event['epoch']}" if event.get("epoch") is not None else ""
        return f"{name} → {event['leader']}{epoch}"
    node = event.get("node") if event.get("node") is not None else event.get("broker")
    return f"{name} {node}" if node is not None else name


def event_marks(run: RunResult, start: float | None) -> list[dict[str, Any]]:
    """Faults, heals and elections in time order, numbered: the timeline chart labels its
    markers with these numbers and the timeline table shows them beside each event."""
    events = [
        (i, e)
        for i, e in enumerate(run.source.artifacts.timeline)
        if e.get("kind") in FAULT_KINDS and _is_num(e.get("wall"))
    ]
    events.sort(key=lambda item: (item[1]["wall"], item[0]))
    return [
        {
            "n": n,
            "index": i,
            "wall": e["wall"],
            "rel": rel(e["wall"], start),
            "kind": e["kind"],
            "short": short_label(e),
        }
        for n, (i, e) in enumerate(events, start=1)
    ]


def aligned_rows(run: RunResult, start: float | None) -> list[dict[str, Any]]:
    """Timeline events and observed states in time order; each row also shows the state of
    the focus partition in effect at that moment."""
    focus = focus_partition(run)
    numbers = {m["index"]: m["n"] for m in event_marks(run, start)}
    rows: list[dict[str, Any]] = []
    from_file = [s for s in run.states if s.get("source") not in ("timeline", "metadata-log")]
    for i, e in enumerate(run.source.artifacts.timeline):
        if not _is_num(e.get("wall")):
            continue
        if from_file and e.get("kind") == "state":
            continue  # the same observation is in states.jsonl, with its version
        rows.append(
            {
                "wall": e["wall"],
                "kind": str(e.get("kind", "")),
                "n": numbers.get(i),
                "text": event_text(e),
                "lines": [str(x) for x in e["lines"]] if isinstance(e.get("lines"), list) else [],
            }
        )
    for s in from_file:
        if not _is_num(s.get("wall")):
            continue
        rows.append(
            {
                "wall": s["wall"],
                "kind": "state",
                "text": f"{s.get('topic')}-{s.get('partition')}: leader {s.get('leader')} "
                f"epoch {s.get('leader_epoch')} isr {s.get('isr')} {s.get('recovery_state')} "
                f"(v{s.get('version')}, {s.get('source')})",
                "lines": [],
                "n": None,
                "state": s,
            }
        )
    rows.sort(key=lambda r: (r["wall"], r["kind"] != "state"))
    current: dict[str, Any] | None = None
    for row in rows:
        if (
            focus is not None
            and row.get("state") is not None
            and (row["state"].get("topic"), row["state"].get("partition") or 0) == focus
        ):
            current = row["state"]
        row["rel"] = rel(row["wall"], start)
        row["utc"] = utc(row["wall"])
        row["leader"] = None if current is None else current.get("leader")
        row["epoch"] = None if current is None else current.get("leader_epoch")
        row["isr"] = None if current is None else current.get("isr")
        row["recovery"] = None if current is None else current.get("recovery_state")
    return rows


# --------------------------------------------------------------------------------------
# The whole report


def run_view(run: RunResult, *, master: str = "", timings: dict[str, float] | None = None) -> dict:
    source = run.source
    art = source.artifacts
    run_doc = art.run or {}
    verdict_doc = art.verdict or {}
    start = _start(run)
    partitions = [partition_view(p, run, start) for p in run.partitions]
    order = {"diverged": 0, "absent": 1, "consistent": 2}
    partitions.sort(
        key=lambda v: (order.get(v["status"], 3), v["metadata"], v["topic"], v["partition"])
    )
    for i, v in enumerate(partitions):
        v["anchor"] = f"partition-{i}"
    drawable = [v for v in partitions if v["diagram"] and not v["metadata"]]
    if len(drawable) <= DRAW_ALL_UP_TO:
        for v in drawable:
            v["draw"] = True
    else:
        for v in [
            v for v in drawable if v["status"] == "diverged" or (v["loss"] or {}).get("lost_count")
        ][:DRAW_AT_MOST]:
            v["draw"] = True
    finished = run_doc.get("finished")
    errors = [
        {"broker": e.broker_id, **e.error.to_dict(), "text": str(e.error)} for e in run.errors()
    ]
    torn = [
        {"broker": r.broker, "topic": r.topic, "partition": r.partition, **(r.torn_tail or {})}
        for r in run.replicas
        if r.torn_tail is not None
    ]
    scenario = source.scenario
    title = run_doc.get("title") or verdict_doc.get("title")
    if source.path is None or art.run is None:
        heading = "logfork audit"
        title = title or f"audit of {len(source.log_dirs)} log dir(s)"
    else:
        heading = scenario or source.key
    return {
        "key": source.key,
        "kind": "run" if art.run is not None else "audit",
        "heading": heading,
        "title": title,
        "scenario": scenario,
        "release": source.release,
        "mode": run_doc.get("mode") or verdict_doc.get("mode"),
        "kip": run_doc.get("kip") or verdict_doc.get("kip"),
        "jira": run_doc.get("jira") or verdict_doc.get("jira"),
        "fixed_in": run_doc.get("fixed_in") or verdict_doc.get("fixed_in"),
        "host": run_doc.get("host"),
        "started": utc(start),
        "duration": f"{finished - start:.1f} s" if _is_num(finished) and start is not None else "",
        "phases": verdict_doc.get("phases") or {},
        "details": verdict_doc.get("details") or {},
        "path": None if source.path is None else str(source.path),
        "inputs": source.inputs,
        "protocol": source.protocol.value,
        "rules": source.protocol.rules,
        "banner": overall(run),
        "partitions": partitions,
        "diverged": [v for v in partitions if v["status"] == "diverged"],
        "model_notes": model_notes(run, start),
        "timeline": aligned_rows(run, start),
        "events": list(art.timeline),
        "marks": event_marks(run, start),
        "focus": focus_partition(run),
        "start": start,
        "producer": run.producer,
        "acks_per_second": run.acks_per_second,
        "states": run.states,
        "conformance": art.conformance,
        "errors": errors,
        "torn_tails": torn,
        "problems": art.problems,
        "log_dirs": [
            {
                "path": d.path,
                "broker": d.broker_id,
                "kraft": d.kraft,
                "readable": d.readable,
                "sidelined": d.sidelined,
                "partitions": sum(1 for r in run.replicas if r.log_dir == i),
            }
            for i, d in enumerate(source.log_dirs)
        ],
        "unreadable": source.unreadable,
        "tables_dir": None if run.tables_dir is None else str(run.tables_dir),
        "master": master,
        "timings": timings or {},
        "metadata_log": None
        if run.metadata is None
        else {
            "path": run.metadata.path,
            "end_offset": run.metadata.end_offset,
            "leader_changes": len(run.metadata.leader_changes),
        },
    }


def index_entry(view: dict[str, Any], href: str) -> dict[str, Any]:
    """One run on the index page."""
    banner = view["banner"]
    return {
        "key": view["key"],
        "href": href,
        "scenario": view["scenario"] or view["heading"],
        "title": view["title"],
        "release": view["release"] or "unknown",
        "mode": view["mode"] or "",
        "outcome": banner["outcome"],
        "expected": banner["expected"],
        "as_expected": banner["as_expected"],
        "summary": banner["summary"] or "",
        "started": view["started"],
        "diverged": [
            {"id": v["id"], "at": v["diverged_at"], "committed": bool(v["below_high_watermark"])}
            for v in view["diverged"]
        ],
        "lost": sum(((v["loss"] or {}).get("lost_count") or 0) for v in view["partitions"]),
        "durable_lost": sum(
            ((v["loss"] or {}).get("durable_lost") or 0) for v in view["partitions"]
        ),
    }


def release_key(release: str) -> tuple[Any, ...]:
    parts = release.split(".")
    if all(x.isdigit() for x in parts):
        return (0, *map(int, parts))
    return (1, release)


def index_view(entries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The scenario x release grid."""
    items = sorted(
        entries,
        key=lambda e: (e["scenario"], release_key(e["release"]), e["mode"], e["started"], e["key"]),
    )
    releases = sorted({e["release"] for e in items}, key=release_key)
    scenarios = sorted({e["scenario"] for e in items})
    grid = []
    for scenario in scenarios:
        cells = []
        for release in releases:
            cells.append(
                [e for e in items if e["scenario"] == scenario and e["release"] == release]
            )
        title = next((e["title"] for e in items if e["scenario"] == scenario and e["title"]), "")
        grid.append({"scenario": scenario, "title": title, "cells": cells})
    counts = {o: sum(1 for e in items if e["outcome"] == o) for o in OUTCOMES}
    counts["not as expected"] = sum(1 for e in items if e["as_expected"] is False)
    return {"releases": releases, "grid": grid, "entries": items, "counts": counts}
