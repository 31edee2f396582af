"""The schedule file format: round trips, and bad files that each name their field."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from basics.errors import LogforkError
from runrecord.schedule import (
    FORMAT,
    BrokerConfig,
    Cluster,
    Schedule,
    ScheduleError,
    TopicConfig,
    dumps,
    load_schedule,
    loads,
    parse_schedule,
    to_dict,
    validate,
    write_schedule,
)
from runrecord.schedule_expect import version_parts
from runrecord.steps.base import QUORUM, Role
from runrecord.steps.disks import MoveDir
from runrecord.steps.elections import ElectPreferred, ElectUnclean
from runrecord.steps.links import Cut, ExpireSession, Heal, HoldBack, Slow
from runrecord.steps.processes import Kill, Outage, Pause, PowerLoss, Restart, Resume
from runrecord.steps.reassign import Reassign
from runrecord.steps.txn import TxnWrite
from runrecord.steps.waits import Wait
from runrecord.steps.writes import Produce
from runrecord.typed import RunRecordError

# Every step kind at least once, roles and ids, KIP-279 scenario 1's cluster shape.
EVERYTHING = Schedule(
    Cluster(
        mode="zk",
        brokers=3,
        replication_factor=2,
        replicas=(2, 1),
        controller=3,
        topic_config=TopicConfig(min_insync_replicas=1, unclean_leader_election_enable=True),
        broker_config=BrokerConfig(replica_lag_time_max_ms=600000, session_timeout_ms=60000),
        node_config={2: BrokerConfig(session_timeout_ms=6000)},
    ),
    seed=42,
    steps=(
        Produce(11),
        HoldBack(),
        Produce(10, "1"),
        ElectPreferred(),
        Produce(5, "1", to=2),
        ExpireSession(2),
        Cut(Role.LEADER, QUORUM),
        Heal(1, QUORUM),
        Heal(),
        Kill(Role.FOLLOWER_IN_ISR, "SIGTERM"),
        Restart(),
        Pause(Role.CONTROLLER),
        Resume(),
        PowerLoss(Role.LEADER, lose=2),
        PowerLoss(1),
        ElectUnclean(),
        Wait(5.5),
    ),
    origin={"explore_seed": 7, "index": 3},
)

GOLDEN = """\
{
  "format": 1,
  "seed": 42,
  "cluster": {
    "mode": "zk",
    "brokers": 3,
    "replication_factor": 2,
    "replicas": [2, 1],
    "controller": 3,
    "topic_config": {"min.insync.replicas": 1, "unclean.leader.election.enable": true},
    "broker_config": {"replica.lag.time.max.ms": 600000, "zookeeper.session.timeout.ms": 60000, \
"replica.high.watermark.checkpoint.interval.ms": 5000},
    "node_config": {"2": {"zookeeper.session.timeout.ms": 6000}}
  },
  "steps": [
    {"kind": "produce", "count": 11, "acks": "all", "to": "leader"},
    {"kind": "hold-back", "target": "follower-in-isr"},
    {"kind": "produce", "count": 10, "acks": "1", "to": "leader"},
    {"kind": "elect-preferred"},
    {"kind": "produce", "count": 5, "acks": "1", "to": 2},
    {"kind": "expire-session", "target": 2},
    {"kind": "cut", "a": "leader", "b": "quorum"},
    {"kind": "heal", "a": 1, "b": "quorum"},
    {"kind": "heal"},
    {"kind": "kill", "target": "follower-in-isr", "signal": "SIGTERM"},
    {"kind": "restart", "target": "any-broker"},
    {"kind": "pause", "target": "controller"},
    {"kind": "resume", "target": "any-broker"},
    {"kind": "power-loss", "target": "leader", "lose": 2},
    {"kind": "power-loss", "target": 1},
    {"kind": "elect-unclean", "target": "out-of-sync-replica"},
    {"kind": "wait", "seconds": 5.5}
  ],
  "origin": {"explore_seed": 7, "index": 3}
}
"""


def test_writer_output_is_stable_one_line_per_step() -> None:
    assert dumps(EVERYTHING) == GOLDEN


def test_round_trip_object_text_object() -> None:
    text = dumps(EVERYTHING)
    assert loads(text) == EVERYTHING
    assert dumps(loads(text)) == text  # and the text is canonical


def test_round_trip_through_a_file(tmp_path: Path) -> None:
    path = write_schedule(tmp_path / "s.json", EVERYTHING)
    assert load_schedule(path) == EVERYTHING


def test_defaults_fill_in_and_are_written_out() -> None:
    minimal = {
        "format": 1,
        "cluster": {"replication_factor": 2},
        "steps": [{"kind": "produce", "count": 3}, {"kind": "kill"}],
    }
    schedule = parse_schedule(minimal)
    assert schedule.seed == 0 and schedule.cluster.replicas == (1, 2)
    assert schedule.steps == (Produce(3, "all", Role.LEADER), Kill(Role.LEADER, "SIGKILL"))
    written = to_dict(schedule)
    # Every setting the model depends on is explicit in what the writer produces.
    assert written["cluster"]["broker_config"] == {
        "replica.lag.time.max.ms": 10000,
        "zookeeper.session.timeout.ms": 6000,
        "replica.high.watermark.checkpoint.interval.ms": 5000,
    }
    assert written["steps"][1] == {"kind": "kill", "target": "leader", "signal": "SIGKILL"}
    assert parse_schedule(written) == schedule


def test_kraft_cluster_round_trip() -> None:
    schedule = Schedule(
        Cluster(mode="kraft", brokers=3, replication_factor=3, controllers=3),
        steps=(Cut(1, Role.CONTROLLER), ExpireSession(Role.LEADER), Heal()),
    )
    data = to_dict(schedule)
    assert data["cluster"]["controllers"] == 3 and "controller" not in data["cluster"]
    assert data["cluster"]["broker_config"]["broker.session.timeout.ms"] == 9000
    assert loads(dumps(schedule)) == schedule


def test_background_partitions_rotate_the_replicas_and_are_written_only_when_set() -> None:
    cluster = Cluster(mode="kraft", brokers=3, replication_factor=3, replicas=(2, 3, 1))
    assert "background_partitions" not in to_dict(Schedule(cluster, steps=()))["cluster"]
    several = Schedule(
        Cluster(
            mode="kraft",
            brokers=3,
            replication_factor=3,
            replicas=(2, 3, 1),
            background_partitions=3,
        ),
        steps=(),
    )
    assert to_dict(several)["cluster"]["background_partitions"] == 3
    assert loads(dumps(several)) == several
    shape = several.cluster
    assert shape.partitions == (0, 1, 2, 3)
    # Partition 1 as it always was (the schedule's replicas); 2 and 3 led by others.
    assert [shape.partition_replicas(p) for p in shape.partitions] == [
        [2, 3, 1],
        [2, 3, 1],
        [3, 1, 2],
        [1, 2, 3],
    ]
    doc = to_dict(several)
    doc["cluster"]["background_partitions"] = 7
    with pytest.raises(ScheduleError, match=r"cluster\.background_partitions: must be an integer"):
        loads(json.dumps(doc))


def test_a_move_between_log_dirs_round_trips_and_needs_two_log_dirs() -> None:
    jbod = Schedule(
        Cluster(replication_factor=2, log_dirs=2),
        steps=(MoveDir(), MoveDir(Role.LEADER, throttle=True)),
    )
    doc = to_dict(jbod)
    assert doc["cluster"]["log_dirs"] == 2
    assert doc["steps"] == [{"kind": "move-dir", "target": "follower-in-isr"},
                            {"kind": "move-dir", "target": "leader", "throttle": True}]  # fmt: skip
    assert loads(dumps(jbod)) == jbod
    assert "log_dirs" not in to_dict(Schedule(Cluster(replication_factor=2)))["cluster"]
    with pytest.raises(ScheduleError, match=r"steps\[0\]\.kind: a move between log dirs needs"):
        validate(Schedule(Cluster(replication_factor=2), steps=(MoveDir(),)))
    doc["cluster"]["log_dirs"] = 3
    with pytest.raises(ScheduleError, match=r"cluster\.log_dirs: must be an integer from 1 to 2"):
        loads(json.dumps(doc))


def test_a_reassignment_round_trips_and_needs_kraft_and_a_change() -> None:
    kraft = Cluster(mode="kraft", brokers=4, replication_factor=3)
    steps = (Reassign(add=Role.ANY_BROKER, remove=Role.LEADER, throttle=True), Reassign(prefer=3))
    schedule = Schedule(kraft, steps=steps)
    assert to_dict(schedule)["steps"] == [
        {"kind": "reassign", "add": "any-broker", "remove": "leader", "throttle": True},
        {"kind": "reassign", "prefer": 3},
    ]
    assert loads(dumps(schedule)) == schedule
    assert steps[0].describe() == "reassign: add any broker, remove the leader, throttled"
    with pytest.raises(ScheduleError, match=r"steps\[0\]\.kind: a reassignment step needs KRaft"):
        validate(Schedule(Cluster(brokers=4, replication_factor=3), steps=steps[1:]))
    with pytest.raises(ScheduleError, match=r"steps\[0\]: a reassignment names at least one"):
        validate(Schedule(kraft, steps=(Reassign(),)))
    with pytest.raises(ScheduleError, match=r"steps\[0\]\.add: broker 5 does not exist"):
        loads(json.dumps({**to_dict(schedule), "steps": [{"kind": "reassign", "add": 5}]}))


def test_a_slow_link_and_a_filler_round_trip_and_are_checked() -> None:
    kraft = Cluster(mode="kraft", brokers=3, replication_factor=3)
    steps = (Slow(1, 3, 30), Produce(10, "1", filler=700), Heal())
    schedule = Schedule(kraft, steps=steps)
    assert to_dict(schedule)["steps"][:2] == [
        {"kind": "slow", "a": 1, "b": 3, "rate": 30},
        {"kind": "produce", "count": 10, "acks": "1", "to": "leader", "filler": 700},
    ]
    assert loads(dumps(schedule)) == schedule
    assert steps[0].describe() == "slow broker 1 to broker 3 to 30 KB/s"
    assert steps[1].describe() == "produce 10 (acks=1) to the leader after a 700 KB filler"
    doc = to_dict(schedule)
    doc["steps"][0]["rate"] = 0
    with pytest.raises(ScheduleError, match=r"steps\[0\]\.rate: must be a rate in KB/s"):
        loads(json.dumps(doc))
    doc["steps"][0]["rate"], doc["steps"][1]["filler"] = 30, 901
    with pytest.raises(ScheduleError, match=r"steps\[1\]\.filler: must be a number of KB"):
        loads(json.dumps(doc))


def test_a_spanning_transactional_write_round_trips_and_is_checked() -> None:
    kraft = Cluster(mode="kraft", brokers=3, replication_factor=3, background_partitions=2)
    schedule = Schedule(kraft, steps=(TxnWrite(2, partitions=3), TxnWrite(1)))
    doc = to_dict(schedule)
    assert doc["steps"] == [
        {"kind": "txn-write", "count": 2, "partitions": 3},
        {"kind": "txn-write", "count": 1},
    ]
    assert loads(dumps(schedule)) == schedule
    assert schedule.steps[0].spans == (0, 1, 2) and schedule.steps[1].spans == (0,)
    assert schedule.steps[0].describe() == "transactional write of 2 to each of partitions 0-2"
    doc["steps"][1]["partitions"] = 1  # the default, read as nothing
    assert loads(json.dumps(doc)) == schedule
    doc["steps"][0]["partitions"] = 4
    with pytest.raises(ScheduleError, match=r"steps\[0\]\.partitions: the topic has 3 partitions"):
        loads(json.dumps(doc))
    doc["steps"][0]["partitions"] = 0
    with pytest.raises(ScheduleError, match=r"steps\[0\]\.partitions: must be a number"):
        loads(json.dumps(doc))


def test_validate_checks_schedules_built_in_code() -> None:
    assert validate(EVERYTHING) == EVERYTHING
    bad = Schedule(Cluster(), steps=(ElectUnclean(),))  # unclean elections are disabled
    with pytest.raises(ScheduleError, match=r"steps\[0\]\.kind: an unclean election needs"):
        validate(bad)


def _doc(**changes) -> dict:
    doc = json.loads(dumps(EVERYTHING))
    for path, value in changes.items():
        *parents, last = path.split("/")
        node = doc
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        if value is _DELETE:
            del node[int(last) if last.isdigit() else last]
        elif last.isdigit():
            node[int(last)] = value
        else:
            node[last] = value
    return doc


_DELETE = object()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"format": _DELETE}, "format: missing (this logfork reads format 1)"),
        ({"seed": -1}, "seed: must be a non-negative integer"),
        ({"seed": "x"}, "seed: must be a non-negative integer"),
        ({"cluster": _DELETE}, "cluster: missing"),
        ({"cluster": []}, "cluster: must be an object, not a list"),
        ({"cluster/mode": "raft"}, 'cluster.mode: must be "zk" or "kraft"'),
        ({"cluster/brokers": 0}, "cluster.brokers: must be an integer from 1 to 9"),
        (
            {"cluster/replication_factor": 4},
            "cluster.replication_factor: must be an integer from 1 to 3",
        ),
        ({"cluster/replication_factor": _DELETE}, "cluster.replication_factor: missing"),
        ({"cluster/replicas": [1, 1]}, "cluster.replicas: must be a list of distinct broker ids"),
        ({"cluster/replicas": [1, 2, 3]}, "cluster.replicas: must list replication_factor (2)"),
        ({"cluster/controller": 5}, "cluster.controller: must be an integer from 1 to 3"),
        ({"cluster/controllers": 3}, "cluster.controllers: KRaft mode only"),
        ({"cluster/colour": "red"}, "cluster.colour: unknown field"),
        (
            {"cluster/topic_config/min.insync.replicas": 3},
            "cluster.topic_config.min.insync.replicas: must be an integer from 1 to 2",
        ),
        (
            {"cluster/topic_config/unclean.leader.election.enable": "yes"},
            "cluster.topic_config.unclean.leader.election.enable: must be true or false",
        ),
        (
            {"cluster/topic_config/retention.ms": 5},
            "cluster.topic_config.retention.ms: unknown field",
        ),
        (
            {"cluster/broker_config/broker.session.timeout.ms": 9000},
            "cluster.broker_config.broker.session.timeout.ms: a KRaft setting, but the "
            "cluster's mode is zk (use zookeeper.session.timeout.ms)",
        ),
        (
            {"cluster/broker_config/replica.lag.time.max.ms": 0},
            "cluster.broker_config.replica.lag.time.max.ms: must be an integer (positive)",
        ),
        ({"cluster/node_config": {"b2": {}}}, "cluster.node_config.b2: keys must be broker ids"),
        ({"steps": {}}, "steps: must be a list, not an object"),
        ({"steps": _DELETE}, "steps: missing"),
        ({"steps/3": "produce"}, "steps[3]: must be an object, not a string"),
        ({"steps/0/count": 0}, "steps[0].count: must be a positive integer (at most 100000)"),
        ({"steps/0/count": True}, "steps[0].count: must be a positive integer"),
        ({"steps/0/count": _DELETE}, "steps[0].count: missing"),
        ({"steps/0/acks": "2"}, 'steps[0].acks: must be "all" or "1"'),
        ({"steps/0/acks": 1}, 'steps[0].acks: must be "all" or "1"'),
        (
            {"steps/0/batch": 1},
            "steps[0].batch: unknown field (expected one of: kind, count, acks, to, filler)",
        ),
        ({"steps/1/kind": "hold"}, "steps[1].kind: unknown step kind 'hold'"),
        ({"steps/1/kind": _DELETE}, "steps[1].kind: missing"),
        ({"steps/5/target": 7}, "steps[5].target: broker 7 does not exist (brokers are 1 to 3)"),
        (
            {"steps/5/target": "the leader"},
            "steps[5].target: must be a broker id or one of: leader",
        ),
        ({"steps/6/b": "zookeeper"}, "steps[6].b: must be a broker id or one of: leader, "),
        ({"steps/7/b": _DELETE}, "steps[7]: a heal names both ends of a link (a and b) or neither"),
        ({"steps/6/b": "leader"}, "steps[6].b: a link needs two different ends"),
        ({"steps/9/signal": "SIGINT"}, 'steps[9].signal: must be "SIGKILL" or "SIGTERM"'),
        ({"steps/13/lose": 0}, "steps[13].lose: must be a positive integer (batches) or null"),
        ({"steps/16/seconds": 0}, "steps[16].seconds: must be a number of seconds above 0"),
        (
            {"cluster/topic_config/unclean.leader.election.enable": False},
            "steps[15].kind: an unclean election needs cluster.topic_config."
            "unclean.leader.election.enable set to true",
        ),
        ({"origin": {"list": [1]}}, "origin: must be an object of plain values"),
        ({"extra": 1}, "extra: unknown field"),
    ],
)
def test_bad_schedule_names_the_field_and_the_file(changes: dict, message: str) -> None:
    with pytest.raises(ScheduleError) as info:
        parse_schedule(_doc(**changes), "bad.json")
    text = str(info.value)
    assert f"bad.json: {message}" in text, text


def test_an_outage_takes_a_filesystem_model_only() -> None:
    doc = to_dict(Schedule(Cluster(replication_factor=2), steps=(Outage("ordered", 7),)))
    assert doc["steps"] == [{"kind": "outage", "model": "ordered", "seed": 7}]
    assert parse_schedule(doc).steps == (Outage("ordered", 7),)
    assert parse_schedule({**doc, "steps": [{"kind": "outage"}]}).steps == (Outage(),)
    assert Outage().model == "unsynced" and Outage().needs_disks
    doc["steps"][0]["model"] = "cut"
    with pytest.raises(ScheduleError, match=r"steps\[0\]\.model: must be one of unsynced, torn"):
        parse_schedule(doc)


def test_controller_role_in_kraft_only_as_a_cut_end() -> None:
    doc = to_dict(Schedule(Cluster(mode="kraft", replication_factor=2), steps=(Kill(1),)))
    doc["steps"][0]["target"] = "controller"
    with pytest.raises(ScheduleError, match=r"steps\[0\]\.target: in KRaft mode the controller"):
        parse_schedule(doc)
    doc["steps"] = [{"kind": "cut", "a": 1, "b": "controller"}]
    assert parse_schedule(doc).steps == (Cut(1, Role.CONTROLLER),)


def test_every_problem_is_reported_at_once() -> None:
    doc = _doc(**{"steps/0/count": -5, "steps/2/acks": "none", "cluster/mode": "raft"})
    with pytest.raises(ScheduleError) as info:
        parse_schedule(doc, "s.json")
    fields = [path for path, _ in info.value.problems]
    assert fields == ["cluster.mode", "steps[0].count", "steps[2].acks"]
    assert str(info.value).startswith("bad schedule s.json:\n  s.json: cluster.mode:")


@pytest.mark.parametrize("version", [2, 0, "1", 1.0, None])
def test_unknown_format_version(version) -> None:
    doc = _doc(format=version)
    with pytest.raises(ScheduleError) as info:
        parse_schedule(doc, "future.json")
    text = str(info.value)
    if version is None:
        assert text == f"future.json: format: missing (this logfork reads format {FORMAT})"
    else:
        assert text == (
            f"future.json: format: unknown format version {version!r}: this logfork reads "
            "version 1 only (a newer logfork wrote this file?)"
        )


def test_files_that_are_not_schedules(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(ScheduleError, match=r"nope\.json: cannot read the file"):
        load_schedule(missing)
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": 1,\n  "steps": [}')
    with pytest.raises(ScheduleError, match=r"broken\.json: not JSON: .* at line 2, column"):
        load_schedule(broken)
    listed = tmp_path / "list.json"
    listed.write_text("[]")
    with pytest.raises(ScheduleError, match=r"list\.json: a schedule is a JSON object, not a list"):
        load_schedule(listed)


def test_schedule_errors_are_user_errors() -> None:
    error = ScheduleError([("steps[0].count", "must be a positive integer")], "f.json")
    assert isinstance(error, LogforkError) and error.exit_code == 2
    assert isinstance(error, RunRecordError)  # a run record that cannot be read
    assert str(error) == "f.json: steps[0].count: must be a positive integer"


def test_the_documented_example_is_the_example_file() -> None:
    """docs/schedules.md shows docs/schedules/kip-279-s1-equal.json, which replays as is."""
    docs = Path(__file__).parents[2] / "docs"
    text = (docs / "schedules.md").read_text()
    shown = text.split("```json\n", 1)[1].split("```", 1)[0]
    example = docs / "schedules" / "kip-279-s1-equal.json"
    assert loads(shown) == load_schedule(example)
    assert dumps(load_schedule(example)) == example.read_text()


def test_kraft_has_no_per_broker_session_timeout() -> None:
    doc = {
        "format": 1,
        "cluster": {
            "mode": "kraft",
            "replication_factor": 2,
            "broker_config": {"broker.session.timeout.ms": 6000},
            "node_config": {"2": {"broker.session.timeout.ms": 3000}},
        },
        "steps": [],
    }
    with pytest.raises(ScheduleError) as err:
        parse_schedule(doc)
    assert "cluster.node_config.2.broker.session.timeout.ms: KRaft has one session" in str(
        err.value
    )


def test_every_finding_is_a_valid_schedule_with_its_write_up() -> None:
    findings = Path(__file__).parents[2] / "docs" / "findings"
    files = sorted(findings.glob("*.json"))
    assert files
    for path in files:
        validate(load_schedule(path))
        first = path.with_suffix(".md").read_text().splitlines()[0]
        header = re.fullmatch(
            r"bad: ([\d.]+) good: ([\d.]+|none) mode: (zk|kraft) "
            r"kind: (fixed|regression|unfixed) jira: (KAFKA-\d+|none)",
            first,
        )
        assert header, (path, first)
        bad, good, _, kind, _ = header.groups()
        # good: the first fixed release (fixed), the last before the bug (regression), or
        # none (unfixed: a bug still open has no fixing release, docs/findings/KAFKA-20716.md)
        if kind == "unfixed":
            assert good == "none", path
        else:
            assert good != "none", path
            newer = version_parts(good) > version_parts(bad)
            assert newer == (kind == "fixed"), (path, kind, bad, good)


def test_every_finding_has_its_evidence_folder() -> None:
    """docs/findings/<ID>/evidence/: log lines, Kafka's own dumps, the nodes' configs; and
    where the write-up says a script reproduces it, the script and its recorded runs."""
    findings = Path(__file__).parents[2] / "docs" / "findings"
    for path in sorted(findings.glob("*.json")):
        evidence = findings / path.stem / "evidence"
        assert (evidence / "log-lines.txt").stat().st_size > 0, evidence
        assert any((evidence / "dumps").iterdir()), evidence
        assert any((evidence / "configs").glob("*.properties")), evidence
        reproduce = findings / path.stem / "reproduce"
        if f"({path.stem}/reproduce/)" in path.with_suffix(".md").read_text():
            assert (reproduce / "reproduce.sh").is_file(), reproduce
            assert len((reproduce / "runs.tsv").read_text().splitlines()) > 1, reproduce
