"""`logfork replay` and `logfork explore` on real brokers.

The replay runs the schedule docs/schedules.md shows (KIP-279 scenario 1, n == 20): the
replicas diverge at offset 11 before 2.0 (KAFKA-6361) and converge from 2.0, as its
`expect` declares, and the model says so beside the brokers. In KRaft a failover schedule
must hold. The explore runs two schedules of seed 1 on a release before the fix and shrinks
the first finding; on a 4.x KRaft release two schedules of seed 1 find nothing: the command
CI keeps working."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from runrecord.explore import EXPLORE_JSON
from runrecord.rundir import RunDir
from runrecord.schedule import load_schedule
from suites import cli

SCHEDULES = Path(__file__).parent.parent / "docs" / "schedules"
EXAMPLE = SCHEDULES / "kip-279-s1-equal.json"
KRAFT_EXAMPLE = SCHEDULES / "kraft-failover.json"
FINDINGS = SCHEDULES.parent / "findings"


def _printed(text: str, label: str) -> list[str]:
    return re.findall(rf"^{label}: (.+)$", text, flags=re.MULTILINE)


def _agreed(out: str) -> bool:
    """The model's own prediction agreed: "agreed", never "agreed given" (a variant the
    run could not tell), and its verdict records the category."""
    if _printed(out, "model and brokers") != ["agreed: yes"]:
        return False
    run_dir = Path(_printed(out, "run directory")[0])
    verdict = json.loads((run_dir / "verdict.json").read_text())
    return verdict["details"]["agreement"] == "agreed"


def _replay_agreeing(kafka_target, logfork_runs, capsys, name: str) -> tuple[str, Path]:
    """`logfork replay` of docs/schedules/NAME.json, a KRaft schedule, which must exit 0 with
    the model agreeing: its output and run directory."""
    if kafka_target.mode != "kraft":
        pytest.skip("a KRaft schedule")
    args = ["replay", str(SCHEDULES / f"{name}.json"), "--kafka-version", kafka_target.kafka]
    code = cli.main([*args, "--out", str(logfork_runs), "--no-report"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert _agreed(out), out
    return out, Path(_printed(out, "run directory")[0])


@pytest.mark.cluster
def test_replay_of_the_documented_schedule(kafka_target, logfork_runs, capsys):
    release = kafka_target.release
    if kafka_target.mode != "zk":
        pytest.skip("the example gives one broker its own ZooKeeper session timeout")
    if not release.at_least(0, 11):
        pytest.skip("KIP-279 scenario 1 needs leader epochs (KIP-101, 0.11.0)")
    before_fix = not release.at_least(2, 0)
    args = ["replay", str(EXAMPLE), "--kafka-version", kafka_target.kafka]
    code = cli.main([*args, "--out", str(logfork_runs), "--no-report"])
    out = capsys.readouterr().out
    assert code == 0, out  # as its `expect` says, on either side of the fix
    assert _agreed(out), out
    run_dir = Path(_printed(out, "run directory")[0])
    verdict = json.loads((run_dir / "verdict.json").read_text())
    judgement = verdict["details"]["judgement"]
    if before_fix:
        assert verdict["outcome"] == verdict["expected"] == "reproduced"
        assert judgement["failure"] == "diverged"
        assert judgement["evidence"]["partitions"]["0"]["diverged_at"] == 11
        for side in ("expected", "observed"):
            assert verdict["symptom"][side]["kind"] == "diverged"
            assert verdict["symptom"][side]["offset"] == 11
    else:
        assert verdict["outcome"] == verdict["expected"] == "consistent"
        assert judgement["failure"] is None
    assert all(s["status"] == "done" for s in verdict["details"]["steps"])
    assert (run_dir / "schedule.json").read_text() == EXAMPLE.read_text()


@pytest.mark.cluster
def test_replay_of_a_kraft_failover(kafka_target, logfork_runs, capsys):
    if kafka_target.mode != "kraft":
        pytest.skip("a KRaft schedule")
    args = ["replay", str(KRAFT_EXAMPLE), "--kafka-version", kafka_target.kafka]
    code = cli.main([*args, "--out", str(logfork_runs), "--no-report"])
    out = capsys.readouterr().out
    assert code == 0, out
    run_dir = Path(_printed(out, "run directory")[0])
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["outcome"] == verdict["expected"] == "consistent", out
    steps = verdict["details"]["steps"]
    # The failover itself must have happened: both kills and the restart ran.
    assert [s["status"] for s in steps if s["kind"] in ("kill", "restart")] == ["done"] * 3, out
    # Four partitions with their leaders apart: the first kill moved every leader it held,
    # and each partition was judged.
    judged = verdict["details"]["judgement"]["evidence"]["partitions"]
    assert sorted(judged) == ["0", "1", "2", "3"], out
    first_leader = {}
    moved = set()
    for line in (run_dir / "states.jsonl").read_text().splitlines()[1:]:
        state = json.loads(line)
        first = first_leader.setdefault(state["partition"], state["leader"])
        if state["leader"] != first:
            moved.add(state["partition"])
    assert len(set(first_leader.values())) == 3, first_leader  # leaders apart
    assert len(moved) >= 2, first_leader  # one broker's death moved several leaders


@pytest.mark.cluster
def test_replay_of_a_dropped_transaction_marker(kafka_target, logfork_runs, capsys):
    """KAFKA-20716 as a schedule: the COMMIT marker reaches the leader alone, and the
    follower without it comes back and is elected uncleanly. Once the transaction timeout
    has passed, clients see the last stable offset stopped at the transaction, and the disk
    audit finds it open: both readings, the model agreeing. `logfork audit` of the run names
    it too, aged against the time the run judged it."""
    out, run_dir = _replay_agreeing(kafka_target, logfork_runs, capsys, "kraft-dropped-marker")
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["outcome"] == "reproduced", out
    steps = verdict["details"]["steps"]
    assert [s["status"] for s in steps] == ["done"] * 5, out
    assert steps[2]["targets"]["marker"] == "COMMIT"
    seen = verdict["details"]["judgement"]["evidence"]["partitions"]["0"]
    assert seen["hanging"] == [0] and seen["stable"].startswith("last stable offset 0,"), seen
    assert cli.main(["audit", str(run_dir)]) == 1
    assert "HANGING transaction" in capsys.readouterr().out


@pytest.mark.cluster
def test_replay_of_the_coordinator_as_a_target(kafka_target, logfork_runs, capsys):
    """Kill and pause steps naming the transaction coordinator: each takes the leader of its
    log when its turn comes, a transactional step it cannot serve is skipped, and the run
    tells the model both, which then agrees."""
    out, run_dir = _replay_agreeing(kafka_target, logfork_runs, capsys, "kraft-coordinator")
    details = json.loads((run_dir / "verdict.json").read_text())["details"]
    steps = details["steps"]
    assert [s["status"] for s in steps] == [*["done"] * 6, "skipped", "done"], out
    assert steps[6]["unserved"] and "coordinator" in steps[6]["observed"], steps[6]
    found = details["comparison"]["told"]
    killed, paused = steps[1]["targets"]["broker"], steps[5]["targets"]["broker"]
    # Told where it changed (each transactional step tells it too): the two it named.
    assert f"broker {killed} at step " in found and f"broker {paused} at step " in found, found
    assert "does not follow (6)" in found, found


@pytest.mark.cluster
def test_replay_of_a_late_endtxn(kafka_target, logfork_runs, capsys):
    """An abort whose first EndTxn is held: the client's retry ends the transaction, the
    next one writes, and the heal delivers the held abort, which ends that one too
    (KAFKA-17754): its marker is where the model has it when the heal's step settles."""
    out, run_dir = _replay_agreeing(kafka_target, logfork_runs, capsys, "kraft-late-endtxn")
    steps = json.loads((run_dir / "verdict.json").read_text())["details"]["steps"]
    assert [s["status"] for s in steps] == ["done"] * 4, out
    assert steps[1]["targets"]["marker"] == "ABORT" and steps[1]["targets"]["held_bytes"] > 0
    assert steps[3]["targets"]["late_end"] == "delivered", steps[3]
    assert not steps[3]["unsettled"], steps[3]  # the late ABORT on the leader, as modelled


