"""HTML: one self-contained file per run, and the index page over many runs.

Jinja2 with autoescaping on: every string that came from a cluster or a log (topic names,
keys, values, error texts, timeline fields) is escaped where it is printed. The only markup
inserted unescaped is the charts' SVG, which matplotlib writes with its text escaped.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import jinja2

from reports import charts
from reports.index_view import index_entry, index_view
from reports.results import PipelineResult, RunResult
from reports.view import run_view
from runrecord.typed import write_text

INDEX_HTML, INDEX_JSON = "index.html", "index.json"


def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("reports", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _common() -> dict[str, Any]:
    try:
        version = metadata.version("logfork")
    except metadata.PackageNotFoundError:
        version = "dev"
    now = dt.datetime.now(tz=dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return {"version": version, "generated": now}


def render_report(view: dict[str, Any]) -> str:
    drawn = {
        p["anchor"]: charts.lineage_svg(
            p["diagram"], f"{p['id']} ({p['status']})", leader=p["leader"]
        )
        for p in view["partitions"]
        if p["draw"]
    }
    timeline = charts.timeline_svg(view)
    template = environment().get_template("report.html.j2")
    return template.render(r=view, charts=drawn, timeline_chart=timeline, **_common())


def render_index(entries: Iterable[dict[str, Any]]) -> str:
    template = environment().get_template("index.html.j2")
    return template.render(idx=index_view(entries), **_common())


def report_name(key: str) -> str:
    return f"{key}.html"


def write_report(
    run: RunResult, path: Path, *, engine: str = "", timings: dict[str, float] | None = None
) -> dict[str, Any]:
    """Write one run's report to `path`; returns its view (for the index)."""
    view = run_view(run, engine=engine, timings=timings)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, render_report(view))
    return view


def write_reports(result: PipelineResult, out_dir: Path, *, index: bool = True) -> list[Path]:
    """A report per run in `out_dir`, and `index.html` over them and over the runs an
    earlier call listed in `out_dir/index.json` (so that several test sessions writing to
    one folder add up)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    entries = []
    for run in result.runs:
        path = out_dir / report_name(run.key)
        view = write_report(run, path, engine=result.engine, timings=result.timings)
        written.append(path)
        entries.append(index_entry(view, path.name))
    if index:
        written.append(write_index(out_dir, entries))
    return written


def write_index(out_dir: Path, entries: Sequence[dict[str, Any]]) -> Path:
    known = load_entries(out_dir / INDEX_JSON)
    by_key = {e["key"]: e for e in known if (out_dir / e["href"]).is_file()}
    for entry in entries:
        by_key[entry["key"]] = entry
    merged = sorted(by_key.values(), key=lambda e: e["key"])
    write_text(out_dir / INDEX_JSON, json.dumps(merged, indent=1, default=str) + "\n")
    path = out_dir / INDEX_HTML
    write_text(path, render_index(merged))
    return path


def load_entries(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(data, list):
        return []
    needed = {"key", "href", "scenario", "release", "mode", "outcome", "started"}
    return [e for e in data if isinstance(e, dict) and needed <= e.keys()]
