"""The index page: every run reported into a folder, as a scenario x release grid."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from basics.errors import LogforkError
from basics.releases import parse_version
from runrecord.outcome import Outcome

OUTCOMES = tuple(o.value for o in Outcome)


def index_entry(view: dict[str, Any], href: str) -> dict[str, Any]:
    """One run on the index page. A run with no verdict (not reached, not applicable, setup
    failed) judged no write: its partitions are not counted as losing any."""
    banner = view["banner"]
    judged = _has_verdict(banner["outcome"])
    loss = [(v["loss"] or {}) for v in view["partitions"]] if judged else []
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
        "lost": sum(x.get("lost_count") or 0 for x in loss),
        "durable_lost": sum(x.get("durable_lost") or 0 for x in loss),
    }


def _has_verdict(outcome: str | None) -> bool:
    try:
        return outcome is not None and Outcome(outcome).has_verdict
    except ValueError:
        return False


def release_key(release: str) -> tuple[Any, ...]:
    """Releases in release order; anything else (a local build, "unknown") after them."""
    try:
        return (0, *parse_version(release))
    except LogforkError:
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
        cells = [
            [e for e in items if e["scenario"] == scenario and e["release"] == release]
            for release in releases
        ]
        title = next((e["title"] for e in items if e["scenario"] == scenario and e["title"]), "")
        grid.append({"scenario": scenario, "title": title, "cells": cells})
    counts = {o: sum(1 for e in items if e["outcome"] == o) for o in (*OUTCOMES, "unreadable")}
    counts["not as expected"] = sum(1 for e in items if e["as_expected"] is False)
    return {
        "releases": releases,
        "grid": grid,
        "entries": items,
        "counts": counts,
        "outcomes": OUTCOMES,
    }