@pytest.mark.cluster
def test_replay_of_a_producer_going_on_after_a_late_endtxn(kafka_target, logfork_runs, capsys):
    """The late abort ends the transaction the producer has open; its next write lands on
    the partition outside any transaction the coordinator knows. Before 3.6 the leader
    appends it and it hangs for good; from 3.6 the leader asks the coordinator first
    (KIP-890 part 1) and refuses it. The model cannot follow the producer there."""
    if kafka_target.mode != "kraft":
        pytest.skip("a KRaft schedule")
    args = ["replay", str(SCHEDULES / "kraft-late-endtxn-goes-on.json")]
    args += ["--kafka-version", kafka_target.kafka, "--out", str(logfork_runs), "--no-report"]
    code = cli.main(args)
    out = capsys.readouterr().out
    assert code == 0, out  # as its `expect` says, on either side of 3.6
    assert "the model cannot predict this schedule" in out, out
    assert _printed(out, "model and brokers")[0].startswith("cannot predict: "), out
    verdict = json.loads((Path(_printed(out, "run directory")[0]) / "verdict.json").read_text())
    steps = verdict["details"]["steps"]
    assert steps[3]["targets"]["late_end"] == "delivered", steps[3]
    if kafka_target.release.at_least(3, 6):
        assert steps[4]["targets"]["acknowledged"] is False, steps[4]  # refused


