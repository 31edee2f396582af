"""The `logfork` command's own behaviour: help, listing, and errors as one paragraph.

These run the real command in a subprocess; the engine-down case points DOCKER_HOST at a
socket where nothing listens, which is exactly what a stopped engine looks like.
"""

import os
import re
import subprocess
import sys

import pytest

from runrecord.outcome import Outcome
from runrecord.rundir import RunDir


def logfork(*args, env=None, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "suites.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def assert_one_paragraph_error(result, *fragments):
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stderr.startswith("logfork: ")
    for fragment in fragments:
        assert fragment in result.stderr


def test_help_lists_commands():
    result = logfork("--help")
    assert result.returncode == 0
    # Each command on a line of its own, with the start of its own description.
    for command, says in (
        ("run", "run one KIP scenario against a fresh cluster"),
        ("list", "list the scenarios"),
        ("audit", "judge the logs in broker log dirs"),
        ("report", "HTML reports of run directories"),
        ("prepare", "build the base images and fetch the jars"),
        ("flakes", "run scenarios N times on one release"),
        ("bisect", "find the first release that fixed (or broke)"),
        ("atlas", "run scenarios over releases"),
        ("replay", "run one fault schedule (a JSON file)"),
        ("explore", "draw, rank, run and shrink fault schedules"),
        ("clean", "remove containers and networks of runs that are gone"),
    ):
        assert re.search(rf"^    {command} +{re.escape(says)}", result.stdout, re.M), command


def test_list_names_every_scenario():
    from suites.registry import SCENARIOS

    result = logfork("list")
    assert result.returncode == 0
    for scenario_id in SCENARIOS:
        assert scenario_id in result.stdout


def test_unknown_scenario():
    assert_one_paragraph_error(
        logfork("run", "kip-999", "--kafka-version", "3.9.2"),
        "There is no scenario 'kip-999'",
        "smoke",
    )


def test_release_that_does_not_exist():
    result = logfork("run", "smoke", "--kafka-version", "9.9.9")
    assert_one_paragraph_error(result, "Kafka 9.9.9")
    # It says which versions exist (from Maven Central, or the cache when offline).
    assert "3.9.2" in result.stderr


def test_not_a_version():
    assert_one_paragraph_error(
        logfork("run", "smoke", "--kafka-version", "latest"), "'latest' is not a Kafka version"
    )


@pytest.mark.parametrize("command", [["prepare"], ["run", "smoke"]])
def test_docker_engine_not_running(tmp_path, command):
    dead = f"unix://{tmp_path}/no-engine.sock"
    runs = tmp_path / "runs"  # never the user's runs/
    if command[0] == "run":
        command = [*command, "--out", str(runs)]
    result = logfork(*command, "--kafka-version", "3.9.2", env={"DOCKER_HOST": dead})
    assert_one_paragraph_error(result, "No Docker engine answers", "dockerd")
    if command[0] == "run":
        # Recorded as a run that could not start, with its reason, not as unreadable.
        (run_dir,) = runs.iterdir()
        verdict = RunDir(run_dir).verdict()
        assert verdict is not None and verdict.outcome is Outcome.SETUP_FAILED
        assert "No Docker engine answers" in verdict.summary
        assert not (run_dir / "error.txt").exists()


def test_pytest_plugin_rejects_unknown_release(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "suites/test_smoke.py",
            "--kafka-version",
            "9.9.9",
            "-p",
            "no:cacheprovider",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2
    assert "Kafka 9.9.9 does not exist" in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_readme_commands_are_true():
    """The README's two commands: the main job names a real scenario, and the test command
    is the one .ci/run extracts and runs."""
    from pathlib import Path

    from basics.releases import NEWEST_4
    from suites.registry import SCENARIOS

    readme = (Path(__file__).parent.parent / "README.md").read_text().splitlines()
    main_job = next(line for line in readme if line.startswith(".venv/bin/logfork run "))
    assert main_job.split()[2] in SCENARIOS
    marker = readme.index("<!-- test-command -->")
    assert readme[marker + 1] == "```sh"
    assert readme[marker + 2].startswith(".venv/bin/pytest ")
    assert "--kafka-version 1.1.1" in readme[marker + 2]  # a release before the fixes
    # ZooKeeper mode's last release (its KRaft mode is in tox -e matrix: CI's hour)
    assert "--kafka-version 3.9.2:zk " in readme[marker + 2]
    assert f"--kafka-version {NEWEST_4} " in readme[marker + 2]  # the newest release
    extracted = subprocess.run(
        ["awk", "/<!-- test-command -->/{getline; getline; print; exit}", "README.md"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent.parent,
        check=True,
    ).stdout.strip()
    assert extracted == readme[marker + 2]
