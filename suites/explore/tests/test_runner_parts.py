"""The parts of a real run that need no cluster: the model's prediction beside the brokers'
judgement, and which of a shared cluster's files a schedule's evidence takes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from checkers.schedules.comparison import compare
from checkers.simulate import simulate
from runrecord.replay import (
    AGREED,
    AGREED_GIVEN,
    CANNOT_PREDICT,
    DISAGREED,
    Comparison,
    Judgement,
    RunHistory,
    StepResult,
)
from runrecord.schedule import load_schedule, loads
from suites.explore.engine.evidence import HOLE, _sparse_copy, _wanted

EXAMPLE = Path(__file__).parents[3] / "docs" / "schedules" / "kip-279-s1-equal.json"


def _real(statuses: list[str]) -> list[StepResult]:
    return [StepResult(i, f"step {i}", "produce", s) for i, s in enumerate(statuses)]


def test_the_model_beside_the_brokers() -> None:
    schedule = load_schedule(EXAMPLE)
    prediction = simulate(schedule, "1.1.1")
    done = _real(["done"] * len(schedule.steps))
    diverged = Judgement("diverged", "replicas diverged", 0, partitions={0: "diverged", 1: None})
    c = compare(prediction, diverged, RunHistory(done))
    assert (c.predicted, c.actual, c.agree, c.steps_differ) == ("diverged", "diverged", True, [])
    held = Judgement(None, "held", partitions={0: None, 1: None})
    skipped = _real(["done", "skipped", *["done"] * (len(schedule.steps) - 2)])
    c = compare(prediction, held, RunHistory(skipped))
    assert (c.predicted, c.actual, c.agree, c.steps_differ) == ("diverged", None, False, [1])
    # A finding on the background partition is not the model's to predict.
    background = Judgement("diverged@background", "p1", 1, partitions={0: None, 1: "diverged"})
    assert compare(simulate(schedule, "2.8.2"), background, RunHistory()).agree


def test_a_finding_the_model_does_not_follow_is_set_aside() -> None:
    # 4.3.1 with --jbod: a swap between log dirs lost an epoch (KAFKA-20961), which the
    # model never predicts; it is answerable for what the brokers showed besides.
    schedule = load_schedule(EXAMPLE)
    prediction = simulate(schedule, "1.1.1")  # diverged
    lost = "epoch-cache-lost"
    besides = Judgement(lost, "p0", 0, partitions={0: lost}, modelled={0: "diverged"})
    c = compare(prediction, besides, RunHistory())
    assert (c.actual, c.agree, c.unpredictable) == (lost, True, "")
    assert f"{lost} set aside, which it does not follow" in c.told
    alone = Judgement(lost, "p0", 0, partitions={0: lost}, modelled={0: None})
    c = compare(prediction, alone, RunHistory())
    assert not c.agree  # counted apart, never as agreement
    said = f"the brokers showed {lost}, which it does not follow, and nothing else"
    assert c.unpredictable == said


# Cut down by the model from explore's schedule 7 on 1.1.1 (seed 1, --unclean), where the
# brokers diverged at offset 0 and the model had broker 1 stuck. The steps between the
# 6 s wait and the SIGKILL took 5.3 s, longer than the 5 s checkpoint interval: broker 1
# restarted with a high watermark checkpoint of 11, where the model's said 5.
OUTRUN = """
{"format": 1, "seed": 3303276673,
 "cluster": {"mode": "zk", "brokers": 3, "replication_factor": 2, "replicas": [2, 1],
  "controller": 3,
  "topic_config": {"min.insync.replicas": 1, "unclean.leader.election.enable": true},
  "broker_config": {"replica.lag.time.max.ms": 600000, "zookeeper.session.timeout.ms": 6000,
   "replica.high.watermark.checkpoint.interval.ms": 5000}},
 "steps": [
  {"kind": "hold-back", "target": "follower-in-isr"},
  {"kind": "produce", "count": 11, "acks": "all", "to": "leader"},
  {"kind": "kill", "target": 2, "signal": "SIGTERM"},
  {"kind": "produce", "count": 5, "acks": "1", "to": "leader"},
  {"kind": "wait", "seconds": 6},
  {"kind": "kill", "target": "controller", "signal": "SIGTERM"},
  {"kind": "produce", "count": 5, "acks": "all", "to": "leader"},
  {"kind": "restart", "target": "any-broker"},
  {"kind": "produce", "count": 2, "acks": "all", "to": "leader"},
  {"kind": "kill", "target": "controller", "signal": "SIGKILL"}]}