@pytest.mark.cluster
def test_replay_of_transactions_spanning_partitions(kafka_target, logfork_runs, capsys):
    """Transactions that write the schedule's partition and background ones, whose leaders
    differ (one moved by a kill in between): the coordinator marks every partition, and
    read_committed consumers of each read the committed transactions whole and none of the
    aborted one. The model follows partition 0 and agrees."""
    out, run_dir = _replay_agreeing(kafka_target, logfork_runs, capsys, "kraft-spanning-txn")
    steps = json.loads((run_dir / "verdict.json").read_text())["details"]["steps"]
    assert [s["status"] for s in steps] == ["done"] * 8, out
    first, second = steps[0]["targets"]["leaders"], steps[3]["targets"]["leaders"]
    assert len(set(first.values())) > 1, first  # the transaction spans several leaders
    assert first["2"] == 2 != second["2"], (first, second)  # broker 2 killed in between
    assert [steps[i]["targets"]["marker"] for i in (1, 4, 7)] == ["COMMIT", "ABORT", "COMMIT"]
    reads, _ = RunDir(run_dir).reads()
    assert {(r.isolation, r.partition) for r in reads} == {
        (level, p) for level in ("read_committed", "read_uncommitted") for p in (0, 1, 2)
    }
    committed = {rec.value for r in reads if r.isolation == "read_committed" for rec in r.records}
    topic = reads[0].topic
    assert {f"{topic}-t0-{i}@2" for i in range(3)} <= committed  # a commit on partition 2
    assert not any(v and "-t1-" in v for v in committed)  # the aborted transaction
    assert {f"{topic}-t2-0", f"{topic}-t2-0@1"} <= committed


@pytest.mark.cluster
def test_replay_of_a_held_alter_partition(kafka_target, logfork_runs, capsys):
    """The leader's AlterPartition held while its follower falls behind: the shrink does not
    reach the controller, so an acks=all write times out; the heal delivers it late, the
    follower rejoins, and the filter's dropped packets prove the hold."""
    out, run_dir = _replay_agreeing(kafka_target, logfork_runs, capsys, "kraft-alter-partition")
    steps = json.loads((run_dir / "verdict.json").read_text())["details"]["steps"]
    assert [s["status"] for s in steps] == ["done"] * 7, out
    assert steps[4]["targets"]["acknowledged"] is False  # the shrink was held
    assert steps[5]["targets"]["alter_partition_dropped"]["1"] > 0
    assert steps[6]["targets"]["acknowledged"] is True


