"""pytest plugin: ``--logfork-report DIR`` writes a report for every run directory the session
wrote, and ``DIR/index.html`` over them (what CI publishes).

Run directories are found where the fixtures plugin puts them (``--logfork-runs``, else the
session's temporary directory): those holding a run.json written since the session
started. The reports are written once the tests are over, by the controller only under
pytest-xdist, through the Spark engine; the local engine then audits the same runs, and an
audit on which the two engines disagree fails the session. A report that cannot be written
fails the session with one paragraph saying why; JUnit XML and the other reporters are
untouched.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from runrecord.rundir import RUN_JSON, is_run_dir

_STARTED = pytest.StashKey[float]()
_OUTCOME = pytest.StashKey[tuple[str, str]]()
# run.json is rewritten when a run ends; a second of slack covers coarse file times.
SLACK_SECONDS = 1.0


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("logfork-report", "logfork: reports")
    group.addoption(
        "--logfork-report",
        default=None,
        metavar="DIR",
        help="write an HTML report of every scenario run of this session, and index.html, into DIR",
    )
    group.addoption(
        "--logfork-spark-master",
        default=None,
        metavar="URL",
        help="Spark master for the reports' pipeline (default: $LOGFORK_SPARK_MASTER, else "
        "local[*])",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_STARTED] = time.time()


def runs_root(config: pytest.Config) -> Path:
    try:
        from fixtures.pytest_plugin import runs_root as fixtures_runs_root

        return fixtures_runs_root(config)
    except ValueError:  # the fixtures plugin is not loaded
        return Path("runs")


def session_run_dirs(root: Path, since: float) -> list[Path]:
    if not root.is_dir():
        return []
    found = []
    for child in sorted(root.iterdir()):
        try:
            if is_run_dir(child) and (child / RUN_JSON).stat().st_mtime >= since - SLACK_SECONDS:
                found.append(child)
        except OSError:
            continue
    return found


def write_session_reports(
    run_dirs: list[Path], out: Path, master: str | None = None
) -> tuple[int, Path, list[str]]:
    """Reports of `run_dirs` and the index into `out`. Returns (reports, index path, the
    runs whose audit the local engine judged otherwise than Spark)."""
    from reports.pipeline import run_pipeline
    from reports.render import write_index, write_reports
    from reports.sources import run_sources

    sources, _ = run_sources(run_dirs)
    if not sources:
        return 0, write_index(out, []), []
    result = run_pipeline(sources, master=master)
    paths = write_reports(result, out)
    local = run_pipeline(sources, engine="local")
    differ = [
        r.key
        for r, other in zip(result.runs, local.runs, strict=True)
        if r.audit.to_dict() != other.audit.to_dict()
    ]
    return len(paths) - 1, paths[-1], differ


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    out = config.getoption("logfork_report")
    if not out or hasattr(config, "workerinput"):
        return
    run_dirs = session_run_dirs(runs_root(config), config.stash[_STARTED])
    try:
        count, index, differ = write_session_reports(
            run_dirs, Path(out), config.getoption("logfork_spark_master")
        )
    except Exception as exc:  # noqa: BLE001 - reported as one paragraph, the session fails
        from reports.cli import error_reason

        config.stash[_OUTCOME] = (
            "error",
            f"logfork reports could not be written to {out}: {error_reason(exc)}",
        )
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return
    if differ:
        config.stash[_OUTCOME] = (
            "error",
            f"logfork: the local and Spark engines audit {len(differ)} run(s) differently: "
            f"{', '.join(differ)}",
        )
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return
    config.stash[_OUTCOME] = (
        "ok",
        f"logfork reports: {count} run(s), index {index}; both engines agree on every audit",
    )


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    outcome = config.stash.get(_OUTCOME, None)
    if outcome is None:
        return
    kind, text = outcome
    terminalreporter.section("logfork reports")
    terminalreporter.write_line(text, red=kind == "error", bold=kind == "error")