"""


def test_a_disagreement_only_an_untold_checkpoint_variant_explains_is_agreed_given() -> None:
    schedule = loads(OUTRUN)
    prediction = simulate(schedule, "1.1.1")
    assert prediction.failure() == "stuck"
    diverged = Judgement("diverged", "diverged at 0", 0, partitions={0: "diverged", 1: None})
    # Without the schedule: no variants.
    assert compare(prediction, diverged, RunHistory()).category == DISAGREED
    c = compare(prediction, diverged, RunHistory(), schedule)
    assert c.category == AGREED_GIVEN  # counted apart, never as the model's agreement
    assert c.agreed_if.startswith(
        "if the high watermark checkpoint had caught up before the crash at step 9: diverged"
    )
    # The model's own outcome agrees with no condition; an outcome no variant reaches
    # stays a disagreement.
    stuck = Judgement("stuck", "broker 1 stuck", 0, partitions={0: "stuck", 1: None})
    assert compare(prediction, stuck, RunHistory(), schedule).category == AGREED
    held = Judgement(None, "held", partitions={0: None, 1: None})
    assert compare(prediction, held, RunHistory(), schedule).category == DISAGREED


def test_the_checkpoint_a_crash_left_on_disk_is_told_not_tried() -> None:
    """The run read broker 1's replication-offset-checkpoint after the SIGKILL at step 9:
    the model predicts with it, and no variant stands in for what the disk said."""
    schedule = loads(OUTRUN)
    prediction = simulate(schedule, "1.1.1")
    diverged = Judgement("diverged", "diverged at 0", 0, partitions={0: "diverged", 1: None})
    # Caught up (11, the high watermark): the model's own prediction agrees.
    c = compare(prediction, diverged, RunHistory(hw_checkpoints=[(9, 1, 11)]), schedule)
    assert (c.category, c.agreed_if, c.predicted) == (AGREED, "", "diverged")
    said = "given the high watermark checkpoints the crashes left on disk (step 9: broker 1 at 11)"
    assert c.told == said
    # Behind (5, as the model had it): a disagreement, not a variant that caught it up.
    c = compare(prediction, diverged, RunHistory(hw_checkpoints=[(9, 1, 5)]), schedule)
    assert (c.category, c.agreed_if, c.predicted) == (DISAGREED, "", "stuck")


def test_each_comparison_falls_in_one_category() -> None:
    def category(agree: bool, agreed_if: str = "", unpredictable: str = "") -> str:
        c = Comparison(None, None, agree, "p", agreed_if=agreed_if, unpredictable=unpredictable)
        return c.category

    assert category(True) == AGREED
    assert category(True, "if the high watermark checkpoint had caught up") == AGREED_GIVEN
    assert category(False) == DISAGREED
    assert category(False, unpredictable="a file it does not follow") == CANNOT_PREDICT
    assert category(True, unpredictable="a file it does not follow") == CANNOT_PREDICT


def test_a_step_the_coordinator_could_not_serve_is_skipped_by_the_model_too() -> None:
    schedule = load_schedule(EXAMPLE.with_name("kraft-dropped-marker.json"))
    prediction = simulate(schedule, "4.4.0")
    assert prediction.failure() == "hanging-transaction"
    held = Judgement(None, "held", partitions={0: None, 1: None})
    real = _real(["done"] * len(schedule.steps))
    assert not compare(prediction, held, RunHistory(real), schedule).agree
    # The run skipped the write (its coordinator could not log it), then the commit.
    real[0] = StepResult(0, "step 0", "txn-write", "skipped", unserved=True)
    real[2] = StepResult(2, "step 2", "txn-commit", "skipped")
    c = compare(prediction, held, RunHistory(real), schedule)
    assert (c.predicted, c.agree, c.steps_differ) == (None, True, [])
    assert c.told == "given the steps the run skipped for what the model does not follow (0)"


def test_a_transactional_write_not_acknowledged_leaves_the_model_unable_to_predict() -> None:
    schedule = load_schedule(EXAMPLE.with_name("kraft-dropped-marker.json"))
    prediction = simulate(schedule, "4.4.0")
    held = Judgement(None, "held", partitions={0: None, 1: None})
    real = _real(["done"] * len(schedule.steps))
    # The client timed out: the batch may have landed (and hang), or gone to a zombie.
    real[0] = StepResult(0, "step 0", "txn-write", "done", {"to": 2, "acknowledged": False})
    c = compare(prediction, held, RunHistory(real), schedule)
    assert c.unpredictable.startswith("the transactional write at step 0 was not acknowledged")
    # Where the model's write failed too, the model followed it.
    failed = [replace(m, targets={**m.targets, "acknowledged": False}) for m in prediction.steps]
    assert compare(prediction, held, RunHistory(real), schedule, model=failed).unpredictable == ""


def test_a_late_endtxn_the_model_cannot_follow_counts_apart() -> None:
    schedule = load_schedule(EXAMPLE.with_name("kraft-late-endtxn.json"))
    prediction = simulate(schedule, "4.3.1")
    held = Judgement(None, "held", partitions={0: None, 1: None})
    real = _real(["done"] * len(schedule.steps))
    assert compare(prediction, held, RunHistory(real), schedule).unpredictable == ""
    # The coordinator the abort was held at had restarted when the heal released it.
    lost = "the ABORT held at broker 2 was released: broker 2 restarted since"
    c = compare(prediction, held, RunHistory(real, unknown=[lost]), schedule)
    assert c.unpredictable == lost
    # The producer going on after the late abort ended its transaction: the model says so.
    going_on = replace(schedule, steps=(*schedule.steps, schedule.steps[2]))
    prediction = simulate(going_on, "4.3.1")
    c = compare(prediction, held, RunHistory(_real(["done"] * 5)), going_on)
    assert "the producer goes on at step 4" in c.unpredictable


def test_evidence_takes_the_topic_and_what_lies_beside_it(tmp_path: Path) -> None:
    names = ("s-1-0", "s-1-1", "s-10-0", "other-0", "__cluster_metadata-0", "s-1-0.abc-delete")
    for name in (*names, "__transaction_state-0"):
        (tmp_path / name).mkdir()
    for name in ("meta.properties", "replication-offset-checkpoint"):
        (tmp_path / name).write_text("")
    taken = sorted(p.name for p in tmp_path.iterdir() if _wanted(p, "s-1"))
    assert taken == [
        "__cluster_metadata-0",
        "__transaction_state-0",
        "meta.properties",
        "replication-offset-checkpoint",
        "s-1-0",
        "s-1-1",
    ]


def test_what_a_step_settles_on(tmp_path: Path) -> None:
    """A replica settles on its log end and its last batch's epoch."""
    from checkers.lineage import Lineage, read_log_dir
    from suites.explore.live.settle import _log_end
    from testsupport import craft
    from testsupport.craft import PartitionSpec

    assert _log_end(Lineage("t", 0, 1)) == (0, None)
    root = craft.write_log_dir(
        tmp_path / "b1", 1, {("t", 0): PartitionSpec([(0, 9, 1), (10, 19, 2)])}
    )
    assert _log_end(read_log_dir(root).lineages[("t", 0)]) == (20, 2)