@pytest.mark.cluster
def test_replay_of_moves_between_log_dirs(kafka_target, logfork_runs, capsys):
    """The leader's replica moved to its broker's other log dir and swapped in, the leader
    killed, a follower's move throttled, writes on, the broker back: every step proves its
    effect in the brokers' own view (DescribeLogDirs), and nothing diverges."""
    if not kafka_target.release.at_least(3, 8):
        pytest.skip("KRaft serves JBOD from 3.8 (KIP-858)")
    out, run_dir = _replay_agreeing(kafka_target, logfork_runs, capsys, "kraft-move-dir")
    steps = json.loads((run_dir / "verdict.json").read_text())["details"]["steps"]
    assert [s["status"] for s in steps] == ["done"] * 7, out
    moved = [s["targets"] for s in steps if s["kind"] == "move-dir"]
    assert [m["in_flight"] for m in moved[:1]] == [False]  # waited for the swap
    assert all(m["to"].startswith("/logfork/data") for m in moved), moved
    assert moved[0]["broker"] != moved[1]["broker"]  # the first one's broker was killed


@pytest.mark.cluster
def test_replay_of_failed_log_dirs(kafka_target, logfork_runs, capsys, tmp_path):
    """The leader's log dir fails, then a follower's; writes go on, on the replica left;
    broker 1's disk comes back with its restart. Each failure is proven in the broker's own
    view and by the controller's reaction, and the replicas converge. In ZooKeeper mode the
    schedule keeps broker 3 as controller, whose dir the model does not fail: skipped."""
    release = kafka_target.release
    if kafka_target.mode == "kraft" and not release.at_least(3, 7, 1):
        pytest.skip("KRaft serves JBOD from 3.7; 3.7.0 re-creates the replica (KAFKA-16234)")
    doc = json.loads((SCHEDULES / "kraft-fail-dir.json").read_text())
    if kafka_target.mode == "zk":
        del doc["cluster"]["controllers"]
        doc["cluster"].update(mode="zk", controller=3)
    path = tmp_path / "fail-dir.json"
    path.write_text(json.dumps(doc))
    args = ["replay", str(path), "--kafka-version", kafka_target.kafka, "--out", str(logfork_runs)]
    code = cli.main([*args, "--no-report"])
    out = capsys.readouterr().out
    assert code == 0 and _agreed(out), out
    run_dir = Path(_printed(out, "run directory")[0])
    steps = json.loads((run_dir / "verdict.json").read_text())["details"]["steps"]
    third = "skipped" if kafka_target.mode == "zk" else "done"
    assert [s["status"] for s in steps] == ["done"] * 3 + [third] + ["done"] * 3, out
    assert steps[1]["targets"]["broker"] == 1 and "recreated" not in steps[1]["targets"]
    timeline = (run_dir / "timeline.jsonl").read_text()
    # Each failure, and each disk back (broker 1's restart, broker 3 in the heal).
    assert timeline.count('"name": "log-dir-failed"') == (2 if kafka_target.mode == "zk" else 4)


@pytest.mark.cluster
def test_replay_of_reassignments(kafka_target, logfork_runs, capsys):
    """A follower replaced by the fourth broker, the leader removed (it resigns), a broker
    added while cut off from the leader (left in flight, throttled, done after the heal),
    then a new preferred replica elected: each proven in the metadata log, the model agreeing
    throughout, and nothing of a removed replica left current on its broker."""
    out, run_dir = _replay_agreeing(kafka_target, logfork_runs, capsys, "kraft-reassign")
    steps = json.loads((run_dir / "verdict.json").read_text())["details"]["steps"]
    assert [s["status"] for s in steps] == ["done"] * 12, out
    moved = [s["targets"] for s in steps if s["kind"] == "reassign"]
    assert [m["replicas"] for m in moved] == [[1, 3, 4], [3, 4], [3, 4, 1], [4, 3, 1]]
    assert [m["in_flight"] for m in moved] == [False, False, True, False]
    assert steps[10]["targets"]["leader"] == 4
    assert not any(s.get("unsettled") for s in steps), out
    # Broker 2 left the replicas at step 1 and never came back: its copy is gone.
    assert not list((run_dir / "nodes" / "b2").glob("data*/s-*-0"))


