"""The pipeline and `logfork audit` on a real Spark standalone cluster: a master and two
one-core workers, separate JVMs started for the session (`spark_cluster`), give what the
local engine gives, and the workers' executors did the reading and judging."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from benchmarks.fleet_data import write_fleet
from fixtures.spark_cluster import SparkCluster
from reports import engine_spark
from reports.pipeline import LOCAL, run_pipeline
from reports.spark import stop_session
from reports.tests.test_spark_modes import inputs, snapshot


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    root = tmp_path_factory.mktemp("fleet")
    return [str(d) for d in write_fleet(root, partitions=40, batches=50, planted=(5, 33)).dirs]


def logfork(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(Path(sys.executable).parent / "logfork"), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)


def test_pipeline_on_the_cluster_equals_the_local_engine(
    spark_cluster: SparkCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = inputs(tmp_path)
    # Small buckets: each task judges several, one partition at a time, and writes each
    # bucket's table files apart.
    monkeypatch.setattr(engine_spark, "BUCKET_BYTES", 20_000)
    local = run_pipeline(sources, engine="local")
    try:
        stop_session()
        remote = run_pipeline(sources, master=spark_cluster.master_url, tables_dir=tmp_path / "t")
    finally:
        stop_session()
    assert remote.engine == spark_cluster.master_url
    ours, theirs = snapshot(remote, {}), snapshot(local, {})
    for key in theirs:
        assert ours[key]["audit"] == theirs[key]["audit"], key
        assert ours[key]["partitions"] == theirs[key]["partitions"], key
    # Every partition was judged by one of the two workers' executors, and both worked.
    where = set(remote.placement.values())
    assert where == {"executor 0 on 127.0.0.1", "executor 1 on 127.0.0.1"}, where
    assert set(local.placement.values()) == {LOCAL}
    batches = pq.read_table(tmp_path / "t" / "batches.parquet")
    assert batches.num_rows == sum(r.batches for r in remote.run("many").audit.replicas)
    assert not list(tmp_path.glob(".*partial*")) and not list(tmp_path.glob("t/.*"))


def test_cli_audit_on_the_cluster_prints_the_local_json(
    spark_cluster: SparkCluster, fleet: list[str]
) -> None:
    local = logfork("audit", "--engine", "local", *fleet, "--json", "-")
    remote = logfork(
        "audit", "--engine", "spark", "--spark-master", spark_cluster.master_url, *fleet,
        "--json", "-",
    )  # fmt: skip
    assert remote.returncode == local.returncode == 1, remote.stderr[-2000:]
    assert json.loads(remote.stdout) == json.loads(local.stdout)
    assert remote.stdout == local.stdout
    diverged = [p for p in json.loads(local.stdout)["partitions"] if p["status"] == "diverged"]
    assert len(diverged) == 2


def test_an_unreachable_master_is_one_paragraph(fleet: list[str], tmp_path: Path) -> None:
    from fixtures.daemons import free_port

    master = f"spark://127.0.0.1:{free_port()}"
    done = logfork("audit", "--spark-master", master, *fleet, "--tables", str(tmp_path / "t"))
    assert done.returncode == 2
    assert master in done.stderr and "Traceback" not in done.stderr
    assert len([line for line in done.stderr.split("\n\n") if line.strip()]) == 1
    assert done.stdout == "" and not (tmp_path / "t").exists()


def test_the_cluster_leaves_nothing_behind_even_when_its_user_fails(tmp_path: Path) -> None:
    seen: list[Any] = []
    cluster = SparkCluster(workers=1, root=tmp_path / "c")
    with pytest.raises(RuntimeError, match="the test failed"), cluster:
        seen.extend(cluster.pids())
        raise RuntimeError("the test failed")
    assert len(seen) >= 2  # a master and a worker JVM
    assert cluster.pids() == []
    for pid in seen:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()


def test_a_killed_owner_takes_its_cluster_with_it(tmp_path: Path) -> None:
    """SIGKILL leaves no teardown code to run: the kernel's parent-death signal does it."""
    from fixtures.daemons import group_members
    from fixtures.waiting import wait_until

    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from fixtures.spark_cluster import SparkCluster\n"
        "c = SparkCluster(workers=1, root=Path(sys.argv[1]))\n"
        "c.start()\n"
        "print(' '.join(str(d.pid) for d in c.daemons), flush=True)\n"
        "sys.stdin.read()\n"  # until killed
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path / "c")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None
        groups = [int(p) for p in owner.stdout.readline().split()]
        assert len(groups) == 2 and group_members(groups)
    finally:
        owner.kill()
        owner.wait()
    wait_until(
        lambda: group_members(groups),
        lambda left: not left,
        what="the killed owner's master and worker to exit",
        timeout=60,
    )
