"""One schedule on real brokers: what `logfork replay` runs once and `logfork explore` runs
for every candidate and every shrinking step.

On a cluster of the schedule's shape (suites.explore.engine.bench, reused across schedules), a
fresh topic with two partitions on the schedule's replicas: partition 0 holds exactly the
produce steps' batches, so that the protocol model's offsets are the brokers'; partition 1
takes the background workload (numbered acks=all and acks=1 writes). The steps run
(suites.explore.live.context); then everything is healed, the cluster converges, the topic's
evidence is copied into the schedule's run directory, and the invariants are judged
(checkers.schedules.judge) from the disk audit and the history checker, beside the model's
prediction for the same partition. The run directory is a scenario's: the same report
renders it.
"""

from __future__ import annotations

import contextlib
import platform
import secrets
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from basics.errors import NotReached, SetupError
from basics.releases import Release
from checkers.schedules.comparison import compare
from checkers.schedules.invariants import metadata_divergence
from checkers.schedules.judge import (
    BACKGROUND_PARTITION,
    SCHEDULE_PARTITION,
    judge,
    observed_symptom,
    schedule_outcome,
)
from checkers.simulate import Prediction, Simulator, simulate
from checkers.txn_reads import TxnReadCheck
from fixtures.waiting import NOT_REACHED, WaitTimeout, not_reached_summary, wait_until
from observe.stable import StableOffsets
from observe.state import StateRecorder
from observe.timeline import Timeline
from reports.engine_local import Judged
from runrecord.outcome import CONSISTENT, Outcome, Symptom, SymptomPair, finding_key
from runrecord.replay import (
    AGREED,
    AGREED_GIVEN,
    DISAGREED,
    Comparison,
    Judgement,
    StepResult,
    inside_a_step,
    placed_before,
)
from runrecord.run import RunInfo, Verdict
from runrecord.rundir import ERROR_TXT, RunDir
from runrecord.schedule import Schedule, write_schedule
from runrecord.schedule_expect import expected_symptom
from runrecord.typed import to_json
from suites.broker_logs import (
    broker_lines,
    fetcher_dies,
    log_mark,
    markers_skipped,
    rolled_back_at_timeout,
    stuck_follower,
)
from suites.convergence import converge
from suites.explore.engine.bench import Bench, needs_disks
from suites.explore.engine.evidence import copy_evidence
from suites.explore.engine.fetch_loop import fetch_loops
from suites.explore.engine.left_behind import left_behind
from suites.explore.engine.observed import Healed, observe
from suites.explore.live import (
    families,  # noqa: F401 - every kind's live action registered
    txn,
    writes,
)
from suites.explore.live.context import Live
from suites.explore.live.heal import heal_all
from suites.scenario import RunContext, ScenarioError
from suites.steps import write_batch
from suites.workload import Background, History

CONVERGE_TIMEOUT = 150.0
STALL = 30.0  # seconds without any change in ISRs or log end offsets: a stuck follower
PROBE_TIMEOUT = 30.0
FETCH_WAIT = 0.5  # replica.fetch.wait.max.ms, Kafka's default: a follower's fetch round
SCHEDULE_FILE = "schedule.json"


class Unhealthy(Exception):
    """The cluster failed the probe at the start of a schedule: retire it and run again."""


@dataclass
class ScheduleRun:
    verdict: Verdict
    prediction: Prediction
    run_dir: Path
    judgement: Judgement | None = None
    comparison: Comparison | None = None
    steps: list[StepResult] = field(default_factory=list)
    seconds: float = 0.0  # wall time, cluster boot excluded
    waits: float = 0.0  # what the protocol made it wait (session timeouts, wait steps, ...)
    checkpoint_wait: float = 0.0  # of `waits`, for a high watermark checkpoint after the heal
    fresh_cluster: str | None = None  # why a cluster was started for it
    txns_judged_ms: int | None = None  # when its transactions were judged (RunInfo)
    judged: Judged | None = None  # its judgement of the copied logs, as its report shows it

    @property
    def failure(self) -> str | None:
        """The finding's kind (None: held, or not reached)."""
        return self.judgement.failure if self.judgement is not None else None

    @property
    def finding(self) -> str | None:
        """The finding's kind with its cause, where the run can tell one: what the shrinker
        keeps (runrecord.outcome.finding_key)."""
        return finding_key(self.failure, self.judgement.cause if self.judgement else "")

    @property
    def outcome(self) -> Outcome:
        return self.verdict.outcome


