"""Judge once: a run's report renders the judgement the run made of its logs, with the rows
the local engine gives, and reads no segment again."""

from __future__ import annotations

import shutil
from pathlib import Path

from basics.protocol import Protocol
from checkers.audit.plan import plan_audit
from reports import engine_local
from reports.cli import report_run
from reports.pipeline import JUDGED, judged_result, run_pipeline
from reports.sources import own_source, run_sources
from testsupport import runs as crafted


def _judged(root: Path, topic: str = "t") -> engine_local.Judged:
    plan = plan_audit([root], topic, (), 900_000, None)
    return engine_local.judge(own_source(root, plan, Protocol.KIP_101))


def test_what_a_run_judged_is_what_its_report_shows(tmp_path: Path) -> None:
    root = crafted.kip279_s1_equal(tmp_path / "kip-279-s1-equal-run")
    seen: list[tuple[str, int]] = []
    plan = plan_audit([root], "t", (), 900_000, None)
    judged = engine_local.judge(
        own_source(root, plan, Protocol.KIP_101), also=lambda tp, *_: seen.append(tp)
    )
    assert seen == [("t", 0)]  # the run's own check saw the partition, in the same pass
    (sources, _) = run_sources([root], protocol=Protocol.KIP_101)
    again = run_pipeline(sources, engine="local").runs[0]
    own = judged_result(judged)
    run = own.runs[0]
    assert [p.verdict.to_dict() for p in run.partitions] == [
        p.verdict.to_dict() for p in again.partitions if p.topic == "t"
    ]
    assert [p.report for p in run.partitions] == [
        p.report for p in again.partitions if p.topic == "t"
    ]
    assert run.audit.to_dict()["partitions"] == judged.audit.to_dict()["partitions"]
    assert set(own.placement.values()) == {JUDGED}


def test_the_report_of_a_judged_run_reads_no_segment(tmp_path: Path) -> None:
    root = crafted.kip279_s1_equal(tmp_path / "kip-279-s1-equal-run")
    judged = _judged(root)
    # The log dirs gone after judging (the crafted copy; no input is ever touched): a
    # report that read them again would find no replica.
    for log_dir in root.glob("nodes/*"):
        shutil.rmtree(log_dir)
    page = report_run(root, tmp_path / "report", judged=judged).read_text()
    assert "diverged" in page and "offset 11" in page


def test_a_run_that_judged_nothing_shows_no_verdict(tmp_path: Path) -> None:
    root = crafted.kip279_s1_equal(tmp_path / "kip-279-s1-equal-run")
    judged = engine_local.nothing_judged(root)
    result = judged_result(judged)
    (run,) = result.runs
    assert run.partitions == [] and run.audit.partitions == []
    assert run.producer is not None and run.producer["acked"] == 41  # what it sent, shown
