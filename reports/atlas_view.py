"""The atlas's index: its grid (runrecord.atlas) as an HTML page linking each cell to its
run's report, as atlas.json, and as a Markdown table for the README."""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from basics.errors import LogforkError
from basics.paths import PROJECT_ROOT
from basics.releases import Release
from fixtures.catalog import Section, render
from reports.render import _common, environment
from runrecord.atlas import Atlas, AtlasEntry, AtlasRow
from runrecord.outcome import Outcome
from runrecord.typed import read_json, write_json, write_text

INDEX_HTML, ATLAS_JSON, ATLAS_MD = "index.html", "atlas.json", "atlas.md"
OUTCOMES = tuple(o.value for o in Outcome)


def _declared_column(atlas: Atlas, row: AtlasRow) -> int | None:
    """The first release column at or after the row's declared fixed_in."""
    if row.fixed_in is None:
        return None
    fixed = Release(row.fixed_in).parts
    for i, label in enumerate(atlas.releases):
        version = label.rsplit("(", 1)[-1].rstrip(")")  # a local build: "path (2.0.1)"
        if Release(version).parts >= fixed:
            return i
    return None


def _entry_view(e: AtlasEntry) -> dict[str, Any]:
    outcome = e.outcome.value if e.outcome is not None else "not-run"
    if e.outcome == Outcome.NOT_APPLICABLE:
        word, detail = "n/a", e.note
    elif e.outcome is None:
        word, detail = ("error", "logfork failed") if e.failed else ("not run", "not yet")
    else:
        word = outcome
        retried = ", retried" if e.runs > 1 else ""
        detail = "cached" if e.cached else f"{e.seconds:.0f} s{retried}"
    return {
        "mode": e.mode,
        "outcome": outcome,
        "word": word,
        "detail": detail,
        "title": e.note,
        "as_expected": e.as_expected,
        "expected": None if e.expected is None else e.expected.value,
        "href": e.report,
        "first_fixed": e.first_fixed,
    }


def atlas_view(atlas: Atlas) -> dict[str, Any]:
    rows = []
    for row in atlas.rows:
        declared = _declared_column(atlas, row)
        rows.append(
            {
                "scenario": row.scenario,
                "title": row.title,
                "fixed_in": row.fixed_in,
                "findings": [
                    {"mode": f.mode, "found": f.found, "text": f.text, "agrees": f.agrees}
                    for f in row.findings
                ],
                "cells": [
                    {"declared": i == declared, "entries": [_entry_view(e) for e in cell]}
                    for i, cell in enumerate(row.cells)
                ],
            }
        )
    entries = [e for row in atlas.rows for cell in row.cells for e in cell]
    counts = {o: sum(e.outcome == o for e in entries) for o in OUTCOMES}
    counts["not run"] = sum(e.outcome is None for e in entries)
    counts["not as expected"] = sum(e.as_expected is False for e in entries)
    return {
        "releases": atlas.releases,
        "rows": rows,
        "counts": counts,
        "outcomes": OUTCOMES,
        "runs": atlas.runs,
        "cached": atlas.cached,
        "seconds": atlas.seconds,
        "cell_seconds": sum(e.seconds for e in entries),
        "complete": atlas.complete,
    }


def render_atlas(atlas: Atlas) -> str:
    template = environment().get_template("atlas.html.j2")
    return template.render(a=atlas_view(atlas), **_common())


# -- Markdown ---------------------------------------------------------------------------------

MARK = {True: " ✓", False: " ✗", None: ""}


def _md_cell(entries: list[AtlasEntry], declared: bool) -> str:
    ran = [e for e in entries if e.outcome != Outcome.NOT_APPLICABLE]
    if not ran:
        return "–"
    several = len(ran) > 1
    parts = []
    for e in ran:
        word = e.outcome.value if e.outcome is not None else ("error" if e.failed else "not run")
        text = f"{e.mode} " if several else ""
        text += f"{word}{MARK[e.as_expected]}"
        parts.append(f"**{text}** ★" if e.first_fixed else text)
    cell = "<br>".join(parts)
    return f"{cell} ◆" if declared else cell


