"""The pure parts of `logfork explore` and `logfork replay`: the fixed cluster shape that
lets one cluster serve every candidate, the lines they print, the explore index page, and
bad schedule files refused before any cluster starts."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from fixtures.errors import SetupError
from reports.explore_page import write_explore_page
from runrecord.explore import ExploreFinding, ExploreRecord, ScheduleEntry
from runrecord.outcome import Outcome
from runrecord.schedule import load_schedule, write_schedule
from suites import cli
from suites.explore.bench import cluster_spec, shape_key
from suites.explore.explore import progress_line, shrink_order, summary_lines
from suites.explore.explore_cli import best_so_far
from suites.explore.generate import DrawOptions, draw_many, explore_shape
from suites.explore.replay_cli import in_mode

DOCS_EXAMPLE = Path(__file__).parents[3] / "docs" / "schedules" / "kip-279-s1-equal.json"


def test_explore_draws_one_cluster_shape_per_run() -> None:
    options = explore_shape(DrawOptions(unclean=True))
    schedules = draw_many(4, 60, options)
    assert len({shape_key(s.cluster) for s in schedules}) == 1
    for s in schedules:
        assert s.cluster.controller == 3
        assert s.cluster.broker_config.replica_lag_time_max_ms == 600000
        if s.cluster.replication_factor == 2:
            assert 3 not in s.cluster.replicas  # the controller holds no replica then
    assert {s.cluster.replication_factor for s in schedules} == {2, 3}
    kraft = explore_shape(DrawOptions(mode="kraft"), lag_ms=10000)
    assert {s.cluster.controller for s in draw_many(4, 20, kraft)} == {None}
    assert {s.cluster.broker_config.replica_lag_time_max_ms for s in draw_many(4, 20, kraft)} == {
        10000
    }


def test_the_cluster_a_shape_asks_for() -> None:
    shape = load_schedule(DOCS_EXAMPLE).cluster
    spec = cluster_spec("1.1.1", shape)
    assert (spec.mode, spec.brokers, spec.controller) == ("zk", 3, 3)
    assert spec.broker_config == {
        "replica.lag.time.max.ms": 600000,
        "zookeeper.session.timeout.ms": 60000,
        "replica.high.watermark.checkpoint.interval.ms": 5000,
        "unclean.leader.election.enable": False,
        "replica.socket.timeout.ms": 5000,
        "request.timeout.ms": 5000,
        "controller.socket.timeout.ms": 5000,
        "controlled.shutdown.retry.backoff.ms": 1000,
        "transaction.state.log.num.partitions": 1,
        "transaction.state.log.min.isr": 1,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
    }
    assert spec.node_config == {"b2": {"zookeeper.session.timeout.ms": 6000}}


def test_replay_in_another_mode() -> None:
    schedule = load_schedule(DOCS_EXAMPLE)
    assert in_mode(schedule, None, "f.json") is schedule
    # One broker's own ZooKeeper session timeout has no KRaft equivalent.
    with pytest.raises(SetupError, match=r"node_config\.2\.broker\.session\.timeout\.ms"):
        in_mode(schedule, "kraft", "f.json")
    plain = replace(schedule, cluster=replace(schedule.cluster, node_config={}))
    kraft = in_mode(plain, "kraft", "f.json")
    assert kraft.cluster.mode == "kraft" and kraft.cluster.controller is None
    assert kraft.cluster.session_timeout_ms(2) == 60000
    spec = cluster_spec("3.9.2", kraft.cluster)
    assert spec.node_config == {"c1": {"broker.session.timeout.ms": 60000}}


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ("{not json", "not JSON"),
        ('{"format": 2, "cluster": {}, "steps": []}', "format: unknown format version 2"),
        (
            '{"format": 1, "cluster": {"replication_factor": 2}, "steps": [{"kind": "nap"}]}',
            "steps[0].kind: unknown step kind 'nap'",
        ),
    ],
)
def test_a_bad_schedule_file_is_one_paragraph_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, field: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    before = bad.read_bytes()
    code = cli.main(["replay", str(bad), "--kafka-version", "1.1.1", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert str(bad) in err and field in err
    assert "Traceback" not in err
    assert bad.read_bytes() == before  # an input is never written to
    assert not (tmp_path / "clusters").exists()  # nothing started


def entry(n: int, failure: str | None, predicted: str | None, agree: bool | None) -> ScheduleEntry:
    outcome = Outcome.DIVERGED if failure else Outcome.CONSISTENT
    return ScheduleEntry(
        n, n * 7, 9, 1, outcome, failure, "summary", predicted, "model says", agree, 41.2, 13.0,
        f"/x/runs/{n:03d}", f"/x/schedules/{n:03d}.json",
    )  # fmt: skip


def test_progress_and_summary_lines() -> None:
    line = progress_line(entry(3, "diverged", "diverged", True), 40)
    assert line == "[3/40] 9 steps, 1 skipped  diverged  model agrees (diverged)  41s"
    line = progress_line(entry(4, None, "stuck", False), None)
    assert line == "[4] 9 steps, 1 skipped  held  model DISAGREES (stuck)  41s"
    failed = replace(entry(5, None, None, None), outcome=Outcome.SETUP_FAILED, summary="no disk")
    assert progress_line(failed, 40).endswith("setup-failed  model: no finding  41s\n    no disk")
    record = ExploreRecord("1.1.1", "zk", 1, True, True, 40, None, time.time(), "logfork explore")
    record.schedules = [entry(1, "diverged", "diverged", True), entry(2, None, "stuck", False)]
    lines = summary_lines(record, 120.0)
    assert lines[0].startswith("explore: 2 schedules in 2.0 min (1.00 schedules/min); 0 finding")
    assert "model agreed on 1 of 2 judged (50.0 %), 1 disagreement(s)" in lines[0]
    assert lines[1] == (
        "disagreement: schedule 2: model stuck, brokers held: replay: /x/schedules/002.json"
    )
    assert "not shrunk" in best_so_far(record) and "/x/schedules/001.json" in best_so_far(record)


def test_shrink_order_takes_a_divergence_then_the_rarest_kind_first() -> None:
    def hang(n: int, cause: str) -> ScheduleEntry:
        return replace(entry(n, "hanging-transaction", None, None), cause=cause)

    causes = {2: "skipped-marker", 3: "power-lost-marker", 5: "skipped-marker",
              6: "skipped-marker", 9: "lost-marker", 11: "lost-marker",
              14: "power-lost-marker", 20: "lost-marker", 21: "skipped-marker"}  # fmt: skip
    entries = [hang(n, c) for n, c in causes.items()] + [entry(10, "diverged", None, None)]
    entries.sort(key=lambda e: e.number)
    failing = [(e, None) for e in entries]
    order = [e.number for e, _ in shrink_order(failing)]  # type: ignore[arg-type]
    assert order == [10, 3, 9, 2, 14, 11, 5, 20, 6, 21]


def test_the_explore_index_page(tmp_path: Path) -> None:
    record = ExploreRecord("1.1.1", "zk", 1, True, True, 40, None, time.time(), "logfork explore")
    record.schedules = [entry(1, "diverged", "diverged", True), entry(2, None, "stuck", False)]
    record.schedules[0].report = str(tmp_path / "report" / "r1.html")
    minimal = tmp_path / "findings" / "1-diverged.json"
    minimal.parent.mkdir()
    write_schedule(minimal, load_schedule(DOCS_EXAMPLE))
    record.findings = [
        ExploreFinding(
            "diverged", 1, "/x/schedules/001.json", str(minimal), 6, True, 9,
            f"logfork replay {minimal} --kafka-version 1.1.1 --kafka-mode zk",
            str(tmp_path / "report" / "r9.html"), "replicas diverged at offset 11",
            minimal_runs=5, minimal_failed=2,
        )
    ]  # fmt: skip
    record.finished, record.searching = record.started + 90, 60.0
    page = write_explore_page(record, tmp_path).read_text()
    assert 'href="../findings/1-diverged.json"' in page
    assert 'href="r9.html"' in page and 'href="r1.html"' in page
    assert "model agreed on 1 of 2 judged (50.0 %), 1 disagreement(s)" in page
    assert "2.00 schedules/min" in page
    assert json.dumps(str(minimal))[1:-1] in page  # the replay command
    assert "yes, in 2 of its 5 runs" in page  # a race the replay meets only sometimes
    assert "<script" not in page


def test_jbod_without_crash_mounts_stops_before_any_schedule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOGFORK_CRASHFS", str(tmp_path / "no-such-binary"))
    args = ["explore", "--kafka-version", "4.3.1", "--kafka-mode", "kraft", "--jbod"]
    code = cli.main([*args, "--seed", "1", "--budget", "1", "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2
    assert "--jbod puts every log dir on a crash-simulating filesystem" in err
    assert "no-such-binary" in err and "Traceback" not in err
    assert not (tmp_path / "x").exists()  # nothing started
