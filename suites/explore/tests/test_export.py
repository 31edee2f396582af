"""The exported script from a crafted run directory: the nodes' settings moved onto
loopback, the steps as the replay resolved them, and a clear refusal where a step needs
logfork's crash filesystem. Running a script against real brokers is suites/test_explore.py's."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from basics.paths import PROJECT_ROOT
from basics.releases import Release
from runrecord.replay import StepResult
from runrecord.schedule import load_schedule
from suites.explore.export.registry import ExportError
from suites.explore.export.script import export_script

FINDING = PROJECT_ROOT / "docs" / "findings" / "KAFKA-19522.json"

BROKER = """node.id={id}
process.roles=broker
listeners=INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:19092
advertised.listeners=INTERNAL://b{id}:9092,EXTERNAL://127.0.0.1:4700{id}
controller.quorum.voters=101@c1:9093,102@c2:9093,103@c3:9093
log.dirs=/logfork/data
broker.session.timeout.ms=6000
"""
CONTROLLER = """node.id={id}
process.roles=controller
listeners=CONTROLLER://0.0.0.0:9093
controller.quorum.voters=101@c1:9093,102@c2:9093,103@c3:9093
log.dirs=/logfork/data
"""
FORMAT = (
    "java -cp '/opt/kafka/libs/*' kafka.tools.StorageTool format -t ID"
    " -c /logfork/config/server.properties --feature eligible.leader.replicas.version=1"
)
START = f"""#!/bin/sh
set -e
if [ ! -f /logfork/data/meta.properties ]; then
  {FORMAT}
fi
exec java -cp '/opt/kafka/libs/*' kafka.Kafka /logfork/config/server.properties
"""


def _run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "replay-KAFKA-19522-4.0.2-kraft-1"
    for name, text in [(f"b{i}", BROKER.format(id=i)) for i in (1, 2, 3)] + [
        (f"c{i}", CONTROLLER.format(id=100 + i)) for i in (1, 2, 3)
    ]:
        conf = run / "nodes" / name / "config"
        conf.mkdir(parents=True)
        (conf / "server.properties").write_text(text)
        (conf / "log4j2.properties").write_text(
            "appender.file.fileName = /logfork/logs/server.log\n"
        )
        (conf / "start.sh").write_text(START)
    return run


def _steps() -> list[StepResult]:
    return [
        StepResult(0, "kill the leader", "kill", "done", {"broker": 2}),
        StepResult(1, "kill broker 1", "kill", "done", {"broker": 1}),
        StepResult(2, "restart broker 1", "restart", "done", {"broker": 1}),
    ]


def test_a_replay_becomes_a_script_on_loopback(tmp_path: Path) -> None:
    out = tmp_path / "export"
    script = export_script(
        load_schedule(FINDING), _steps(), _run_dir(tmp_path), Release("4.0.2"), out, "t"
    )
    text = script.read_text()
    assert 'kill -KILL "${PID[${NODE_OF[2]}]}"' in text
    assert 'wait_until "broker 1 fenced (its session ended)" 120 is_fenced 1' in text
    assert "--replica-assignment 2:1" in text
    assert "--feature eligible.leader.replicas.version=1" in text
    props = (out / "nodes" / "b1" / "server.properties").read_text()
    assert "listeners=INTERNAL://127.0.0.1:@PORT+0@\n" in props
    assert "controller.quorum.voters=101@127.0.0.1:@PORT+30@,102@127.0.0.1:@PORT+40@" in props
    assert "log.dirs=@WORK@/b1/data\n" in props and "EXTERNAL://" not in props
    assert (
        "listeners=CONTROLLER://127.0.0.1:@PORT+30@"
        in (out / "nodes/c1/server.properties").read_text()
    )
    assert "@WORK@/b1/server.log" in (out / "nodes/b1/log4j2.properties").read_text()
    # bash parses it
    subprocess.run(["bash", "-n", str(script)], check=True)


def test_a_step_that_needs_the_crash_filesystem_is_refused(tmp_path: Path) -> None:
    data = json.loads(FINDING.read_text())
    data["steps"] = [{"kind": "power-loss", "target": "leader"}]
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data))
    steps = [StepResult(0, "power loss", "power-loss", "done", {"broker": 2})]
    with pytest.raises(ExportError, match="crash-simulating filesystem"):
        export_script(
            load_schedule(path),
            steps,
            _run_dir(tmp_path),
            Release("4.0.2"),
            tmp_path / "x",
            "t",
        )


def test_a_cut_is_refused_until_scripts_build_namespaces(tmp_path: Path) -> None:
    data = json.loads(FINDING.read_text())
    data["steps"] = [{"kind": "cut", "a": 1, "b": 2}]
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data))
    steps = [StepResult(0, "cut 1 from 2", "cut", "done", {"a": 1, "b": 2})]
    out = tmp_path / "x"
    with pytest.raises(ExportError, match="network namespace per broker"):
        export_script(load_schedule(path), steps, _run_dir(tmp_path), Release("4.0.2"), out, "t")
    assert not out.exists()  # refused before anything is written
