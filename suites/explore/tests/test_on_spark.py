"""The parts of `explore --spark-master` that need no cluster: how the ranked candidates are
dealt to shards, what a shard's plan holds, how a lost shard's schedules are recorded (not
run, never a pass), and the store copies that keep Kafka's preallocated indexes sparse."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from checkers.simulate import simulate
from fixtures.releases import resolve
from reports.outputs import get_tree, put_tree
from runrecord.explore import SHARD_LOST, ExploreRecord, ShardPlan
from runrecord.schedule import load_schedule, parse_schedule
from runrecord.typed import dumps_record, read_json
from suites import cli
from suites.explore.drawing.guide import Candidate
from suites.explore.engine import spark as on_spark
from suites.explore.engine.explorer import ExploreOptions, Explorer
from suites.explore.engine.lines import summary_lines
from suites.explore.engine.shard import candidates_of

EXAMPLE = Path(__file__).parents[3] / "docs" / "schedules" / "kip-279-s1-equal.json"


def candidates(n: int) -> list[Candidate]:
    schedule = load_schedule(EXAMPLE)
    protocol = resolve("1.1.1").release.protocol
    prediction = simulate(schedule, protocol)
    return [Candidate(100 + i, schedule, prediction, float(n - i)) for i in range(n)]


def explorer(tmp_path: Path, said: list[str]) -> Explorer:
    options = ExploreOptions(kafka="1.1.1", seed=7, mode="zk", budget=5, spark_master="spark://x")
    record = ExploreRecord("1.1.1", "zk", 7, False, True, 5, None, time.time(), "logfork explore")
    return Explorer(options, tmp_path, record, None, said.append)  # type: ignore[arg-type]


def test_the_ranked_order_is_dealt_out_like_cards() -> None:
    hands = on_spark.deal(candidates(5), 2)
    assert [[n for n, _ in hand] for hand in hands] == [[1, 3, 5], [2, 4]]
    assert [c.index for _, c in hands[0]] == [100, 102, 104]
    # More shards than schedules: no empty shard.
    assert len(on_spark.deal(candidates(2), 4)) == 2


def test_a_shard_plan_round_trips_and_predicts_as_the_driver(tmp_path: Path) -> None:
    ranked = candidates(3)
    hand = on_spark.deal(ranked, 2)[0]
    plan = on_spark.shard_plan(explorer(tmp_path, []), 1, hand)
    file = tmp_path / "plan.json"
    file.write_text(dumps_record(plan))
    back = read_json(ShardPlan, file)
    assert back == plan
    assert [(c.number, c.index) for c in back.candidates] == [(1, 100), (3, 102)]
    again = candidates_of(back, resolve("1.1.1").release.protocol)
    assert [c.schedule for c in again] == [ranked[0].schedule, ranked[2].schedule]
    assert [c.prediction.failure() for c in again] == [ranked[0].prediction.failure()] * 2
    assert parse_schedule(back.candidates[0].schedule) == ranked[0].schedule


def test_a_lost_shard_s_schedules_are_not_run_never_passed(tmp_path: Path) -> None:
    said: list[str] = []
    x = explorer(tmp_path, said)
    hand = on_spark.deal(candidates(4), 2)[1]
    reason = "Job aborted due to stage failure: ExecutorLostFailure (executor 1 exited)"
    on_spark._merge(
        x, "file:///nowhere", hand, {"shard": 2, "status": SHARD_LOST, "detail": reason}, None
    )
    record = read_json(ExploreRecord, tmp_path / "explore.json")
    assert record.schedules == [] and record.findings == []
    assert [(e.number, e.shard) for e in record.not_run] == [(2, 2), (4, 2)]
    assert all(e.why == f"shard 2 lost: {reason}" for e in record.not_run)
    # Each keeps its schedule, to be run again.
    assert load_schedule(record.not_run[0].schedule_file) == hand[0][1].schedule
    assert record.shards[0].status == SHARD_LOST and record.shards[0].schedules == [2, 4]
    lines = summary_lines(record, 60.0)
    assert "not run (no verdict, never a pass): 2 schedule(s): 2, 4" in lines
    page = (tmp_path / "report" / "explore.html").read_text()
    assert "Not run" in page and "ExecutorLostFailure" in page


def test_store_copies_keep_zeros_as_holes(tmp_path: Path) -> None:
    shard = tmp_path / "shard"
    (shard / "runs" / "001").mkdir(parents=True)
    (shard / "clusters").mkdir()
    (shard / "clusters" / "big").write_bytes(b"x")
    index = shard / "runs" / "001" / "00000000000000000000.index"
    with open(index, "wb") as f:  # an index preallocated to 10 MB with 16 bytes written
        f.write(b"\1" * 16)
        f.truncate(10 << 20)
    (shard / "explore.json").write_text("{}")
    assert put_tree(shard, tmp_path / "store", skip=("clusters",)) == 2
    assert not (tmp_path / "store" / "clusters").exists()
    assert get_tree((tmp_path / "store").as_uri().replace("file://", ""), tmp_path / "back") == 2
    copy = tmp_path / "back" / "runs" / "001" / "00000000000000000000.index"
    assert copy.read_bytes() == index.read_bytes()
    assert os.stat(copy).st_blocks * 512 < 1 << 20  # sparse: not 10 MB on disk


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--shards", "0"], "--shards must be at least 1"),
        (["--store", "s3://b/x"], "--store and --shards go with --spark-master"),
    ],
)
def test_bad_spark_options(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["explore", "--kafka-version", "1.1.1", "--seed", "1", "--budget", "1", *extra]
    assert cli.main(args) == 2
    assert message in capsys.readouterr().err


def test_a_shard_missing_from_the_store_failed(tmp_path: Path) -> None:
    # A worker on another machine wrote to its own disk: the driver finds nothing there.
    x = explorer(tmp_path, [])
    hand = on_spark.deal(candidates(2), 1)[0]
    row = {"shard": 1, "status": "done", "detail": "", "out": "/elsewhere/out", "seconds": 1.0}
    on_spark._merge(x, (tmp_path / "store").as_uri(), hand, row, None)
    record = read_json(ExploreRecord, tmp_path / "explore.json")
    assert record.shards[0].status == "failed"
    assert "--store they all share" in record.shards[0].detail
    assert [e.number for e in record.not_run] == [1, 2] and record.schedules == []
