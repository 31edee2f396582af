"""What a report says, worked out from a `RunResult`: plain data for the templates and
charts. Three questions drive it: where the replicas parted (the divergent offset and the
versions there), why the protocol let it happen (the model's rounds), and which fault
caused it (`reports.attribution`).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from basics.protocol import Protocol
from checkers.history import loss_line
from checkers.metadata_log import METADATA_TOPICS
from reports.attribution import attribution
from reports.judge import ABSENT, DETAILED_UP_TO, PartitionRow
from reports.results import RunResult
from reports.timeline_view import (
    aligned_rows,
    event_dict,
    event_marks,
    rel,
    state_dict,
    utc,
)
from runrecord.events import EventKind
from runrecord.outcome import Outcome, high_watermark_clause

DRAW_ALL_UP_TO = DETAILED_UP_TO  # beyond this only diverged or lossy partitions get diagrams
DRAW_AT_MOST = 40


def protocol_rules(value: str | None) -> str:
    try:
        return Protocol(value).rules if value else ""
    except ValueError:
        return str(value)


def partition_headline(p: PartitionRow) -> str:
    name = f"{p.topic}-{p.partition}"
    v = p.verdict
    if p.status != "diverged" or v is None:
        return f"{name}: {p.status}"
    held = "; ".join(
        f"{x['span']} is epoch {x['leader_epoch']} on broker "
        f"{', '.join(map(str, x['replicas']))}{' (leader)' if x.get('reference') else ''}"
        for x in p.report.get("versions") or []
    )
    hw = v.high_watermark
    where = (
        "high watermark unknown"
        if hw is None
        else high_watermark_clause(v.below_high_watermark, hw)
    )
    text = f"{name}: replicas parted at offset {v.diverged_at} ({where})"
    return f"{text}; {held}" if held else text


# --------------------------------------------------------------------------------------
# The verdict banner


def overall(run: RunResult) -> dict[str, Any]:
    """The banner: the scenario's outcome when the run has one, else the checker's."""
    verdict = run.source.artifacts.verdict
    diverged = [p for p in run.partitions if p.status == "diverged"]
    lost = sum(p.lost or 0 for p in run.partitions)
    if verdict is not None:
        outcome, expected, as_expected = verdict.outcome, verdict.expected, verdict.as_expected
    else:
        expected = as_expected = None
        if diverged or lost:
            outcome = Outcome.DIVERGED
        elif run.audit.unreadable:
            outcome = None
        else:
            outcome = Outcome.CONSISTENT
    if outcome is not None and not outcome.has_verdict:
        expect_line = {
            Outcome.NOT_REACHED: "no verdict: the scenario did not reach the state it needs",
            Outcome.NOT_APPLICABLE: "the release or mode lacks what the scenario tests",
            Outcome.SETUP_FAILED: "no verdict: the cluster could not be started",
        }[outcome]
    elif expected is None:
        expect_line = "checker's verdict on the logs" if run.source.path is None else ""
    elif as_expected:
        expect_line = f"as the KIP says (expected {expected.value})"
    else:
        expect_line = f"NOT as the KIP says (expected {expected.value})"
    findings = [partition_headline(p) for p in diverged]
    findings += [
        f"{p.topic}-{p.partition}: {loss_line(p.report.get('loss'))}"
        for p in run.partitions
        if p.lost
    ]
    if not findings and run.partitions:
        n = len([p for p in run.partitions if p.status == "consistent"])
        findings.append(f"all {n} partition(s) consistent: every replica holds the same batches")
    if run.audit.unreadable:
        findings.append(f"{len(run.audit.unreadable)} input(s) could not be read at all")
    name = outcome.value if outcome is not None else "unreadable"
    return {
        "outcome": name,
        "label": name.upper().replace("-", " "),
        "expected": None if expected is None else expected.value,
        "as_expected": as_expected,
        "expect_line": expect_line,
        "summary": None if verdict is None else verdict.summary,
        "findings": findings,
    }


# --------------------------------------------------------------------------------------
# Partitions


def partition_view(
    p: PartitionRow, run: RunResult, events: list[dict[str, Any]], start: float | None
) -> dict[str, Any]:
    v = p.verdict
    report = p.report
    predictions = [
        {"follower": int(f), **x} for f, x in sorted((report.get("predictions") or {}).items())
    ]
    versions = []
    for x in report.get("versions") or []:
        stamp = x.get("max_timestamp")
        when = stamp / 1000 if isinstance(stamp, int) and stamp > 0 else None
        versions.append({**x, "written": utc(when), "written_rel": rel(when, start)})
    return {
        "id": f"{p.topic}-{p.partition}",
        "anchor": "",
        "topic": p.topic,
        "partition": p.partition,
        "status": p.status,
        "headline": partition_headline(p),
        "diverged_at": None if v is None else v.diverged_at,
        "below_high_watermark": False if v is None else v.below_high_watermark,
        "high_watermark": None if v is None else v.high_watermark,
        "leader": None if v is None else v.leader,
        "leader_source": "" if v is None else v.leader_source,
        "replicas": [] if v is None else v.replicas,
        "protocol": run.source.protocol.value,
        "rules": run.source.protocol.rules,
        "versions": versions,
        "lacking": [] if v is None else v.lacking,
        "replica_rows": report.get("replicas") or [],
        "log_end_offsets": {} if v is None else {str(b): o for b, o in v.log_end_offsets.items()},
        "diagram": report.get("diagram"),
        "replays": report.get("replays") or [],
        "predictions": predictions,
        "notes": [] if v is None else v.notes,
        "kraft": run.kraft_state.get((p.topic, p.partition)),
        "loss": report.get("loss"),
        "attribution": attribution(p, events, run.states, start),
        "metadata": p.topic in METADATA_TOPICS,
        "draw": False,
    }


def model_notes(events: list[dict[str, Any]], start: float | None) -> list[dict[str, Any]]:
    """What the scenario's own model steps recorded while the run went on."""
    return [
        {
            "rel": rel(e["wall"], start),
            "protocol": protocol_rules(e.get("protocol")),
            "leader": e.get("leader"),
            "follower": e.get("follower"),
            "outcome": e.get("outcome"),
            "lines": [str(x) for x in e.get("lines") or []],
        }
        for e in events
        if e["kind"] == EventKind.NOTE and e.get("name") == "model"
    ]