def test_a_sigterm_waits_the_shutdown_retries_its_broker_logged(tmp_path: Path) -> None:
    """The backoffs counted are the retries logged after the mark, at the cluster's own
    backoff, or Kafka's default where the cluster leaves it alone."""
    from types import SimpleNamespace

    from suites.broker_logs import shutdown_backoffs

    log = tmp_path / "server.log"
    retry = "WARN [KafkaServer id=3] Retrying controlled shutdown after the previous attempt\n"
    log.write_text("INFO earlier\n" + retry)
    mark = log.stat().st_size
    with log.open("a") as f:
        f.write("INFO [KafkaServer id=3] Starting controlled shutdown\n" + retry * 3)
    node = SimpleNamespace(log_file=log)
    assert shutdown_backoffs(node, mark, {"controlled.shutdown.retry.backoff.ms": 1000}) == 3.0
    assert shutdown_backoffs(node, mark, {}) == 15.0
    assert shutdown_backoffs(node, log.stat().st_size, {}) == 0.0
    assert shutdown_backoffs(SimpleNamespace(log_file=tmp_path / "none.log"), 0, {}) == 0.0


# 0.10.2.2, explore seed 1, schedule 8 cut down on the model: broker 3's expiry (step 2)
# hands the controller to broker 1 in the model and to broker 2 on the brokers, which then
# leads after the preferred election (step 6) with the controller beside it.
CONTROLLER_RACE = """
{"format": 1, "seed": 1044731400,
 "cluster": {"mode": "zk", "brokers": 3, "replication_factor": 3, "replicas": [2, 1, 3],
  "controller": 3,
  "topic_config": {"min.insync.replicas": 1, "unclean.leader.election.enable": true},
  "broker_config": {"replica.lag.time.max.ms": 600000, "zookeeper.session.timeout.ms": 6000,
   "replica.high.watermark.checkpoint.interval.ms": 5000}},
 "steps": [
  {"kind": "expire-session", "target": "leader"},
  {"kind": "heal", "a": 2, "b": "quorum"},
  {"kind": "expire-session", "target": 3},
  {"kind": "hold-back", "target": "follower-in-isr"},
  {"kind": "produce", "count": 1, "acks": "1", "to": "leader"},
  {"kind": "hold-back", "target": "follower-in-isr"},
  {"kind": "elect-preferred"},
  {"kind": "expire-session", "target": "leader"},
  {"kind": "produce", "count": 25, "acks": "1", "to": "leader"}]}
"""


