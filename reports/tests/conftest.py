"""Crafted run directories and one pipeline run over them, shared by the report tests.

Spark start-up is the cost that matters, so every test that needs the pipeline uses the
one session (local[2]) through `pipeline_result` or calls `run_pipeline` with `MASTER`;
the session stops when the tests are over.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reports.pipeline import run_pipeline
from reports.render import write_reports
from reports.results import PipelineResult
from reports.sources import run_source
from reports.spark import stop_session
from runrecord.outcome import Outcome
from testsupport import runs as crafted

MASTER = "local[2]"
KIP_RUN = "kip-279-s1-equal-1.1.1-zk-20261122-000000-aaaaaa"
HOSTILE_RUN = "kip-279-s1-equal-2.0.1-zk-20261122-000100-bbbbbb"
SMOKE_RUN = "smoke-3.9.2-kraft-20261122-000200-cccccc"
NOT_REACHED_RUN = "smoke-1.1.1-zk-20261122-000300-dddddd"
DEPARTS_RUN = "kip-279-s1-long-1.1.1-zk-20261122-000400-eeeeee"
SETUP_FAILED_RUN = "smoke-3.9.2-zk-20261122-000500-ffffff"
RUNS = [KIP_RUN, HOSTILE_RUN, SMOKE_RUN, NOT_REACHED_RUN, DEPARTS_RUN, SETUP_FAILED_RUN]


@pytest.fixture(scope="session", autouse=True)
def _spark_stops() -> Iterator[None]:
    yield
    stop_session()


@pytest.fixture(scope="session")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    crafted.kip279_s1_equal(root / KIP_RUN)
    crafted.kip279_s1_equal(
        root / HOSTILE_RUN, release="2.0.1", hostile=True, start=crafted.T0 + 100
    )
    crafted.consistent_run(root / SMOKE_RUN, mode="kraft", start=crafted.T0 + 200)
    crafted.consistent_run(
        root / NOT_REACHED_RUN,
        release="1.1.1",
        outcome=Outcome.NOT_REACHED,
        start=crafted.T0 + 300,
    )
    crafted.consistent_run(
        root / DEPARTS_RUN,
        scenario="kip-279-s1-long",
        release="1.1.1",
        outcome=Outcome.DEPARTS,
        expected=Outcome.DEPARTS,
        start=crafted.T0 + 400,
    )
    crafted.consistent_run(
        root / SETUP_FAILED_RUN,
        release="3.9.2",
        outcome=Outcome.SETUP_FAILED,
        start=crafted.T0 + 500,
    )
    return root


@pytest.fixture(scope="session")
def pipeline_result(runs_dir: Path) -> PipelineResult:
    sources = [run_source(runs_dir / k, k) for k in RUNS]
    return run_pipeline(sources, master=MASTER)


@pytest.fixture(scope="session")
def site(pipeline_result: PipelineResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    write_reports(pipeline_result, out)
    return out