def _replay_finding(
    kafka_target, logfork_runs, capsys, jira: str, *args: str
) -> tuple[int, str, dict]:
    """`logfork replay` of docs/findings/JIRA.json (with `args`): its exit code, output and
    verdict."""
    args = ("replay", str(FINDINGS / f"{jira}.json"), "--kafka-version", kafka_target.kafka, *args)
    code = cli.main([*args, "--out", str(logfork_runs), "--no-report"])
    out = capsys.readouterr().out
    run_dir = Path(_printed(out, "run directory")[0])
    return code, out, json.loads((run_dir / "verdict.json").read_text())


@pytest.mark.cluster
def test_replay_of_an_outage_soon_after_the_topic_s_creation(kafka_target, logfork_runs, capsys):
    """flush.messages=1, two acks=all batches, then every broker's power cut at once and all
    three back (docs/schedules/kraft-outage.json): the outage proves its effect (every broker
    lost, each one's cut recorded), and the verdict follows what the disks kept. Where the
    outage took the new partition's directory from every replica (nothing had fsynced the
    log dir since its creation: docs/findings/new-partition-outage.md), the writes are lost
    and no election excuses it; where a checkpoint had fsynced the log dir first, nothing
    is."""
    if kafka_target.mode != "kraft":
        pytest.skip("a KRaft schedule")
    args = ["replay", str(SCHEDULES / "kraft-outage.json"), "--kafka-version", kafka_target.kafka]
    code = cli.main([*args, "--out", str(logfork_runs), "--no-report"])
    out = capsys.readouterr().out
    verdict = json.loads((Path(_printed(out, "run directory")[0]) / "verdict.json").read_text())
    steps = verdict["details"]["steps"]
    assert [s["status"] for s in steps] == ["done"] * 6, out
    assert steps[2]["targets"]["brokers"] == [1, 2, 3], out
    cuts = verdict["details"]["power_losses"]
    assert sorted((c["step"], c["broker"], c["model"]) for c in cuts) == [
        (2, b, "unsynced") for b in (1, 2, 3)
    ], out
    emptied = all(c["ends"]["0"][1] == 0 for c in cuts)
    failure = verdict["details"]["judgement"]["failure"]
    if emptied:
        assert (code, failure) == (1, "lost-acknowledged"), out
        assert "rule:    flush.messages=1" in out, out
    else:
        assert (code, failure) == (0, None), out


@pytest.mark.cluster
def test_replay_of_the_kafka_20961_finding(kafka_target, logfork_runs, capsys):
    """The finding explore made blind on 4.4.0 (docs/findings/KAFKA-20961.md): the leader's
    empty replica moved to its other log dir comes back without the epoch it leads in. So
    on every KRaft release with JBOD, and in ZooKeeper mode from 2.0.1 (KAFKA-7415: a new
    leader caches its epoch); 1.1.1 caches no empty epoch, and holds."""
    release, mode = kafka_target.release, kafka_target.mode
    if mode == "kraft" and not release.at_least(3, 7):
        pytest.skip("KRaft serves JBOD from 3.7 (KIP-858)")
    code, out, verdict = _replay_finding(
        kafka_target, logfork_runs, capsys, "KAFKA-20961", "--kafka-mode", mode
    )
    steps = verdict["details"]["steps"]
    assert [s["status"] for s in steps] == ["done"], out
    failure = verdict["details"]["judgement"]["failure"]
    if mode == "zk" and not release.at_least(2, 0, 1):
        assert (code, failure) == (0, None), out
    else:
        assert (code, failure) == (1, "epoch-cache-lost"), out
        assert steps[0]["targets"]["epochs_lost"] == [0]