def test_the_controller_elections_the_brokers_held_are_told_in_the_first_prediction() -> None:
    schedule = loads(CONTROLLER_RACE)
    prediction = simulate(schedule, "0.10.2.2")
    assert prediction.failure() == "diverged"
    held = Judgement(None, "held", partitions={0: None, 1: None})
    assert compare(prediction, held, RunHistory(), schedule).category == DISAGREED
    # The model's own choice, told: it still predicts the divergence.
    c = compare(prediction, held, RunHistory(controller_after=[(2, 1)]), schedule)
    assert (c.category, c.predicted) == (DISAGREED, "diverged")
    # Broker 2 won, as the brokers had it: the model's prediction with it is theirs, an
    # agreement on what the run told, not one on a variant.
    c = compare(prediction, held, RunHistory(controller_after=[(2, 2)]), schedule)
    assert (c.category, c.agreed_if, c.predicted) == (AGREED, "", None)
    assert c.prediction == "consistent (pre-KIP-101 rules)"
    assert c.told == "given the controller elections the brokers held (broker 2 after step 2)"
    diverged = Judgement("diverged", "diverged", 0, partitions={0: "diverged", 1: None})
    assert (
        compare(prediction, diverged, RunHistory(controller_after=[(2, 2)]), schedule).category
        == DISAGREED
    )


def test_a_finding_that_hangs_on_a_controller_race_is_ranked_as_one() -> None:
    from basics.protocol import Protocol
    from runrecord.schedule import Schedule
    from suites.explore.drawing.guide import Candidate, races, score

    def candidate(schedule: Schedule, release: str) -> Candidate:
        prediction = simulate(schedule, release)
        return Candidate(0, schedule, prediction, score(prediction))

    raced = candidate(loads(CONTROLLER_RACE), "0.10.2.2")
    assert raced.prediction.steps[2].controller == 1  # the model's pick; broker 2 undoes it
    assert races(raced, Protocol.HIGH_WATERMARK)
    # KIP-279 scenario 1 (docs/schedules): its controller never loses the role.
    steady = candidate(load_schedule(EXAMPLE), "1.1.1")
    assert steady.prediction.failure() == "diverged"
    assert not races(steady, Protocol.KIP_101)


# The leader appends the COMMIT marker with its follower held back, then its session expires
# and the cut stays: broker 2 holds the coordinator's request as a zombie. A produce follows.
ZOMBIE = """
{"format": 1, "seed": 1,
 "cluster": {"mode": "kraft", "brokers": 3, "replication_factor": 2, "replicas": [2, 3]},
 "steps": [
  {"kind": "txn-write", "count": 2}, {"kind": "hold-back", "target": 3},
  {"kind": "txn-commit"}, {"kind": "expire-session", "target": 2},
  {"kind": "wait", "seconds": 40}, {"kind": "produce", "count": 1, "acks": "1"}]}
"""


