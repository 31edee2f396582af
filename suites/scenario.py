"""What a scenario is, how one run of it goes, and how its verdict is earned.

A scenario provisions a cluster (fixtures), creates its topic and records its partition's
states, drives the cluster into the state its KIP describes (faults plus the workload),
verifies that every intermediate state was reached, lets the cluster converge, and hands
the on-disk logs and the producer's history to the checkers. Its outcome is then compared
with what the release should do: before the fix the bug must show, from the fix on it
must not. A scenario that did not reach its states ends "not reached", one whose cluster
could not start "setup failed"; neither passes or fails.
"""

from __future__ import annotations

import platform
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from basics.errors import LogforkError, NotReached, SetupError
from basics.releases import Release
from checkers.lineage import Lineage
from fixtures.cluster import Cluster, ClusterSpec
from fixtures.nodes import Node
from fixtures.releases import resolve
from fixtures.waiting import NOT_REACHED, not_reached_summary
from observe.replicas import replica, spans
from observe.state import StateRecorder
from observe.timeline import Timeline
from reports.engine_local import Judged
from runrecord.outcome import CONSISTENT, Outcome, Symptom, SymptomPair
from runrecord.power import CUT
from runrecord.run import RunInfo, Verdict
from runrecord.rundir import ERROR_TXT, RunDir
from suites.workload import History


class ScenarioError(LogforkError):
    """A scenario broke in a way logfork did not foresee (a bug in logfork, most likely)."""


@dataclass(frozen=True)
class Departure:
    """Where a release does not do what the KIP's text says, as observed and documented.

    On such a release the departure is the expected outcome: asserted, never skipped, and
    stated in the verdict; a release that stops departing is reported too.
    """

    until: str  # the first release that no longer departs
    kip_says: str
    kafka_does: str
    reference: str  # the code or JIRA that explains it
    symptom: Symptom  # what the brokers show when they depart (kind DEPARTS)


@dataclass(frozen=True)
class Topic:
    """The topic a scenario works on: created before the body runs, partition 0's states
    recorded to states.jsonl throughout."""

    name: str
    assignment: Callable[[str], list[list[int]]]  # mode -> replicas per partition
    config: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def fixed(cls, name: str, replicas: Sequence[int], **config: Any) -> Topic:
        """One partition with the same replicas in both modes."""
        return cls(name, lambda _mode: [list(replicas)], config)


@dataclass
class Finding:
    """What a scenario body observed: the raw material of a verdict."""

    observed: Symptom  # what the brokers showed: consistent, or which bug, and where
    summary: str  # one line a Kafka engineer reads first
    details: dict[str, Any] = field(default_factory=dict)
    # The model's predicted kind where it made a prediction (checkers.model.Fate's values).
    predicted: str | None = None

    @property
    def bug_seen(self) -> bool:
        return self.observed.kind != CONSISTENT


@dataclass
class RunContext:
    cluster: Cluster
    history: History
    run: RunDir
    topic: str | None = None
    recorder: StateRecorder | None = None
    judged: Judged | None = None  # the run's latest judgement of its logs, as its report shows it

    @property
    def timeline(self) -> Timeline:
        return self.cluster.timeline

    @property
    def release(self) -> Release:
        return self.cluster.release

    @property
    def mode(self) -> str:
        return self.cluster.mode

    @property
    def run_dir(self) -> Path:
        return self.run.path

    def broker(self, broker_id: int) -> Node:
        return self.cluster.broker(broker_id)

    def expect(self, holds: bool, expected: str, observed: object) -> None:
        """A state the scenario needs: when it does not hold, the run ends not reached,
        saying what was expected and what was observed."""
        if not holds:
            raise NotReached(expected, str(observed))

    def expect_log(
        self, broker_id: int, batches: list[tuple[int, int]], what: str, *, topic: str | None = None
    ) -> Lineage:
        """The broker's replica holds exactly these batches (base, last), read from disk."""
        lineage = replica(self.cluster, broker_id, topic or self.topic or "")
        actual = [(b.base_offset, b.last_offset) for b in lineage.batches]
        shown = " ".join(f"[{a},{b}]" for a, b in batches)
        self.expect(
            actual == batches, f"{what}: broker {broker_id} holding {shown}", spans(lineage)
        )
        return lineage