def run_schedule(
    bench: Bench,
    schedule: Schedule,
    run_dir: Path,
    *,
    label: str = "replay",
    prediction: Prediction | None = None,
) -> ScheduleRun:
    """Run a schedule on the bench's cluster (a fresh one when the running one may not
    serve) and write its run directory. A cluster that fails the probe before the steps
    is retired and the schedule runs once more on a fresh one."""
    release = bench.release
    # The release's version, not only its protocol: the model follows what changed between
    # releases too (KIP-966's defaults, KAFKA-20734's skipped markers).
    prediction = prediction or simulate(schedule, release.version)
    for attempt in (1, 2):
        try:
            return _run(bench, schedule, run_dir, label, prediction)
        except Unhealthy as exc:
            bench.retire(f"the probe write failed: {exc}")
            if attempt == 2:
                return _not_run(
                    schedule, run_dir, label, prediction, release, Outcome.NOT_REACHED, str(exc)
                )
    raise AssertionError("unreachable")


def _not_run(
    schedule: Schedule,
    run_dir: Path,
    label: str,
    prediction: Prediction,
    release: Release,
    outcome: Outcome,
    why: str,
) -> ScheduleRun:
    record = RunDir(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_schedule(run_dir / SCHEDULE_FILE, schedule)
    mode = schedule.cluster.mode
    record.write_run(
        RunInfo(label, _title(schedule), str(release), mode, time.time(), platform.node())
    )
    verdict = Verdict(
        label, str(release), mode, outcome, Outcome.CONSISTENT, why, run_dir=str(run_dir)
    )
    record.write_verdict(verdict)
    return ScheduleRun(verdict, prediction, run_dir)


def _title(schedule: Schedule) -> str:
    return f"schedule of {len(schedule.steps)} steps (seed {schedule.seed})"


def _run(
    bench: Bench, schedule: Schedule, run_dir: Path, label: str, prediction: Prediction
) -> ScheduleRun:
    try:
        cluster, fresh = bench.acquire(schedule.cluster, run_dir.name, needs_disks(schedule))
    except SetupError as exc:
        return _not_run(
            schedule, run_dir, label, prediction, bench.release, Outcome.SETUP_FAILED, str(exc)
        )
    release = cluster.release
    mode = cluster.mode
    record = RunDir(run_dir.resolve())
    record.path.mkdir(parents=True, exist_ok=True)
    write_schedule(record.path / SCHEDULE_FILE, schedule)
    info = RunInfo(label, _title(schedule), str(release), mode, time.time(), platform.node())
    if txn.uses_transactions(schedule):
        info.txn_timeout_ms = txn.TXN_TIMEOUT_MS  # what `logfork audit` ages them by
    record.write_run(info)
    timeline = Timeline(record.timeline_writer())
    own_timeline, cluster.timeline = cluster.timeline, timeline
    history = History(record.producer_writer(), record.reads_writer)
    ctx = RunContext(cluster, history, record)
    started = time.monotonic()
    topic = f"s-{secrets.token_hex(4)}"
    marks = bench.marks()
    node_marks = {name: log_mark(node) for name, node in cluster.nodes.items()}
    timeline.phase("faults")
    result = ScheduleRun(
        Verdict(label, str(release), mode, Outcome.NOT_REACHED, Outcome.CONSISTENT, ""),
        prediction,
        record.path,
        fresh_cluster=fresh,
    )
    try:
        try:
            _body(ctx, schedule, topic, marks, node_marks, prediction, result)
        except NOT_REACHED as exc:
            # A state not reached, or a fault Kafka or a tool refused (iptables refused a
            # rule, a release lacks an API), on a cluster left unknown.
            summary = not_reached_summary(exc)
            timeline.record("note", "not-reached", reason=summary)
            result.verdict.summary = summary
            bench.retire(f"the last schedule was not reached: {summary[:200]}")
        except Unhealthy:
            raise
        except SetupError as exc:
            result.verdict.outcome, result.verdict.summary = Outcome.SETUP_FAILED, str(exc)
            bench.retire(str(exc))
        except Exception as exc:
            # Any other error is logfork's own (a RunRecordError, a TypeError): raised, with
            # its traceback in the run directory, never a state not reached.
            (record.path / ERROR_TXT).write_text(traceback.format_exc())
            bench.retire(f"logfork failed: {exc}")
            raise ScenarioError(
                f"schedule {run_dir.name} on Kafka {release} ({mode}) failed unexpectedly: "
                f"{type(exc).__name__}: {exc}. The traceback is in {record.path / ERROR_TXT}."
            ) from exc
    finally:
        cluster.timeline = own_timeline
        result.judged = ctx.judged
    if result.verdict.outcome.has_verdict:
        with_cluster_timeline(cluster, timeline, lambda: bench.put_away(topic, marks))
    left = next((s.leaves_behind for s in schedule.steps if s.leaves_behind), None)
    if left is not None:
        bench.retire(left)
    result.seconds = time.monotonic() - started
    # The protocol's own waits: each step's (session timeouts, wait steps, acks=all writes
    # timing out, controlled-shutdown retries), one fetch round once all is healed, and
    # the high watermark checkpoint a convergence waited for (at most one interval).
    result.waits = sum(s.waits for s in result.steps) + FETCH_WAIT + result.checkpoint_wait
    verdict = result.verdict
    verdict.run_dir = str(record.path)
    verdict.phases = {k: v for k, v in timeline.phase_durations().items() if k != "done"}
    verdict.details.update(
        {
            "schedule": SCHEDULE_FILE,
            "steps": [to_json(s) for s in result.steps],
            "model": prediction.to_dict(),
            "seconds": round(result.seconds, 1),
            "protocol_waits": round(result.waits, 1),
            "fresh_cluster": fresh,
        }
    )
    record.write_verdict(verdict)
    info.finished, info.outcome = time.time(), verdict.outcome
    info.as_expected, info.boot = verdict.as_expected, cluster.boot
    info.txns_judged_ms = result.txns_judged_ms
    record.write_run(info)
    record.write_cluster(cluster.info())
    return result


def with_cluster_timeline(cluster: Any, timeline: Timeline, work: Any) -> None:
    """Do `work` with the cluster's faults and notes recorded into `timeline`, in a phase
    of its own (deleting the topic and checking the cluster's health)."""
    own, cluster.timeline = cluster.timeline, timeline
    timeline.phase("put-away")
    try:
        work()
    finally:
        cluster.timeline = own


def _body(
    ctx: RunContext,
    schedule: Schedule,
    topic: str,
    marks: dict[int, int],
    node_marks: dict[str, int],
    prediction: Prediction,
    result: ScheduleRun,
) -> None:
    cluster, shape = ctx.cluster, schedule.cluster
    replicas = list(shape.replicas)
    config = shape.topic_config.kafka_configs()
    # Earlier schedules' writes are old enough for the OS to have written them back: a power
    # loss takes what this schedule wrote (fixtures.cluster.Cluster.settle_disks).
    cluster.settle_disks()
    cluster.create_topic(topic, [shape.partition_replicas(p) for p in shape.partitions], config)
    writes.create_filler_topic(cluster, schedule, topic)
    ctx.topic = topic
    _probe(ctx, topic, replicas[0])
    timeline = ctx.timeline
    timeline.record(
        "note",
        "model",
        protocol=prediction.protocol.value,
        outcome=prediction.outcome.value,
        lines=[prediction.summary(), *prediction.events],
    )
    writer = ctx.run.states_writer()
    recorders = [StateRecorder(cluster, topic, p, writer).start() for p in shape.partitions]
    background = Background(cluster, ctx.history, topic, partitions=shape.partitions[1:]).start()
    live = Live(ctx, schedule, topic, Simulator(shape, prediction.followed), marks)
    result.steps = live.history.steps  # the run's history, as the steps fill it
    stable: dict[int, StableOffsets] = {}  # each partition transactions wrote, once they ended
    reads: TxnReadCheck | None = None  # what consumers read of it then
    loops: dict[int, dict[int, str]] = {}  # partition -> broker -> a fetch loop it logs
    strays: dict[int, str] = {}  # broker -> a copy a reassignment left current on it
    try:
        txn.prepare(live, live.txn)
        for i, step in enumerate(schedule.steps):
            live.apply(i, step)
        timeline.phase("heal")
        # Before 2.3 a follower that logs a stuck mark after this point stays stuck: its
        # fetcher thread died, and no broker that is up is restarted again (the heal only
        # restarts stopped ones). From 2.3 a failed partition resumes with its next leader
        # change (KIP-461), so only a lack of progress decides.
        healing = {b: log_mark(node) for b, node in cluster.brokers.items()}
        heal_all(live)
        background.stop(timeout=20)
        convergence = converge(
            ctx,
            topic,
            replicas,
            timeout=CONVERGE_TIMEOUT,
            partitions=shape.partitions,
            since=healing,
            stall=STALL,
            stop_on_stuck=fetcher_dies(cluster),
            replicas_of={SCHEDULE_PARTITION: live.reassigning},
        )
        replicas = sorted({*replicas, *live.reassigning})
        interval = max(shape.checkpoint_interval_ms(b) for b in replicas) / 1000
        result.checkpoint_wait = min(convergence.checkpoint_wait, interval)
        if not convergence.converged and not convergence.stuck:
            for b in replicas:  # what the followers logged since the schedule began
                found = stuck_follower(cluster, b, topic, since=marks.get(b, 0))
                if found is not None:
                    convergence.stuck_partitions[b], convergence.stuck[b] = found
        if convergence.converged:
            loops = fetch_loops(cluster, topic, replicas, healing)
            removed = [b for b in cluster.brokers if b not in live.reassigning]
            strays = left_behind(cluster, topic, SCHEDULE_PARTITION, removed)
            stable = txn.await_transactions_ended(live, live.txn)
            reads = txn.client_reads(live, live.txn)
    finally:
        live.txn.close()
        background.stop(timeout=5)
        states = {r.partition: r.stop() for r in recorders}
    if not (convergence.converged or convergence.stuck or convergence.stalled):
        raise NotReached(
            f"the replicas of {topic} converging or stalling within {CONVERGE_TIMEOUT:.0f} s",
            f"still changing: {convergence.partitions}",
        )
    _metadata_settled(cluster)
    timeline.phase("check")
    copy_evidence(cluster, topic, ctx.run, node_marks)
    transactional = txn.uses_transactions(schedule)
    if transactional:
        result.txns_judged_ms = int(time.time() * 1000)  # run.json keeps it, for the audit
    # What the coordinators logged, read once for both questions asked of it.
    logs = broker_lines(cluster, marks) if stable or transactional else {}
    skipped = markers_skipped(logs, topic) if stable else {}
    rollbacks = rolled_back_at_timeout(logs, live.txn.id) if transactional else []
    healed = Healed(convergence, states, stable, result.txns_judged_ms, loops, strays, reads,
                    skipped)  # fmt: skip
    observed = observe(ctx, topic, live, healed)
    shape_topic = shape.topic_config
    judgement = judge(
        observed,
        release=cluster.release,
        mode=cluster.mode,
        unclean_enabled=shape_topic.unclean_leader_election_enable,
        flush_every_message=shape_topic.flush_messages == 1,
        exited=live.exited,
    )
    history = live.history
    for t in rollbacks:  # where the coordinator's aborts at the timeout fell among the steps
        history.timeout_aborts.append(placed_before(t, history.steps))
        if inside_a_step(t, history.steps):
            history.timeout_aborts_within.append(history.timeout_aborts[-1])
    comparison = compare(prediction, judgement, history, schedule)
    result.judgement, result.comparison = judgement, comparison
    verdict = result.verdict
    expected = expected_symptom(schedule.expect, cluster.release.parts, cluster.mode)
    verdict.outcome, verdict.expected = schedule_outcome(judgement, expected)
    observed = observed_symptom(judgement)
    # Without a declared symptom every invariant must hold: the pair says so, and names the
    # kind of a finding (a fenced leader, say) that the outcome only calls "diverged".
    verdict.symptom = SymptomPair(expected or Symptom(CONSISTENT), observed)
    verdict.summary = judgement.summary
    if verdict.outcome == Outcome.DIVERGED and expected is not None:
        verdict.summary = (
            f"the brokers showed {observed.describe()}, not the schedule's expected "
            f"{expected.describe()}: {verdict.summary}"
        )
    # Its category, in words: agreement on a variant the run could not tell is not the
    # model's own agreement.
    agreement = {
        AGREED: "agrees",
        AGREED_GIVEN: "agrees only on a variant the run could not tell; on its own it says",
        DISAGREED: "DISAGREES",
    }.get(comparison.category, "")
    if comparison.unpredictable:
        agreement = f"cannot predict this schedule ({comparison.unpredictable}); it says"
    verdict.summary += (
        f"; the model ({prediction.protocol.rules}) {agreement}: {comparison.prediction}"
    )
    if comparison.told:
        verdict.summary += f" ({comparison.told})"
    if comparison.agreed_if:
        verdict.summary += f" (agrees only {comparison.agreed_if})"
    verdict.details.update(
        {
            "judgement": to_json(judgement),
            "comparison": to_json(comparison),
            "convergence": convergence.to_dict(),
            "power_losses": [to_json(c) for c in live.history.power_cuts],
            "controller_after": [list(c) for c in live.history.controller_after],  # (step, broker)
            # (step, broker, offset): the high watermark checkpoint on disk after each crash
            "hw_checkpoints": [list(c) for c in live.history.hw_checkpoints],
            "agreement": comparison.category,
        }
    )


def _probe(ctx: RunContext, topic: str, leader: int) -> None:
    """One acks=all write to the background partition, answered within PROBE_TIMEOUT: every
    follower of the new topic fetches (a fetcher thread killed by an earlier schedule would
    not), or the cluster is unhealthy."""
    sends = write_batch(
        ctx, topic, 1, to=leader, acks="all", partition=BACKGROUND_PARTITION, timeout=PROBE_TIMEOUT
    )
    if not all(s.ok for s in sends):
        raise Unhealthy(f"an acks=all write to {topic}-{BACKGROUND_PARTITION}: {sends[0].error}")


# How long the metadata log's copies get to agree after the heal. A voter that led an epoch
# alone while isolated holds records of that epoch past the new leader's; it truncates them
# only once it has heard of the new epoch and fetched with its diverging epoch (KIP-595),
# seen on 4.4.0 half a second after it became a follower, which can be after the
# partitions converged.
METADATA_SETTLE_SECONDS = 60.0


def _metadata_settled(cluster: Any) -> None:
    """KRaft: wait, before the evidence is copied, until every node's metadata log agrees
    with the others' (`metadata_divergence` over the live nodes' dirs), for at most
    METADATA_SETTLE_SECONDS: a divergence that outlives that is the cluster's, and the
    copies then show it."""
    if cluster.mode != "kraft":
        return
    dirs = [n.data_dir for n in cluster.nodes.values() if n.role.name != "zookeeper"]
    with contextlib.suppress(WaitTimeout):
        wait_until(
            lambda: metadata_divergence(*dirs),
            lambda split: split is None,
            what="the metadata log's copies to agree",
            timeout=METADATA_SETTLE_SECONDS,
        )
