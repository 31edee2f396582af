"""The HTML files: what they say, that they load nothing from elsewhere, and that text from
a cluster or a log is always text."""

from __future__ import annotations

import json
import re
from pathlib import Path

from reports import charts
from reports.index_view import index_entry, index_view
from reports.render import INDEX_JSON, render_report, write_index
from reports.tests.conftest import (
    DEPARTS_RUN,
    HOSTILE_RUN,
    KIP_RUN,
    NOT_REACHED_RUN,
    RUNS,
    SETUP_FAILED_RUN,
    SMOKE_RUN,
)
from reports.view import run_view
from testsupport.runs import HOSTILE

EXTERNAL = [
    re.compile(r"""(?:src|href|xlink:href|action|poster)\s*=\s*["']?\s*(?:https?:)?//""", re.I),
    re.compile(r"""url\(\s*["']?\s*(?:https?:)?//""", re.I),
    re.compile(r"@import", re.I),
    re.compile(r"<(?:script|link|iframe|object|embed)\b", re.I),
]


def html_files(site: Path) -> list[Path]:
    return sorted(site.glob("*.html"))


def test_every_page_is_self_contained(site: Path) -> None:
    pages = html_files(site)
    assert {p.name for p in pages} == {f"{k}.html" for k in RUNS} | {"index.html"}
    for page in pages:
        text = page.read_text()
        for pattern in EXTERNAL:
            assert not pattern.search(text), (page.name, pattern.pattern)
        links = re.findall(r"""<a\b[^>]*href="([^"]*)\"""", text)
        assert all(h.startswith("#") or h.endswith(".html") for h in links), links
        assert "Content-Security-Policy" in text


def test_script_topic_renders_as_text(site: Path) -> None:
    text = (site / f"{HOSTILE_RUN}.html").read_text()
    assert "<script" not in text.lower()
    assert "<img src=x" not in text and "<b>bold</b>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "&lt;script&gt;alert(3)&lt;/script&gt; &amp; friends" in text  # a producer error
    assert "&lt;img src=x onerror=alert(2)&gt;" in text  # a timeline field
    index = (site / "index.html").read_text()
    assert "<script" not in index.lower() and "&lt;script&gt;alert(1)&lt;/script&gt;" in index


def test_charts_escape_their_text() -> None:
    diagram = {
        "rows": [
            {
                "broker": 1,
                "reference": True,
                "log_start": 0,
                "leo": 10,
                "high_watermark": 10,
                "batches": 1,
                "segments": [[0, 9, 1, "same", 1]],
            },
            {
                "broker": 2,
                "reference": False,
                "log_start": 0,
                "leo": 10,
                "high_watermark": 5,
                "batches": 1,
                "segments": [[0, 9, 2, "differs", 1]],
            },
        ],
        "low": 0,
        "high": 10,
        "high_watermark": 10,
        "diverged": [0, 9],
        "reference": 1,
    }
    svg = str(charts.lineage_svg(diagram, f"{HOSTILE}-0 $x$", leader=1))
    assert "<script" not in svg and "&lt;script&gt;alert(1)&lt;/script&gt;-0 $x$" in svg
    assert "<?xml" not in svg and "DOCTYPE" not in svg
    assert "replicas differ from offset 0" in svg and "LEO 10" in svg and "high watermark 10" in svg
    view = {
        "start": 100.0,
        "events": [
            {"kind": "phase", "name": "boot", "wall": 100.0},
            {"kind": "fault", "name": HOSTILE, "wall": 101.0, "node": "<b>"},
        ],
        "marks": [{"n": 1, "wall": 101.0, "kind": "fault", "short": f"{HOSTILE} <b>"}],
        "states": [],
        "focus": None,
        "acks_per_second": [],
        "diverged": [],
    }
    timeline = str(charts.timeline_svg(view))
    assert "<script" not in timeline and "&lt;script&gt;" in timeline and "<b>" not in timeline


def test_the_report_answers_the_three_questions(pipeline_result, site: Path) -> None:
    text = (site / f"{KIP_RUN}.html").read_text()
    assert 'Replicas parted at offset <strong class="diverged-at">11</strong>' in text
    assert (
        "follower asked for epoch 2; leader answered offset 21 (KIP-101 rules); "
        "follower kept [11, 20]" in text
    )
    assert "Epoch 2 began at +9.00 s: unclean election: broker 2 became leader in epoch 2" in text
    assert "10 of 41 acknowledged write(s) lost" in text
    view = run_view(pipeline_result.run(KIP_RUN))
    attribution = view["diverged"][0]["attribution"]
    assert attribution["common"]["span"] == "[0, 10]"
    assert [(i["kind"], i["text"]) for i in attribution["story"]] == [
        ("fault", "cut b2 <-x-> b1"),
        ("write", "[11, 20] written in epoch 1, now held by broker 1 (the leader's version)"),
        ("fault", "kill b1 (SIGKILL)"),
        ("heal", "cut b2 <-x-> b1"),
        ("election", "unclean election: broker 2 became leader in epoch 2"),
        ("write", "[11, 20] written in epoch 2, now held by broker 2"),
    ]
    assert attribution["cause"]["text"] == "cut b2 <-x-> b1"
    assert view["banner"]["label"] == "REPRODUCED" and view["banner"]["as_expected"] is True
    faults = [r for r in view["timeline"] if r["kind"] == "fault"]
    assert [(r["n"], r["leader"], r["epoch"]) for r in faults] == [(1, 1, 1), (2, 1, 1), (5, 2, 2)]


