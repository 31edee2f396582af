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
    assert "listeners=INTERNAL://@ADDR+0@:@PORT+0@\n" in props
    assert "controller.quorum.voters=101@@ADDR+3@:@PORT+30@,102@@ADDR+4@:@PORT+40@" in props
    assert "log.dirs=@WORK@/b1/data\n" in props and "EXTERNAL://" not in props
    assert (
        "listeners=CONTROLLER://@ADDR+3@:@PORT+30@"
        in (out / "nodes/c1/server.properties").read_text()
    )
    assert "@WORK@/b1/server.log" in (out / "nodes/b1/log4j2.properties").read_text()
    assert "NETWORKED=0" in text  # no step cuts a link: no namespaces, no root
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


def _export(tmp_path: Path, steps: list[dict], results: list[StepResult]) -> Path:
    data = json.loads(FINDING.read_text())
    data["steps"] = steps
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data))
    run = _run_dir(tmp_path)
    return export_script(load_schedule(path), results, run, Release("4.0.2"), tmp_path / "x", "t")


def test_links_run_each_node_in_a_namespace_of_its_own(tmp_path: Path) -> None:
    steps = [
        {"kind": "hold-back", "target": "follower-in-isr"},
        {"kind": "slow", "a": 1, "b": 3, "rate": 30},
        {"kind": "cut", "a": 3, "b": "quorum"},
        {"kind": "heal", "a": 1, "b": 3},
        {"kind": "expire-session", "target": "leader"},
        {"kind": "heal"},
    ]
    results = [
        StepResult(0, "hold back", "hold-back", "done", {"follower": 1, "leader": 2}),
        StepResult(1, "slow", "slow", "done", {"a": 1, "b": 3, "rate": 30}),
        StepResult(2, "cut", "cut", "done", {"a": 3, "b": "quorum"}),
        StepResult(3, "heal", "heal", "done", {"a": 1, "b": 3}),
        StepResult(4, "expire", "expire-session", "done", {"broker": 2}),
        StepResult(5, "heal", "heal", "done", {"links": ["1-2", "3-quorum", "2-quorum"]}),
    ]
    text = _export(tmp_path, steps, results).read_text()
    assert "NETWORKED=1" in text and "\nmake_network\n" in text
    assert 'cut_link "${NODE_OF[1]}" "${NODE_OF[2]}"' in text
    assert 'slow_link "${NODE_OF[1]}" "${NODE_OF[3]}" 30' in text
    assert 'cut_link "${NODE_OF[3]}" "quorum"' in text
    assert 'heal_link "${NODE_OF[1]}" "${NODE_OF[3]}"' in text
    assert 'cut_link "${NODE_OF[2]}" quorum session' in text and "is_fenced 2" in text
    assert "\nheal_all\n" in text
    assert 'CONTROLLERS="c1 c2 c3"' in text and "LISTEN[c1]=30" in text
    subprocess.run(["bash", "-n", str(tmp_path / "x" / "reproduce.sh")], check=True)


def test_a_held_alter_partition_is_refused(tmp_path: Path) -> None:
    steps = [{"kind": "hold-alter-partition", "target": "leader"}]
    results = [StepResult(0, "hold", "hold-alter-partition", "done", {"broker": 2})]
    with pytest.raises(ExportError, match="u32"):
        _export(tmp_path, steps, results)
    assert not (tmp_path / "x").exists()  # refused before anything is written


# DumpLogSegments' batch lines, as 3.9 and 4.x print them
BATCH = (
    "baseOffset: {base} lastOffset: {last} count: 5 baseSequence: 0 lastSequence: 4"
    " producerId: -1 producerEpoch: -1 partitionLeaderEpoch: {epoch} isTransactional: false"
    " isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1"
    " size: 100 magic: 2 compresscodec: none crc: {crc} isvalid: true\n"
)
DUMP = (
    "Dumping {f}\nLog starting offset: 0\n"
    + BATCH.format(base=0, last=4, epoch=0, crc=111)
    + BATCH.replace("{base}", "5").replace("{last}", "14")
)


def _agree(tmp_path: Path, b3: tuple[int, int] | None, hw: int) -> str:
    """lib.sh's check_replicas_agree on crafted DumpLogSegments output: b1 and b2 hold epoch 2
    at [5, 14]; b3 holds `b3` (epoch, crc) there, or stops at 5."""
    work = tmp_path / "work"
    for name in ("b1", "b2", "b3"):
        (work / name / "data").mkdir(parents=True)
        (work / name / "data" / "replication-offset-checkpoint").write_text(f"0\n1\nt 0 {hw}\n")
    epoch, crc = b3 or (2, 222)
    (work / "b1-partition-0.txt").write_text(DUMP.format(f="a", epoch=2, crc=222))
    (work / "b2-partition-0.txt").write_text(DUMP.format(f="a", epoch=2, crc=222))
    b3_dump = DUMP.format(f="a", epoch=epoch, crc=crc)
    (work / "b3-partition-0.txt").write_text(
        b3_dump if b3 else b3_dump.rsplit("baseOffset: 5", 1)[0]
    )
    lib = Path(__file__).parents[1] / "export" / "lib.sh"
    script = (
        f"set -eEuo pipefail; PORT_BASE=29090 NETWORKED=0 WORK={work} TOPIC=t;"
        " BROKER_NODES='b1 b2 b3'; declare -A PID INDEX; HERE=.;"
        f" source {lib}; check_replicas_agree 0; cat $WORK/symptoms 2>/dev/null || true"
    )
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout


def test_replicas_that_agree_below_the_high_watermark_show_no_symptom(tmp_path: Path) -> None:
    assert "diverge" not in _agree(tmp_path, None, 15)  # b3 only shorter: catching up
    assert "diverge" not in _agree(tmp_path / "2", (2, 222), 15)  # the same batch everywhere


def test_replicas_that_differ_below_the_high_watermark_diverge(tmp_path: Path) -> None:
    out = _agree(tmp_path, (1, 999), 25)
    assert "b1 and b3 diverge at offset 5, below the high watermark 25" in out
    assert "5 14 2 222 on b1, 5 14 1 999 on b3" in out
    # the same difference above the high watermark is an uncommitted tail, no symptom
    assert "diverge" not in _agree(tmp_path / "2", (1, 999), 5)