def atlas_markdown(atlas: Atlas) -> str:
    """Releases as rows and scenarios as columns, which reads better in a README page."""
    head = [
        f"`{r.scenario}`<br>fixed in {r.fixed_in}" if r.fixed_in else f"`{r.scenario}`"
        for r in atlas.rows
    ]
    lines = [
        "| release | " + " | ".join(head) + " |",
        "|---" * (len(atlas.rows) + 1) + "|",
    ]
    declared = [_declared_column(atlas, r) for r in atlas.rows]
    for i, release in enumerate(atlas.releases):
        cells = [_md_cell(r.cells[i], declared[j] == i) for j, r in enumerate(atlas.rows)]
        lines.append(f"| {release} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "✓ as the KIP says, ✗ not as it says; ★ the first fixed release found; ◆ the first "
        "release at or after the declared fix; – not applicable:",
        "",
    ]
    # Reasons that name their release are grouped with it replaced by the span.
    notes: dict[tuple[str, str], list[str]] = defaultdict(list)
    for row in atlas.rows:
        for release, cell in zip(atlas.releases, row.cells, strict=True):
            if all(e.outcome == Outcome.NOT_APPLICABLE for e in cell):
                for e in cell:
                    notes[(row.scenario, e.note.replace(release, "{}"))].append(release)
    for (scenario, reason), releases in notes.items():
        span = releases[0] if len(releases) == 1 else f"{releases[0]} – {releases[-1]}"
        lines.append(f"- `{scenario}` on {span}: {reason.replace('{}', span)}")
    for row in atlas.rows:
        lines += [f"- `{row.scenario}` {f.text}" for f in row.findings]
    return "\n".join(lines)


def write_atlas(atlas: Atlas, out_dir: Path) -> Path:
    """index.html, atlas.json and atlas.md in `out_dir`; returns the index."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / ATLAS_JSON, atlas)
    write_text(out_dir / ATLAS_MD, atlas_markdown(atlas) + "\n")
    path = out_dir / INDEX_HTML
    write_text(path, render_atlas(atlas))
    return path


def markdown_from(path: Path) -> str:
    """The Markdown table of an atlas.json."""
    return atlas_markdown(read_json(Atlas, path))


# -- the README's grid ------------------------------------------------------------------------

ROOT = PROJECT_ROOT
PUBLISHED = ROOT / "docs" / ATLAS_JSON  # the atlas the README shows, copied from a run
WRITE = "python -m reports.atlas_view --write"


def readme_section(atlas_json: Path = PUBLISHED) -> Section:
    return Section(
        "README.md",
        "atlas",
        f"<!-- atlas:grid generated by `{WRITE}` from docs/atlas.json -->",
        "<!-- /atlas:grid -->",
        lambda: markdown_from(atlas_json),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reports.atlas_view",
        description="Print the Markdown grid of an atlas.json, or regenerate the README's "
        "from docs/atlas.json (copy a run's DIR/atlas/atlas.json there first).",
    )
    parser.add_argument("atlas_json", nargs="?", type=Path, default=PUBLISHED)
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help="rewrite README.md's grid")
    action.add_argument("--check", action="store_true", help="exit 1 if README.md's is stale")
    args = parser.parse_args(argv)
    try:
        section = readme_section(args.atlas_json)
        if not (args.write or args.check):
            print(section.body())
            return 0
        readme = ROOT / section.file
        text = readme.read_text()
        new = render(text, section)
    except LogforkError as exc:
        print(f"logfork: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.check:
        if new != text:
            print(f"README.md's atlas grid is out of date: run {WRITE}")
        return int(new != text)
    readme.write_text(new)
    print("rewrote README.md" if new != text else "up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