def test_other_outcomes_render(pipeline_result, site: Path) -> None:
    hostile = run_view(pipeline_result.run(HOSTILE_RUN))
    assert hostile["banner"]["label"] == "DIVERGED" and hostile["banner"]["as_expected"] is False
    assert "NOT as the KIP says (expected consistent)" in (site / f"{HOSTILE_RUN}.html").read_text()
    not_reached = (site / f"{NOT_REACHED_RUN}.html").read_text()
    assert "NOT REACHED" in not_reached and "not reached: expected leader election" in not_reached
    smoke = (site / f"{SMOKE_RUN}.html").read_text()
    assert "CONSISTENT" in smoke and "smoke-0 (consistent)" in smoke


def test_the_index_is_a_scenario_by_release_grid(site: Path) -> None:
    entries = json.loads((site / INDEX_JSON).read_text())
    grid = index_view(entries)
    assert grid["releases"] == ["1.1.1", "2.0.1", "3.9.2"]
    assert [row["scenario"] for row in grid["grid"]] == [
        "kip-279-s1-equal",
        "kip-279-s1-long",
        "smoke",
    ]
    kip = grid["grid"][0]["cells"][0]
    assert [(e["outcome"], e["diverged"]) for e in kip] == [
        ("reproduced", [{"id": "t-0", "at": 11, "committed": True}])
    ]
    assert grid["counts"]["not-reached"] == 1 and grid["counts"]["not as expected"] == 1
    text = (site / "index.html").read_text()
    assert f'href="{KIP_RUN}.html"' in text and "t-0 diverged at offset 11 (committed)" in text


def test_the_index_keeps_runs_of_earlier_sessions(site: Path, tmp_path: Path) -> None:
    entries = json.loads((site / INDEX_JSON).read_text())
    out = tmp_path / "site"
    out.mkdir()
    for e in entries:
        (out / e["href"]).write_text("x")
    write_index(out, entries[:2])
    write_index(out, entries[2:])
    assert len(json.loads((out / INDEX_JSON).read_text())) == len(entries)
    (out / entries[0]["href"]).unlink()  # a report that is gone leaves the index
    write_index(out, [])
    assert len(json.loads((out / INDEX_JSON).read_text())) == len(entries) - 1


def test_an_audit_view_has_no_run_metadata(pipeline_result) -> None:
    run = pipeline_result.run(SMOKE_RUN)
    view = run_view(run)
    entry = index_entry(view, "x.html")
    assert entry["release"] == "3.9.2" and entry["mode"] == "kraft"
    html = render_report(view)
    assert "smoke on Kafka 3.9.2 (kraft)" in html


def test_a_departs_run_is_shown_as_departs_and_counted(pipeline_result, site: Path) -> None:
    view = run_view(pipeline_result.run(DEPARTS_RUN))
    banner = view["banner"]
    assert (banner["outcome"], banner["label"]) == ("departs", "DEPARTS")
    assert banner["expected"] == "departs" and banner["as_expected"] is True
    assert "as the KIP says (expected departs)" in (site / f"{DEPARTS_RUN}.html").read_text()
    grid = index_view(json.loads((site / INDEX_JSON).read_text()))
    assert grid["counts"]["departs"] == 1 and "departs" in grid["outcomes"]
    (cell,) = [
        c for row in grid["grid"] if row["scenario"] == "kip-279-s1-long" for c in row["cells"] if c
    ]
    assert [(e["outcome"], e["as_expected"]) for e in cell] == [("departs", True)]
    index = (site / "index.html").read_text()
    assert 'class="run o-departs"' in index and "1 departs" in index


def test_a_run_that_could_not_start_says_why(pipeline_result, site: Path) -> None:
    view = run_view(pipeline_result.run(SETUP_FAILED_RUN))
    assert view["banner"]["label"] == "SETUP FAILED" and view["banner"]["as_expected"] is None
    text = (site / f"{SETUP_FAILED_RUN}.html").read_text()
    assert "No Docker engine answers" in text and "Traceback" not in text
    index = (site / "index.html").read_text()
    assert 'class="run o-unreadable"' not in index and 'class="run o-setup-failed"' in index


def test_a_power_loss_says_what_each_file_lost() -> None:
    from reports.timeline_view import describe_event

    event = {
        "kind": "fault",
        "name": "power-loss",
        "node": "b1",
        "model": "unsynced",
        "seed": 3,
        "losses": {"t-0": [3, 2]},
        "dropped": [
            {
                "log_dir": "data",
                "files": [
                    {"path": "t-0/00000000000000000000.log", "dropped": [[144, 216]],
                     "size_before": 216, "size_after": 144, "survives": True},
                    {"path": "replication-offset-checkpoint", "dropped": [[0, 17]],
                     "size_before": 17, "size_after": 0, "survives": False},
                ],
                "namespace": [{"op": "rename", "path": "r.tmp", "to": "r", "undone": True}],
            }
        ],
    }  # fmt: skip
    assert describe_event(event) == (
        "power-loss b1: unsynced, seed 3: log ends t-0 3 -> 2: "
        "t-0/00000000000000000000.log bytes 144-216; "
        "replication-offset-checkpoint as last written: gone; rename r.tmp -> r undone"
    )