def focus_partition(run: RunResult) -> tuple[str, int] | None:
    diverged = [p for p in run.partitions if p.status == "diverged"]
    if diverged:
        return diverged[0].topic, diverged[0].partition
    if run.states:
        return run.states[0].topic, run.states[0].partition
    ordinary = [p for p in run.partitions if p.topic not in METADATA_TOPICS]
    return (ordinary[0].topic, ordinary[0].partition) if ordinary else None


def _start(run: RunResult, events: list[dict[str, Any]]) -> float | None:
    info = run.source.artifacts.run
    if info is not None:
        return info.started
    walls = [e["wall"] for e in events]
    return min(walls) if walls else None


def _drawn(partitions: list[dict[str, Any]]) -> None:
    drawable = [v for v in partitions if v["diagram"] and not v["metadata"]]
    if len(drawable) > DRAW_ALL_UP_TO:
        drawable = [
            v for v in drawable if v["status"] == "diverged" or (v["loss"] or {}).get("lost_count")
        ][:DRAW_AT_MOST]
    for v in drawable:
        v["draw"] = True


# --------------------------------------------------------------------------------------
# The whole report


def run_view(run: RunResult, *, engine: str = "", timings: dict[str, float] | None = None) -> dict:
    source = run.source
    art = source.artifacts
    info, verdict = art.run, art.verdict
    events = [event_dict(e) for e in art.timeline]
    start = _start(run, events)
    partitions = [partition_view(p, run, events, start) for p in run.partitions]
    order = {"diverged": 0, ABSENT: 1, "consistent": 2}
    partitions.sort(
        key=lambda v: (order.get(v["status"], 3), v["metadata"], v["topic"], v["partition"])
    )
    for i, v in enumerate(partitions):
        v["anchor"] = f"partition-{i}"
    _drawn(partitions)
    audit = run.audit
    errors = [
        {"broker": e.broker_id, **e.error.to_dict(), "text": str(e.error)} for e in audit.errors
    ]
    torn = [
        {"broker": r.broker, "topic": r.topic, "partition": r.partition, **asdict(r.torn_tail)}
        for r in audit.replicas
        if r.torn_tail is not None
    ]
    if source.path is None or info is None:
        heading = "logfork audit"
        title = f"audit of {len(audit.log_dirs)} log dir(s)"
    else:
        heading, title = source.scenario or source.key, info.title
    finished = None if info is None else info.finished
    focus = focus_partition(run)
    return {
        "key": source.key,
        "kind": "run" if info is not None else "audit",
        "heading": heading,
        "title": title,
        "scenario": source.scenario,
        "release": source.release,
        "mode": None if info is None else info.mode,
        "kip": None if info is None else info.kip,
        "jira": None if info is None else info.jira,
        "fixed_in": None if info is None else info.fixed_in,
        "host": None if info is None else info.host,
        "started": utc(start),
        "duration": f"{finished - start:.1f} s"
        if finished is not None and start is not None
        else "",
        "phases": {} if verdict is None else verdict.phases,
        "details": {} if verdict is None else verdict.details,
        "path": None if source.path is None else str(source.path),
        "inputs": source.plan.inputs,
        "protocol": source.protocol.value,
        "rules": source.protocol.rules,
        "banner": overall(run),
        "partitions": partitions,
        "diverged": [v for v in partitions if v["status"] == "diverged"],
        "model_notes": model_notes(events, start),
        "timeline": aligned_rows(events, run.states, focus, start),
        "events": events,
        "marks": event_marks(events, start),
        "focus": focus,
        "start": start,
        "producer": run.producer,
        "acks_per_second": run.acks_per_second,
        "states": [state_dict(s) for s in run.states],
        "conformance": None
        if art.conformance is None
        else [vars(s) for s in art.conformance.statements],
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
                "offline": d.offline,
                "partitions": sum(1 for r in audit.replicas if r.log_dir == i),
            }
            for i, d in enumerate(audit.log_dirs)
        ],
        "unreadable": audit.unreadable,
        "tables_dir": None if run.tables_dir is None else str(run.tables_dir),
        "engine": engine,
        "timings": timings or {},
        "metadata_log": None
        if run.metadata is None
        else {
            "path": run.metadata.path,
            "end_offset": run.metadata.end_offset,
            "leader_changes": len(run.metadata.leader_changes),
        },
    }
