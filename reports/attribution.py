"""Which fault caused a divergence: the run's story, from the last batch the replicas share
to the last write of a divergent version, with the first fault after the shared batch
marked as what separated them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reports.judge import PartitionRow
from reports.timeline_view import FAULT_KINDS, describe_event, rel, utc
from runrecord.events import EventKind
from runrecord.states import StateRecord


def _stamp(ms: Any) -> float | None:
    """Seconds from a batch's max timestamp (ms); None when the batch has none."""
    return ms / 1000 if isinstance(ms, int) and ms > 0 else None


def attribution(
    p: PartitionRow,
    events: Sequence[dict[str, Any]],
    states: Sequence[StateRecord],
    start: float | None,
) -> dict[str, Any] | None:
    """How the replicas came apart, in time order: the last batch they share, then every
    fault, heal and election and every write of a divergent version, until the last of
    those writes. The first fault after the shared batch is what separated them.

    Write times are the batches' producer timestamps; without them, the story runs up to
    the election that started each divergent epoch."""
    if p.status != "diverged":
        return None
    timeline = sorted(events, key=lambda e: e["wall"])
    mine = sorted(
        (s for s in states if s.topic == p.topic and s.partition == p.partition and s.wall),
        key=lambda s: s.wall or 0.0,
    )
    common = p.report.get("common")
    common_at = _stamp(common.get("max_timestamp")) if common else None
    versions = []
    for v in p.report.get("versions") or []:
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
                if e["kind"] == EventKind.ELECTION
                and e.get("epoch") == epoch
                and e.get("topic") in (p.topic, None)
            ),
            None,
        )
        state = next((s for s in mine if s.leader_epoch == epoch), None)
        if election is not None:
            at, text = election["wall"], describe_event(election)
        elif state is not None:
            at = state.wall
            text = (
                f"broker {state.leader} became leader in epoch {epoch} "
                f"(seen in {state.source or 'the state history'})"
            )
        else:
            continue
        epochs.append({"epoch": epoch, "at": at, "rel": rel(at, start), "text": text})
    ends = [v["at"] for v in versions if v["at"] is not None] + [e["at"] for e in epochs]
    end = max(ends) if ends else None
    story = []
    if end is not None:
        for e in timeline:
            if e["kind"] not in FAULT_KINDS or e["wall"] > end:
                continue
            if common_at is not None and e["wall"] < common_at:
                continue
            if e.get("topic") not in (p.topic, None) and e["kind"] == EventKind.ELECTION:
                continue
            story.append(
                {
                    "at": e["wall"],
                    "rel": rel(e["wall"], start),
                    "kind": str(e["kind"]),
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
