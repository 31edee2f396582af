"""The explore run's index page (report/explore.html): every schedule run for real with its
verdict beside the model's prediction and the category that makes (agreed, agreed given an
untold variant, cannot predict, disagreed, not reached: each counted apart), each finding
with its minimal schedule and report, every disagreement between the model and the
brokers, every cluster boot."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from reports.render import _common, environment
from runrecord.explore import ExploreRecord
from runrecord.typed import to_json, write_text

PAGE = "explore.html"


def _href(target: str | None, page_dir: Path) -> str | None:
    if not target:
        return None
    return os.path.relpath(Path(target).resolve(), page_dir.resolve())


def explore_view(record: ExploreRecord, page_dir: Path) -> dict[str, Any]:
    """The page's data: the record, with links relative to the page."""
    x = to_json(record)
    for e, entry in zip(x["schedules"], record.schedules, strict=True):
        e["category"] = entry.category
        e["schedule_href"] = _href(e["schedule_file"], page_dir)
        e["schedule_name"] = Path(e["schedule_file"]).name
        e["report_href"] = _href(e["report"], page_dir)
    for e in x["not_run"]:
        e["schedule_href"] = _href(e["schedule_file"], page_dir)
        e["schedule_name"] = Path(e["schedule_file"]).name
    x["clustered"] = any(e["cluster"] for e in x["schedules"])
    for f, finding in zip(x["findings"], record.findings, strict=True):
        f["tally"] = finding.tally()
        f["minimal_href"] = _href(f["minimal"], page_dir)
        f["minimal_name"] = Path(f["minimal"]).name
        f["report_href"] = _href(f["report"], page_dir)
    # Each category counted apart (ExploreRecord.count): the record's fields above, fresh.
    x.update(record.count())
    x["agreement"] = record.agreement()
    x["disagreements"] = [e for e in x["schedules"] if e["agree"] is False]
    minutes = record.searching / 60
    x["rate"] = f"{len(record.schedules) / minutes:.2f}" if minutes else "n/a"
    return x


def write_explore_page(record: ExploreRecord, out: Path) -> Path:
    page_dir = out / "report"
    page_dir.mkdir(parents=True, exist_ok=True)
    template = environment().get_template("explore.html.j2")
    html = template.render(x=explore_view(record, page_dir), **_common())
    path = page_dir / PAGE
    write_text(path, html)
    return path
