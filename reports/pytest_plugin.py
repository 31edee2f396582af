"""pytest plugin: ``--logfork-report DIR`` writes a report for every run directory the session
wrote, and ``DIR/index.html`` over them (what CI publishes).

Run directories are found under the fixtures plugin's ``--logfork-runs`` folder (default
``runs/``): those holding a run.json written since the session started. The reports are
written once the tests are over, by the controller only under pytest-xdist. A report that
cannot be written fails the session with one paragraph saying why; JUnit XML and the
other reporters are untouched.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from reports.sources import RUN_JSON, is_run_dir

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
        value = config.getoption("logfork_runs")
    except ValueError:  # the fixtures plugin is not loaded
        value = None
    return Path(value or "runs")


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
) -> tuple[int, Path]:
    """Reports of `run_dirs` and the index into `out`. Returns (reports, index path)."""
    from reports.pipeline import run_pipeline
    from reports.render import write_index, write_reports
    from reports.sources import run_source, unique_key

    if not run_dirs:
        return 0, write_index(out, [])
    taken: set[str] = set()
    sources = [run_source(d, unique_key(d.name, taken)) for d in run_dirs]
    result = run_pipeline(sources, master=master)
    paths = write_reports(result, out)
    return len(paths) - 1, paths[-1]


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    out = config.getoption("logfork_report")
    if not out or hasattr(config, "workerinput"):
        return
    run_dirs = session_run_dirs(runs_root(config), config.stash[_STARTED])
    try:
        count, index = write_session_reports(
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
    config.stash[_OUTCOME] = ("ok", f"logfork reports: {count} run(s), index {index}")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    outcome = config.stash.get(_OUTCOME, None)
    if outcome is None:
        return
    kind, text = outcome
    terminalreporter.section("logfork reports")
    terminalreporter.write_line(text, red=kind == "error", bold=kind == "error")