def test_the_runs_clock_tells_the_model_when_a_zombies_request_timed_out() -> None:
    schedule = loads(ZOMBIE)
    prediction = simulate(schedule, "3.9.2")
    assert prediction.unpredictable and prediction.followed == "3.9.2"
    held = Judgement(None, "held", partitions={0: None, 1: None})
    real = _real(["done"] * len(schedule.steps))
    for r, seconds in zip(real, (1, 1, 1, 7, 40, 1), strict=True):
        r.seconds = seconds
    c = compare(prediction, held, RunHistory(real), schedule)
    assert (c.predicted, c.agree, c.unpredictable) == (None, True, "")
    assert c.told == "given how long the steps took on the brokers"
    # Had the session expiry taken 31 s, the request's timeout would fall inside the step
    # that made broker 2 a zombie: the model cannot place it.
    for r in real:
        r.seconds = 31 if r.index == 3 else 1
    c = compare(prediction, held, RunHistory(real), schedule)
    assert "waited in the purgatory of broker 2" in c.unpredictable


def test_evidence_copies_keep_a_preallocated_index_sparse(tmp_path: Path) -> None:
    # An active segment's index: a few entries, then zeros up to segment.index.bytes.
    index = tmp_path / "00000000000000000000.index"
    entries = bytes(range(1, 17)) * 4
    index.write_bytes(entries + bytes(10 * 1024 * 1024 - len(entries)))
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(bytes(HOLE) + b"batch" + bytes(HOLE + 3))  # zeros between data too
    for source in (index, log):
        copy = tmp_path / f"copy-{source.name}"
        _sparse_copy(source, copy)
        assert copy.read_bytes() == source.read_bytes()
    assert (tmp_path / f"copy-{index.name}").stat().st_blocks * 512 <= 2 * HOLE


def test_the_high_watermark_checkpoint_a_crash_left_is_read_from_the_dir_holding_it(
    tmp_path: Path,
) -> None:
    from types import SimpleNamespace

    from checkers.simulate import SimOptions, Simulator
    from suites.explore.live.context import Live, checkpointed_hw

    first, second = tmp_path / "data", tmp_path / "data2"
    for d in (first, second):
        d.mkdir()
    (first / "replication-offset-checkpoint").write_text("0\n1\ns-1 0 99\n")  # stale: moved
    assert checkpointed_hw([first, second], "s-1") is None  # no dir holds the partition
    (second / "s-1-0").mkdir()
    (second / "s-1-0.abc-future").mkdir()
    assert checkpointed_hw([first, second], "s-1") == 0  # no file yet: Kafka starts from 0
    (second / "replication-offset-checkpoint").write_text("0\n2\ns-1 1 4\ns-10 0 8\n")
    assert checkpointed_hw([first, second], "s-1") == 0  # no entry for it: 0 as well
    (second / "replication-offset-checkpoint").write_text("0\n2\ns-1 0 11\ns-1 1 4\n")
    assert checkpointed_hw([first, second], "s-1") == 11
    (second / "replication-offset-checkpoint").write_text("7\n")
    assert checkpointed_hw([first, second], "s-1") is None  # unreadable: nothing told

    # The live run keeps it by step and tells the simulator following the same steps.
    schedule = loads(OUTRUN)
    (second / "replication-offset-checkpoint").write_text("0\n1\ns-1 0 11\n")
    live = Live.__new__(Live)
    live.topic, live.history = "s-1", RunHistory(steps=[None] * 9)  # type: ignore[list-item]
    live.sim = Simulator(schedule.cluster, "1.1.1", SimOptions())
    live.cluster = SimpleNamespace(broker=lambda b: SimpleNamespace(log_dirs=[first, second]))
    live.note_hw_checkpoint(1)
    assert live.history.hw_checkpoints == [(9, 1, 11)]
    assert live.sim.options.hw_checkpoint_at == ((9, 1, 11),)
