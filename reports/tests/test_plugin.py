"""`--logfork-report DIR` in a real pytest session (a subprocess), with JUnit XML beside it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from importlib import metadata
from pathlib import Path

from reports.pytest_plugin import session_run_dirs
from reports.tests.conftest import MASTER
from testsupport import runs as crafted

SCENARIO_TEST = """
from pathlib import Path

from testsupport import runs as crafted


def test_scenario(logfork_runs: Path) -> None:
    crafted.kip279_s1_equal(logfork_runs / "kip-279-s1-equal-1.1.1-zk-20261122-101010-eeeeee")
"""


def plugin_args() -> list[str]:
    """`-p reports.pytest_plugin` unless an installed entry point loads it already (pytest
    refuses a plugin registered twice)."""
    loaded = any(
        ep.value == "reports.pytest_plugin" for ep in metadata.entry_points(group="pytest11")
    )
    return [] if loaded else ["-p", "reports.pytest_plugin"]


def test_session_reports_and_junit(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    old = crafted.consistent_run(runs / "smoke-3.9.2-zk-old")
    past = time.time() - 3600
    os.utime(old / "run.json", (past, past))
    (tmp_path / "test_scenario.py").write_text(textwrap.dedent(SCENARIO_TEST))
    out, junit = tmp_path / "site", tmp_path / "junit.xml"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            *plugin_args(),
            "-p",
            "no:cacheprovider",
            "test_scenario.py",
            f"--logfork-runs={runs}",
            f"--logfork-report={out}",
            f"--junitxml={junit}",
            f"--logfork-spark-master={MASTER}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "logfork reports: 1 run(s)" in proc.stdout
    reports = sorted(p.name for p in out.glob("*.html"))
    assert reports == ["index.html", "kip-279-s1-equal-1.1.1-zk-20261122-101010-eeeeee.html"]
    assert "t-0 diverged at offset 11" in (out / "index.html").read_text()
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "1" and suite.get("failures") == "0"


def test_only_runs_of_this_session_are_picked(tmp_path: Path) -> None:
    crafted.consistent_run(tmp_path / "a")
    old = crafted.consistent_run(tmp_path / "b")
    os.utime(old / "run.json", (1, 1))
    (tmp_path / "not-a-run").mkdir()
    assert [p.name for p in session_run_dirs(tmp_path, time.time() - 60)] == ["a"]
    assert session_run_dirs(tmp_path / "missing", 0) == []