@pytest.mark.cluster
def test_replay_of_the_kafka_16234_finding(kafka_target, logfork_runs, capsys):
    """The finding explore made blind on 3.7.0 (docs/findings/KAFKA-16234.md): a broker
    re-creates the replicas of its failed log dir in its other dir. From 3.7.1 they stay
    offline until the disk is back, and the run holds."""
    release = kafka_target.release
    if kafka_target.mode != "kraft" or not release.at_least(3, 7):
        pytest.skip("KRaft serves JBOD from 3.7 (KIP-858)")
    code, out, verdict = _replay_finding(kafka_target, logfork_runs, capsys, "KAFKA-16234")
    assert [s["status"] for s in verdict["details"]["steps"]] == ["done"] * 2, out
    failure = verdict["details"]["judgement"]["failure"]
    if release.at_least(3, 7, 1):
        assert (code, failure) == (0, None), out
    else:
        assert (code, failure) == (1, "replica-recreated"), out


@pytest.mark.cluster
def test_replay_of_the_kafka_19522_finding(kafka_target, logfork_runs, capsys):
    """The finding explore made blind on 4.0.2 (docs/findings/KAFKA-19522.md): a fenced
    last known leader elected before 4.1.0, and from 4.1.0 an election that waits."""
    release = kafka_target.release
    if kafka_target.mode != "kraft" or not release.at_least(4, 0):
        pytest.skip("formatted with eligible.leader.replicas.version, which needs 4.0")
    code, out, verdict = _replay_finding(kafka_target, logfork_runs, capsys, "KAFKA-19522")
    assert [s["status"] for s in verdict["details"]["steps"]] == ["done"] * 3, out
    failure = verdict["details"]["judgement"]["failure"]
    assert verdict["symptom"]["expected"]["kind"] == "consistent"  # it declares no `expect`
    if release.at_least(4, 1):
        assert (code, failure) == (0, None), out
    else:
        assert (code, failure) == (1, "fenced-leader"), out
    assert verdict["symptom"]["observed"]["kind"] == (failure or "consistent")


@pytest.mark.cluster
def test_replay_of_the_kafka_20734_finding(kafka_target, logfork_runs, capsys):
    """docs/findings/KAFKA-20734.md: a commit while the partition is offline. From 4.3.0 a
    KRaft coordinator skips the marker as if the partition were deleted, and the transaction
    hangs once the partition is back; before it, and in ZooKeeper mode, the marker waits
    for a leader. The model predicts either."""
    release, mode = kafka_target.release, kafka_target.mode
    if not release.at_least(0, 11):
        pytest.skip("transactions need Kafka 0.11 (KIP-98)")
    code, out, verdict = _replay_finding(
        kafka_target, logfork_runs, capsys, "KAFKA-20734", "--kafka-mode", mode
    )
    assert [s["status"] for s in verdict["details"]["steps"]] == ["done"] * 6, out
    failure = verdict["details"]["judgement"]["failure"]
    if mode == "kraft" and release.at_least(4, 3):
        assert (code, failure) == (1, "hanging-transaction"), out
    else:
        assert (code, failure) == (0, None), out
    assert _agreed(out), out


@pytest.mark.cluster
def test_replay_of_the_kafka_18723_finding(kafka_target, logfork_runs, capsys):
    """docs/findings/KAFKA-18723.md: a follower behind a slow link gets, from its old leader,
    a batch of the new leader's epoch that the old leader appended after truncating. A
    release with the fix skips it, and says so in its log: the proof that the run reached
    the race. Before the fix the replicas diverge at offset 5 (3.9.0, 4.0.0)."""
    release = kafka_target.release
    if kafka_target.mode != "kraft":
        pytest.skip(
            "the schedule keeps broker 3 from the news by cutting it off from the KRaft quorum"
        )
    code, out, verdict = _replay_finding(
        kafka_target, logfork_runs, capsys, "KAFKA-18723", "--kafka-mode", "kraft"
    )
    assert [s["status"] for s in verdict["details"]["steps"]] == ["done"] * 16, out
    fixed = release.at_least(4, 0, 1) or (release.at_least(3, 9, 1) and not release.at_least(4))
    if not fixed:
        assert (code, verdict["details"]["judgement"]["failure"]) == (1, "diverged"), out
        return
    assert code == 0, out
    run_dir = Path(_printed(out, "run directory")[0])
    log = (run_dir / "nodes" / "b3" / "logs" / "server.log").read_text(errors="replace")
    assert "Skipping batch" in log and "partitionLeaderEpoch=2" in log, out


