"""Log dirs and tables on a real S3-compatible server (`s3_server`, over HTTP on loopback):
`logfork audit` reads them by URI on both engines, the standalone cluster's executors read
and write through the filesystem, and bad URIs are bad input named in one paragraph."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from benchmarks.fleet_data import write_fleet
from checkers.storage import filesystem
from fixtures.s3_server import S3Server
from fixtures.spark_cluster import SparkCluster


def logfork(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(Path(sys.executable).parent / "logfork"), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def fleet(s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("fleet")
    write_fleet(root, partitions=30, batches=40, planted=(4, 17))
    return root, s3_server.upload(root, "fleet")


def uris(base: str) -> list[str]:
    # The same store by both of its names: pyarrow's s3:// and Hadoop's s3a://.
    return [f"{base}/broker-1", f"{base.replace('s3://', 's3a://')}/broker-2", f"{base}/broker-3"]


def as_remote(text: str, root: Path, base: str) -> str:
    text = text.replace(f"{root}/broker-2", f"{base.replace('s3://', 's3a://')}/broker-2")
    return text.replace(f"{root}/", f"{base}/")


def test_local_engine_reads_log_dirs_by_uri(fleet: tuple[Path, str]) -> None:
    root, base = fleet
    remote = logfork("audit", "--engine", "local", *uris(base), "--json", "-")
    local = logfork("audit", "--engine", "local", *(str(root / f"broker-{n}") for n in (1, 2, 3)),
                    "--json", "-")  # fmt: skip
    assert remote.returncode == local.returncode == 1, remote.stderr
    assert remote.stdout == as_remote(local.stdout, root, base)
    assert f'"path": "{base}/broker-1"' in remote.stdout


def test_cluster_executors_read_and_write_through_s3(
    fleet: tuple[Path, str], spark_cluster: SparkCluster, s3_server: S3Server
) -> None:
    _, base = fleet
    local = logfork("audit", "--engine", "local", *uris(base), "--json", "-")
    tables = s3_server.uri("tables/audit")
    remote = logfork(
        "audit", "--spark-master", spark_cluster.master_url, *uris(base), "--json", "-",
        "--tables", tables.replace("s3://", "s3a://"),
    )  # fmt: skip
    assert remote.returncode == 1, remote.stderr[-2000:]
    assert remote.stdout == local.stdout
    fs, path = filesystem(f"{tables}/batches.parquet")
    written = pq.read_table(path, filesystem=fs)
    assert written.num_rows == 3 * 30 * 40
    verdicts = pq.read_table(filesystem(f"{tables}/verdicts.parquet")[1], filesystem=fs)
    assert sum(r["status"] == "diverged" for r in verdicts.to_pylist()) == 2
    assert json.loads(remote.stdout)["summary"]["diverged"] == 2


def test_bad_uris_are_bad_input_in_one_paragraph(
    fleet: tuple[Path, str], s3_server: S3Server, tmp_path: Path
) -> None:
    _, base = fleet
    missing = s3_server.uri("no-such-log-dir")
    done = logfork("audit", f"{base}/broker-1", missing, "nosuchscheme://x/y")
    assert done.returncode == 2 and "Traceback" not in done.stderr + done.stdout
    assert f"{missing}: could not be read through its filesystem: does not exist" in done.stdout
    assert "nosuchscheme://x/y: could not be read" in done.stdout
    # Tables that cannot be written: one paragraph naming where, and nothing left behind.
    where = "s3://no-such-bucket/tables"
    done = logfork("audit", "--spark-master", "local[1]", f"{base}/broker-1", "--tables", where)
    assert done.returncode == 2 and done.stdout == ""
    assert f"cannot write the tables to {where}" in done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n\n") == 0
