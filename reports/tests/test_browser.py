"""The reports as headless Chromium renders them from file://, with the network blocked.

The real-run test runs kip-279-s1-equal on the selected pre-fix release (1.1.1, say) and
checks its report; ``LOGFORK_REAL_RUN=<run dir>`` checks an existing run instead.
``LOGFORK_SCREENSHOTS=<dir>`` keeps a screenshot of every page loaded here.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from checkers.audit import audit
from reports.pipeline import run_pipeline
from reports.render import write_reports
from reports.sources import release_protocol, run_source
from reports.tests import browser
from reports.tests.conftest import HOSTILE_RUN, KIP_RUN, MASTER
from reports.tests.dom import Element, parse, squash
from testsupport.runs import HOSTILE


def screenshot_path(name: str) -> Path | None:
    folder = os.environ.get("LOGFORK_SCREENSHOTS")
    return Path(folder) / f"{name}.png" if folder else None


def load(path: Path, name: str) -> Element:
    page = browser.load(path, screenshot=screenshot_path(name))
    assert page.requested == [], f"{path.name} tried to fetch {page.requested}"
    return parse(page.dom)


def assert_divergence_shown(dom: Element, topic: str, partition: int, offset: int) -> None:
    sections = dom.find_all(
        "section", cls="partition", data_topic=topic, data_partition=str(partition)
    )
    assert sections, f"no section for {topic}-{partition}"
    section = sections[0]
    assert section.attrs["data-diverged-at"] == str(offset)
    assert squash(section.find_all(cls="diverged-at")[0].text) == str(offset)
    assert f"Replicas parted at offset {offset}" in squash(section.text)
    svg = section.find_all("svg")
    assert svg, "no lineage diagram"
    assert f"replicas differ from offset {offset}" in squash(svg[0].text)


def test_report_in_chromium(site: Path) -> None:
    dom = load(site / f"{KIP_RUN}.html", "report-kip-279-s1-equal-1.1.1")
    assert squash(dom.by_id("outcome").text) == "REPRODUCED"
    assert "release 1.1.1" in squash(dom.by_id("release").text)
    assert_divergence_shown(dom, "t", 0, 11)
    why = squash(" ".join(e.text for e in dom.find_all(cls="replay")))
    assert (
        "follower asked for epoch 2; leader answered offset 21 (KIP-101 rules); "
        "follower kept [11, 20]" in why
    )
    assert "the replicas have silently diverged" in why
    faults = squash(" ".join(e.text for e in dom.find_all(cls="attribution")))
    assert "the replicas parted after fault cut b2 <-x-> b1 at +7.00 s" in faults
    assert "Epoch 2 began at +9.00 s: unclean election: broker 2 became leader in epoch 2" in faults
    timeline = dom.by_id("timeline")
    assert len(timeline.find_all("tr")) > 10
    assert "10" in [squash(td.text) for td in dom.by_id("loss").find_all("td")]
    assert len(dom.find_all("svg")) >= 2  # the lineage diagram and the timeline


def test_index_in_chromium(site: Path) -> None:
    dom = load(site / "index.html", "index")
    links = dom.by_id("grid").find_all(
        "a", cls="run", data_scenario="kip-279-s1-equal", data_release="1.1.1"
    )
    assert [a.attrs["href"] for a in links] == [f"{KIP_RUN}.html"]
    assert "t-0 diverged at offset 11 (committed)" in squash(links[0].text)
    assert links[0].attrs["data-outcome"] == "reproduced"


def test_a_script_topic_is_text_in_the_browser(site: Path) -> None:
    dom = load(site / f"{HOSTILE_RUN}.html", "report-hostile")
    assert not dom.find_all("script") and not dom.find_all("img") and not dom.find_all("b")
    cells = [squash(td.text) for td in dom.find_all("td")]
    assert f"{HOSTILE}-0" in cells
    assert HOSTILE in squash(dom.by_id("title").text)


def test_a_page_that_fetches_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "fetches.html"
    page.write_text(
        '<!DOCTYPE html><html><head><link rel="stylesheet" href="https://cdn.example.com/a.css">'
        '</head><body><p id="p">offline</p></body></html>'
    )
    loaded = browser.load(page)
    assert loaded.requested == ["https://cdn.example.com/a.css"]
    assert squash(parse(loaded.dom).by_id("p").text) == "offline"


def real_run(kafka_target, logfork_runs: Path) -> Path:
    if os.environ.get("LOGFORK_REAL_RUN"):
        return Path(os.environ["LOGFORK_REAL_RUN"])
    release = kafka_target.release
    if kafka_target.mode != "zk" or release.has_kip279 or not release.has_leader_epochs:
        pytest.skip("kip-279-s1-equal diverges only on 0.11 to 1.1, in ZooKeeper mode")
    from runrecord.outcome import Outcome
    from suites.registry import get
    from suites.scenario import run

    verdict = run(get("kip-279-s1-equal"), kafka_target.kafka, "zk", out=logfork_runs)
    assert verdict.outcome == Outcome.REPRODUCED, verdict.headline()
    return Path(verdict.run_dir)


@pytest.mark.cluster
def test_real_run_report_shows_the_divergence(
    tmp_path: Path, kafka_target, logfork_runs: Path
) -> None:
    run_dir = real_run(kafka_target, logfork_runs)
    source = run_source(run_dir, run_dir.name)
    # The checker on the driver, without Spark, says where the replicas parted.
    expected = audit([run_dir], protocol=release_protocol(source.release)).partitions
    diverged = [(v.topic, v.partition, v.diverged_at) for v in expected if v.status == "diverged"]
    assert diverged, f"the checker finds no divergence in {run_dir}: not a reproduction"
    result = run_pipeline([source], master=MASTER, write_tables=False)
    out = tmp_path / "site"
    write_reports(result, out)
    name = f"real-{source.scenario}-{source.release}"
    dom = load(out / f"{source.key}.html", name)
    for topic, partition, offset in diverged:
        assert_divergence_shown(dom, topic, partition, offset)
    index = load(out / "index.html", f"{name}-index")
    (link,) = index.find_all("a", cls="run", href=f"{source.key}.html")
    for topic, partition, offset in diverged:
        assert f"{topic}-{partition} diverged at offset {offset}" in squash(link.text)