@pytest.mark.cluster
def test_a_small_explore_on_kraft_finds_nothing(kafka_target, logfork_runs, capsys):
    """Two schedules in drawing order (the model's search would run the hanging transactions
    it predicts first: docs/schedules/kraft-dropped-marker.json has one), each with a
    transaction left open for the coordinator to abort at its timeout: nothing found."""
    release = kafka_target.release
    if kafka_target.mode != "kraft" or not release.at_least(4, 0):
        pytest.skip("the KRaft explore smoke runs on 4.x")
    out_dir = logfork_runs / f"explore-{release}-kraft-seed5"
    args = ["explore", "--kafka-version", kafka_target.kafka, "--kafka-mode", "kraft"]
    args += ["--seed", "5", "--budget", "2", "--out", str(out_dir), "--shrink-findings", "0"]
    args += ["--parallel", "2", "--no-guidance"]
    code = cli.main(args)
    out = capsys.readouterr().out
    record = json.loads((out_dir / EXPLORE_JSON).read_text())
    assert code == 0, out
    assert len(record["schedules"]) == 2 and not record["findings"], out
    assert all(e["outcome"] == "consistent" for e in record["schedules"]), out
    wrote = []  # the runs that wrote in a transaction, which the coordinator then aborted
    for e in record["schedules"]:
        verdict = json.loads((Path(e["run_dir"]) / "verdict.json").read_text())
        if ("txn-write", "done") in [(s["kind"], s["status"]) for s in verdict["details"]["steps"]]:
            wrote.append(e["run_dir"])
            assert "transactions-ended" in (Path(e["run_dir"]) / "timeline.jsonl").read_text()
    # A transactional step may be skipped where a schedule's faults keep its coordinator from
    # logging (a follower of its log cut off), never both schedules' with this seed.
    assert wrote, out
    # Two clusters at once, each schedule once, in running order, with the one that ran it.
    assert record["parallel"] == 2
    assert [e["number"] for e in record["schedules"]] == [1, 2]
    assert sorted(e["cluster"] for e in record["schedules"]) == ["c1", "c2"], out
    assert len(record["boots"]) == 2
    assert (out_dir / "report" / "explore.html").is_file()


@pytest.mark.cluster
def test_a_small_explore_finds_and_shrinks(kafka_target, logfork_runs, capsys):
    release = kafka_target.release
    if kafka_target.mode != "zk" or release.at_least(2, 0) or not release.at_least(0, 11):
        pytest.skip("the explore smoke runs on a release with leader epochs, before KIP-279")
    out_dir = logfork_runs / f"explore-{release}-seed1"
    args = ["explore", "--kafka-version", kafka_target.kafka, "--seed", "1", "--budget", "2"]
    args += ["--unclean", "--out", str(out_dir), "--shrink-findings", "1", "--shrink-runs", "4"]
    args += ["--confirm-runs", "2"]  # the gate, shortened (its rule: shrink's unit tests)
    args += ["--parallel", "1"]
    code = cli.main(args)
    out = capsys.readouterr().out
    record = json.loads((out_dir / EXPLORE_JSON).read_text())
    assert len(record["schedules"]) == 2, out
    assert len(re.findall(r"^\[\d/2\] \d+ steps", out, flags=re.MULTILINE)) == 2
    # A schedule that could not reach its state says so (a verdict is earned); one must.
    assert any(e["outcome"] != "not-reached" for e in record["schedules"]), out
    assert record["findings"], out  # the model ranks predicted divergences first
    assert code == 1
    replays = _printed(out, "replay")
    assert len(replays) == len(record["findings"])
    for command in replays:
        schedule = load_schedule(command.split()[2])
        assert command.endswith(f"--kafka-version {kafka_target.kafka} --kafka-mode zk")
        assert len(schedule.steps) >= 1
    # Shrunk: fewer steps than the schedule it came from. Which finding comes first depends
    # on the brokers' timing (under load, the predicted divergence of one schedule may not
    # happen, and a follower stuck (KIP-101) is then the only finding, 12 steps at its
    # model-minimal), so the bound is the original's length, not a fixed count.
    first = record["findings"][0]
    original = next(e for e in record["schedules"] if e["number"] == first["number"])
    assert first["reproducible"] and first["steps"] < original["steps"], (first, original)
    assert (out_dir / "report" / "explore.html").is_file()
    assert "schedules/min" in out


