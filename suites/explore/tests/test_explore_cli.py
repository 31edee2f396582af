"""The pure parts of `logfork explore` and `logfork replay`: the fixed cluster shape that
lets one cluster serve every candidate, the lines they print, the explore index page, and
bad schedule files refused before any cluster starts."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from basics.errors import SetupError
from reports.explore_page import write_explore_page
from runrecord.explore import (
    SHARD_DONE,
    SHARD_LOST,
    ExploreFinding,
    ExploreRecord,
    ScheduleEntry,
    ShardRecord,
)
from runrecord.outcome import Outcome
from runrecord.schedule import load_schedule, write_schedule
from suites import cli
from suites.explore import explore_cli
from suites.explore.drawing.generate import DrawOptions, draw_many, explore_shape
from suites.explore.engine.bench import cluster_spec, shape_key
from suites.explore.engine.explorer import ExploreOptions, Explorer, shrink_order
from suites.explore.engine.lines import progress_line, summary_lines
from suites.explore.explore_cli import best_so_far
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
    assert "2 of 2 reached a verdict; the model: 1 agreed, 0 agreed given" in lines[0]
    assert lines[1] == (
        "disagreement: schedule 2: model stuck, brokers held: replay: /x/schedules/002.json"
    )
    assert "not shrunk" in best_so_far(record) and "/x/schedules/001.json" in best_so_far(record)


def five_categories() -> list[ScheduleEntry]:
    """A schedule of each category, and one more that failed setup."""
    variant = "if the high watermark checkpoint had caught up before the crash at step 3: held"
    rolled_back = "the power loss of broker 1 at step 2 rolled back replication-offset-checkpoint"
    return [
        entry(1, "diverged", "diverged", True),
        replace(entry(2, None, "stuck", True), agreed_if=variant),
        replace(entry(3, None, "diverged", None), unpredictable=rolled_back),
        entry(4, None, "stuck", False),
        replace(entry(5, None, None, None), outcome=Outcome.NOT_REACHED, summary="not reached"),
        replace(entry(6, None, None, None), outcome=Outcome.SETUP_FAILED, summary="no disk"),
    ]


def test_each_category_is_counted_apart_never_as_agreement(tmp_path: Path) -> None:
    """Agreement only on a variant the run could not tell, a schedule the model cannot
    predict and one with no verdict are each counted apart: in the schedule's line, the
    summary, the page and explore.json."""
    entries = five_categories()
    lines = [progress_line(e, None) for e in entries]
    assert lines[0].endswith("  diverged  model agrees (diverged)  41s")
    assert lines[1].endswith("  held  model agrees given an untold variant (stuck)  41s")
    assert lines[2].endswith("  held  model cannot predict  41s")
    assert lines[3].endswith("  held  model DISAGREES (stuck)  41s")
    assert lines[4].endswith("  not-reached  model: no finding  41s")
    record = ExploreRecord("4.4.0", "kraft", 3, False, True, 6, None, time.time(), "explore")
    record.schedules = entries
    assert [e.category for e in entries] == [
        "agreed", "agreed given", "cannot predict", "disagreed", "not reached", "not reached"
    ]  # fmt: skip
    summary = summary_lines(record, 60.0)[0]
    assert (
        "; 4 of 6 reached a verdict; the model: 1 agreed, 1 agreed given an untold variant, "
        "1 cannot predict, 1 disagreed, 2 not reached; "
    ) in summary
    Explorer(ExploreOptions("4.4.0", 3), tmp_path, record, None, print).save()  # type: ignore[arg-type]
    saved = json.loads((tmp_path / "explore.json").read_text())
    counts = {k: saved[k] for k in ("agreed", "agreed_given", "cannot_predict", "disagreed")}
    assert counts == {"agreed": 1, "agreed_given": 1, "cannot_predict": 1, "disagreed": 1}
    assert saved["not_reached"] == 2
    page = (tmp_path / "report" / "explore.html").read_text()
    assert "1 agreed, 1 agreed given an untold variant, 1 cannot predict, 1 disagreed" in page
    assert '<td>agreed given an untold variant</td><td class="num">1</td>' in page
    assert '<td>not reached</td><td class="num">2</td>' in page


@pytest.mark.parametrize(
    ("numbers", "shard", "findings", "code"),
    [
        ((5, 6), None, False, 3),  # nothing judged: no verdict, never a pass
        ((4, 5, 6), None, False, 0),  # one disagreement is a verdict: nothing found
        ((1, 5), None, True, 1),
        ((5, 6), SHARD_LOST, False, 2),
        ((2, 5), SHARD_DONE, False, 0),
    ],
)
def test_explore_exits_3_unless_a_schedule_reached_a_verdict(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    numbers: tuple[int, ...],
    shard: str | None,
    findings: bool,
    code: int,
) -> None:
    by_number = {e.number: e for e in five_categories()}

    def run_all(self: Explorer, drawing: object) -> None:
        for n in numbers:
            self.add(by_number[n], None)  # type: ignore[arg-type]
        if shard is not None:
            self.record.shards = [ShardRecord(1, list(numbers), shard)]

    bench = type("NoBench", (), {"closed": False, "boots": []})()
    monkeypatch.setattr(explore_cli, "open_benches", lambda *args: [bench])
    monkeypatch.setattr(explore_cli, "install_handlers", lambda: None)
    monkeypatch.setattr(Explorer, "run_all", run_all)
    args = ["explore", "--kafka-version", "1.1.1", "--seed", "1", "--budget", "6"]
    args += ["--parallel", "1", "--shrink-findings", "0", "--out", str(tmp_path / "x")]
    assert cli.main(args) == code
    out = capsys.readouterr().out
    verdicts = sum(1 for n in numbers if by_number[n].outcome.has_verdict)
    assert f"; {verdicts} of {len(numbers)} reached a verdict; " in out
    assert bool(_finding_lines(out)) == findings


def _finding_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("finding: ")]


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
    assert "2 of 2 reached a verdict; the model: 1 agreed, 0 agreed given" in page
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


def test_repeated_replays_are_one_count_and_one_exit_code() -> None:
    from suites.explore.replay_cli import combined_exit, tally

    assert (tally([1] * 5), combined_exit([1] * 5)) == ("failed 5 of 5", 1)
    assert (tally([0] * 5), combined_exit([0] * 5)) == ("held 5 of 5", 0)
    # held only some of the time is not held; not reached alone is not a finding
    assert (tally([0, 1, 0, 0, 0]), combined_exit([0, 1, 0, 0, 0])) == ("held 4, failed 1 of 5", 1)
    assert combined_exit([0, 3, 0]) == 3