@dataclass(frozen=True)
class Scenario:
    id: str
    title: str
    body: Callable[[RunContext], Finding]
    cluster: Callable[[str, str], ClusterSpec]  # (kafka version or path, mode) -> spec
    topic: Topic | None = None
    kip: str | None = None
    jira: str | None = None
    fixed_in: str | None = None  # None: the behaviour must hold on every release
    broken_since: str | None = None  # a regression: releases before it behave as fixed
    min_release: str | None = None  # below it the scenario does not apply
    modes: tuple[str, ...] = ("zk", "kraft")
    min_release_reason: str = ""
    departures: tuple[Departure, ...] = ()
    # Modes the fix never reached, with the reason: there the loss is expected on every
    # release (KIP-903 fixed KRaft only; ZooKeeper mode keeps the bug until its removal).
    unfixed: dict[str, str] = field(default_factory=dict)
    # The bug as the brokers show it where it is expected (before `fixed_in`, in the modes
    # of `unfixed`): "reproduced" means exactly this, nothing else.
    symptom: Symptom | None = None
    # How its power losses lose data (fixtures.disks.POWER_MODELS): the first is the
    # default, the others what `--power-model` may choose.
    power_models: tuple[str, ...] = (CUT,)
    # Power models under which the bug cannot show, with why: there every release is
    # expected to hold (a filesystem that keeps what the broker forgot to sync).
    safe_under: dict[str, str] = field(default_factory=dict)
    # The longest transaction.timeout.ms its transactional producers use; recorded in
    # run.json, so that an audit of its log dirs judges hanging transactions by it.
    txn_timeout_ms: int | None = None

    def __post_init__(self) -> None:
        if (self.fixed_in is not None or self.unfixed) and self.symptom is None:
            raise ValueError(f"scenario {self.id} expects a bug but declares no symptom")

    def departure(self, release: Release) -> Departure | None:
        return next((d for d in self.departures if release.parts < Release(d.until).parts), None)

    def expected(
        self, release: Release, mode: str | None = None, power_model: str | None = None
    ) -> Outcome:
        if self.departure(release) is not None:
            return Outcome.DEPARTS
        if power_model in self.safe_under:
            return Outcome.CONSISTENT
        if mode in self.unfixed:
            return Outcome.REPRODUCED
        if self.broken_since is not None and release.parts < Release(self.broken_since).parts:
            return Outcome.CONSISTENT
        if self.fixed_in is not None and release.parts < Release(self.fixed_in).parts:
            return Outcome.REPRODUCED
        return Outcome.CONSISTENT

    def expected_symptom(
        self, release: Release, mode: str | None = None, power_model: str | None = None
    ) -> Symptom:
        """What the brokers must show on this release, mode and power model: the departure's
        symptom where the release departs, the bug's where it is expected, else consistency."""
        departure = self.departure(release)
        if departure is not None:
            return departure.symptom
        if self.expected(release, mode, power_model) == Outcome.REPRODUCED:
            assert self.symptom is not None  # checked in __post_init__
            return self.symptom
        return Symptom(CONSISTENT)

    def fixed_text(self) -> str:
        """Where the fix is, for `logfork list` and the README: "3.5.0 (kraft; zk never)"."""
        if self.fixed_in is None and not self.unfixed:
            return "must hold everywhere"
        if self.fixed_in is None:
            return "never fixed"
        never = "; ".join(f"{m} never" for m in self.unfixed)
        fixed_modes = [m for m in self.modes if m not in self.unfixed]
        where = f" ({'/'.join(fixed_modes)}; {never})" if never else ""
        since = f"broken in {self.broken_since}, " if self.broken_since else ""
        return f"{since}fixed in {self.fixed_in}{where}"

    def not_applicable(
        self, release: Release, mode: str, power_model: str | None = None
    ) -> str | None:
        if power_model is not None and power_model not in self.power_models:
            return f"its power losses run under {' or '.join(self.power_models)}, not {power_model}"
        if mode not in self.modes:
            return f"runs in {' and '.join(self.modes)} mode only"
        if mode not in release.modes:
            return f"Kafka {release} has no {mode} mode"
        if self.min_release and release.parts < Release(self.min_release).parts:
            return self.min_release_reason or f"needs Kafka {self.min_release} or later"
        return None


def _body(scenario: Scenario, ctx: RunContext) -> Finding:
    """The scenario's topic created and its states recorded around its body."""
    if scenario.topic is None:
        return scenario.body(ctx)
    topic = scenario.topic
    ctx.cluster.create_topic(topic.name, topic.assignment(ctx.mode), topic.config)
    ctx.topic = topic.name
    ctx.recorder = StateRecorder(ctx.cluster, topic.name, 0, ctx.run.states_writer())
    with ctx.recorder:
        return scenario.body(ctx)


def judge(
    scenario: Scenario,
    release: Release,
    mode: str,
    finding: Finding,
    power_model: str | None = None,
) -> tuple[Outcome, str]:
    """The outcome the brokers earned, and its summary. "reproduced" (or "departs") only
    when they showed exactly the symptom the scenario declares for the release; any other
    bug is "diverged", with both symptoms side by side."""
    expected = scenario.expected(release, mode, power_model)
    wanted = scenario.expected_symptom(release, mode, power_model)
    observed = finding.observed
    summary = finding.summary
    if not finding.bug_seen:
        outcome = Outcome.CONSISTENT
    elif expected in (Outcome.REPRODUCED, Outcome.DEPARTS) and wanted.matches(observed):
        outcome = expected
    else:
        outcome = Outcome.DIVERGED
    if outcome == Outcome.DIVERGED and wanted.kind != CONSISTENT:
        summary = (
            f"the brokers showed {observed.describe()}, not the scenario's "
            f"{wanted.describe()}: {summary}"
        )
    if mode in scenario.unfixed and outcome == expected and finding.bug_seen:
        summary += f". A known loss, never fixed in {mode} mode: {scenario.unfixed[mode]}"
    if power_model in scenario.safe_under:
        summary += f". Under {power_model} it cannot show: {scenario.safe_under[power_model]}"
    departure = scenario.departure(release)
    if departure is not None:
        summary += (
            f". {scenario.kip} says: {departure.kip_says}. Kafka {release} instead "
            f"{departure.kafka_does} ({departure.reference})"
        )
    return outcome, summary