# Each finding's exported script and what it prints on 4.4: KAFKA-20961 on loopback (a
# replica moved with the Admin API, the lost epoch found in the broker's own checkpoint);
# KAFKA-20716 with each node in a network namespace (sessions expired by cuts from the
# controllers, the hang found by kafka-transactions.sh).
EXPORTED = {
    "KAFKA-20961": "lost leader epoch(s) 0",
    "KAFKA-20716": "still has a transaction open 60 s after the heal",
}
PORT_BASE = 31090


@pytest.mark.cluster
@pytest.mark.parametrize(
    "finding",
    [
        "KAFKA-20961",
        # Its script waits out a transaction's timeout and cuts links: minutes longer, so
        # `tox -e exported` runs it, not .ci/run.
        pytest.param("KAFKA-20716", marks=pytest.mark.slow),
    ],
)
def test_a_finding_exported_reproduces_without_logfork(
    kafka_target, logfork_runs, capsys, tmp_path, finding
):
    """`logfork replay --export-script`: a finding's replay written as a script, which brings
    the same cluster up as plain processes from the release's jars and checks the symptom
    with Kafka's own tools: exit 1, as the replay. Nothing it started outlives it: no
    process, no namespace, no link, no rule."""
    import os
    import subprocess

    if kafka_target.mode != "kraft" or not kafka_target.release.at_least(4, 4):
        pytest.skip("the exported findings run on 4.4 KRaft in CI")
    out_dir = tmp_path / "export"
    args = ["replay", str(FINDINGS / f"{finding}.json"), "--kafka-version", kafka_target.kafka]
    code = cli.main(
        [*args, "--out", str(logfork_runs), "--no-report", "--export-script", str(out_dir)]
    )
    out = capsys.readouterr().out
    assert code == 1, out
    (libs,) = re.findall(r"KAFKA_LIBS=(\S+)", out)
    work = tmp_path / "work"
    work.mkdir()
    # Ports of their own: another script (a user's) may hold the default ones. Below the
    # ephemeral range (32768 on): a client socket there, or a container's published port,
    # fails the bind.
    env = {**os.environ, "KAFKA_LIBS": libs, "WORK": str(work), "PORT_BASE": str(PORT_BASE)}
    ran = subprocess.run(
        ["bash", str(out_dir / "reproduce.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert EXPORTED[finding] in ran.stdout, ran.stdout
    left = subprocess.run(["pgrep", "-f", str(work)], capture_output=True, text=True).stdout
    assert not left.strip(), f"processes left behind: {left}"
    shown = {
        "namespaces": ["ip", "netns", "list"],
        "links": ["ip", "-br", "link"],
        "rules": ["iptables", "-S", "FORWARD"],
    }
    for what, command in shown.items():
        listed = subprocess.run(command, capture_output=True, text=True).stdout
        assert f"rp{PORT_BASE}" not in listed, f"{what} left behind: {listed}"
