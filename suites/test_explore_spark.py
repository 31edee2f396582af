"""`logfork explore --spark-master` on the `spark_cluster` fixture's two one-core workers:
two shards, one per worker, each running its schedule on its own cluster, merged into one
explore directory where every schedule shows once, with the worker that ran it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runrecord.explore import EXPLORE_JSON


@pytest.mark.cluster
def test_explore_shards_run_on_both_workers_and_merge(kafka_target, spark_cluster, logfork_runs):
    release = kafka_target.release
    if kafka_target.mode != "zk" or release.at_least(2, 0) or not release.at_least(0, 11):
        pytest.skip("runs with the explore smoke: a release with leader epochs, before KIP-279")
    out_dir = logfork_runs / f"explore-{release}-spark"
    argv = [str(Path(sys.executable).parent / "logfork"), "explore"]
    argv += ["--kafka-version", kafka_target.kafka, "--seed", "1", "--budget", "2", "--unclean"]
    argv += ["--spark-master", spark_cluster.master_url, "--parallel", "1"]
    argv += ["--shrink-findings", "0", "--out", str(out_dir)]
    got = subprocess.run(argv, capture_output=True, text=True, timeout=1200, check=False)
    out = got.stdout + got.stderr
    assert got.returncode in (0, 1), out  # 1: a finding (unshrunk); never 2 (a shard lost)
    record = json.loads((out_dir / EXPLORE_JSON).read_text())
    # Every schedule once, numbered as the driver ranked them, each shard's on its worker.
    assert [e["number"] for e in record["schedules"]] == [1, 2], out
    assert not record["not_run"], out
    shards = {s["index"]: s for s in record["shards"]}
    assert {s["status"] for s in shards.values()} == {"done"}, out
    assert [shards[1]["schedules"], shards[2]["schedules"]] == [[1], [2]]
    workers = {shards[1]["worker"], shards[2]["worker"]}
    assert workers == {"executor 0 on 127.0.0.1", "executor 1 on 127.0.0.1"}, out
    for e in record["schedules"]:
        assert e["cluster"] == f"{shards[e['number']]['worker']} c1"
        # The files were merged into this directory and point into it.
        assert Path(e["run_dir"]).parent == out_dir / "runs"
        assert (Path(e["run_dir"]) / "verdict.json").is_file()
        assert Path(e["schedule_file"]) == out_dir / "schedules" / f"{e['number']:03d}.json"
        assert e["report"] is None or Path(e["report"]).is_file()
    assert sum(1 for _ in (out_dir / "schedules").glob("*.json")) == 2
    assert not (out_dir / "shards").exists() and not (out_dir / "clusters").exists()
    page = (out_dir / "report" / "explore.html").read_text()
    assert "executor 1 on 127.0.0.1" in page and "Shards on spark://" in page
    index = (out_dir / "report" / "index.html").read_text()
    assert all(Path(e["report"]).name in index for e in record["schedules"] if e["report"])
    assert sorted(p.name for p in (out_dir / "shard-logs").iterdir()) == ["1.log", "2.log"]
    assert "shard 1 done on executor" in out and "shard 2 done on executor" in out