def model_line(finding: Finding) -> str | None:
    """Where the model made a prediction the brokers did not follow: what each did."""
    if finding.predicted is None or finding.predicted == finding.observed.kind:
        return None
    return f"the model predicted {finding.predicted}; the brokers {finding.observed.kind}"


@dataclass
class ScenarioRun:
    verdict: Verdict
    judged: Judged | None = None  # what it judged of its logs last (None: it judged none)


def run(scenario: Scenario, kafka: str, mode: str, **options: Any) -> Verdict:
    """`run_judged`'s verdict alone."""
    return run_judged(scenario, kafka, mode, **options).verdict


def run_judged(
    scenario: Scenario,
    kafka: str,
    mode: str,
    *,
    out: Path = Path("runs"),
    base_image: str | None = None,
    power_model: str | None = None,
) -> ScenarioRun:
    """One run of a scenario against a fresh cluster. Writes the run directory and returns
    the verdict, with what the run judged of its logs (what its report renders); an unknown
    release or scenario raises before any run directory exists. `power_model`: how its
    power losses lose data (default: the scenario's first)."""
    release = resolve(kafka).release
    model = power_model or scenario.power_models[0]
    expected = scenario.expected(release, mode, model)
    wanted = scenario.expected_symptom(release, mode, model)

    def verdict(
        outcome: Outcome, summary: str, observed: Symptom | None = None, **extra: Any
    ) -> Verdict:
        return Verdict(
            scenario.id,
            str(release),
            mode,
            outcome,
            expected,
            summary,
            scenario.jira,
            scenario.kip,
            scenario.fixed_in,
            symptom=SymptomPair(wanted, observed),
            **extra,
        )

    reason = scenario.not_applicable(release, mode, power_model)
    if reason:
        return ScenarioRun(verdict(Outcome.NOT_APPLICABLE, f"not applicable: {reason}"))

    spec = scenario.cluster(kafka, mode)
    spec.base_image = base_image or spec.base_image
    spec.power_model = model
    cluster = Cluster(spec, run_dir=None)
    record = RunDir((out / f"{scenario.id}-{release}-{mode}-{cluster.run_id}").resolve())
    cluster.run_dir = record.path
    record.path.mkdir(parents=True, exist_ok=True)
    cluster.timeline = timeline = Timeline(record.timeline_writer())
    history = History(record.producer_writer(), record.reads_writer)
    info = RunInfo(
        scenario=scenario.id,
        title=scenario.title,
        release=str(release),
        mode=mode,
        started=time.time(),
        host=platform.node(),
        kip=scenario.kip,
        jira=scenario.jira,
        fixed_in=scenario.fixed_in,
        power_model=spec.power_model,
        txn_timeout_ms=scenario.txn_timeout_ms,
    )
    record.write_run(info)
    timeline.phase("boot")
    ctx: RunContext | None = None
    try:
        with cluster:
            timeline.phase("faults")
            ctx = RunContext(cluster, history, record)
            finding = _body(scenario, ctx)
            timeline.phase("teardown")
        timeline.phase("done")
        outcome, summary = judge(scenario, release, mode, finding, model)
        result = verdict(
            outcome,
            summary,
            finding.observed,
            details=finding.details,
            model=model_line(finding),
        )
    except NOT_REACHED as exc:
        # A wait that timed out inside a scenario is a state that was not reached.
        summary = not_reached_summary(exc)
        timeline.record("note", "not-reached", reason=summary)
        result = verdict(Outcome.NOT_REACHED, summary)
    except SetupError as exc:
        # The cluster could not start (no engine, no image, a node that died booting):
        # nothing was tested, and the reason is one paragraph, not a traceback.
        timeline.record("note", "setup-failed", reason=str(exc))
        result = verdict(Outcome.SETUP_FAILED, str(exc))
    except Exception as exc:
        (record.path / ERROR_TXT).write_text(traceback.format_exc())
        raise ScenarioError(
            f"{scenario.id} on Kafka {release} ({mode}) failed unexpectedly: "
            f"{type(exc).__name__}: {exc}. The traceback is in {record.path / ERROR_TXT}."
        ) from exc
    result.run_dir = str(record.path)
    result.phases = timeline.phase_durations()
    result.phases.pop("done", None)
    record.write_verdict(result)
    info.finished = time.time()
    info.outcome = result.outcome
    info.as_expected = result.as_expected
    info.boot = cluster.boot
    record.write_run(info)
    return ScenarioRun(result, ctx.judged if ctx is not None else None)
