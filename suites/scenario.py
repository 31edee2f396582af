"""What a scenario is, how one run of it goes, and how its verdict is earned.

A scenario provisions a cluster (fixtures), drives it into the state its KIP describes
(faults plus the workload), verifies that every intermediate state was reached, lets the
cluster converge, and hands the on-disk logs to the checker. Its outcome is then compared
with what the release should do: before the fix the bug must show, from the fix on it must
not. A scenario that did not reach its states ends "not reached", never pass or fail.
"""

from __future__ import annotations

import json
import platform
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from faults.timeline import Timeline
from fixtures.cluster import Cluster, ClusterSpec
from fixtures.errors import LogforkError, NotReached
from fixtures.releases import Release, resolve
from fixtures.waiting import Aborted, WaitTimeout
from suites.workload import History


class Outcome(StrEnum):
    CONSISTENT = "consistent"  # replicas agree and no acknowledged write was lost
    REPRODUCED = "reproduced"  # the known bug showed, on a release before its fix
    DEPARTS = "departs"  # the release departs from the KIP's text, as logfork documents
    DIVERGED = "diverged"  # replicas diverged or data was lost where the release should not
    NOT_REACHED = "not-reached"  # the scenario could not create the state it needs
    NOT_APPLICABLE = "not-applicable"  # the release or mode lacks what the scenario tests


class ScenarioError(LogforkError):
    """A scenario broke in a way logfork did not foresee (a bug in logfork, most likely)."""


EXIT_AS_EXPECTED = 0
EXIT_NOT_AS_EXPECTED = 1
EXIT_USAGE = 2
EXIT_NOT_REACHED = 3


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


@dataclass
class Finding:
    """What a scenario body observed: the raw material of a verdict."""

    bug_seen: bool  # the divergence / loss / stuck follower the scenario is about
    summary: str  # one line a Kafka engineer reads first
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class Verdict:
    scenario: str
    release: str
    mode: str
    outcome: Outcome
    expected: Outcome
    summary: str
    jira: str | None = None
    kip: str | None = None
    fixed_in: str | None = None
    run_dir: str | None = None
    phases: dict[str, float] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def as_expected(self) -> bool:
        return self.outcome == self.expected

    @property
    def exit_code(self) -> int:
        if self.outcome in (Outcome.NOT_REACHED, Outcome.NOT_APPLICABLE):
            return EXIT_NOT_REACHED if self.outcome == Outcome.NOT_REACHED else EXIT_AS_EXPECTED
        return EXIT_AS_EXPECTED if self.as_expected else EXIT_NOT_AS_EXPECTED

    def headline(self) -> str:
        if self.outcome == Outcome.NOT_APPLICABLE:
            return f"{self.scenario} on Kafka {self.release} ({self.mode}): {self.summary}"
        if self.outcome == Outcome.NOT_REACHED:
            verdict = "NOT REACHED"
        elif self.as_expected and self.outcome == Outcome.DEPARTS:
            verdict = f"KNOWN DEPARTURE FROM {self.kip}"
        elif self.as_expected:
            verdict = "AS THE KIP SAYS"
        else:
            verdict = "NOT AS THE KIP SAYS"
        ref = f" [{self.jira}]" if self.jira else ""
        return (
            f"{verdict}: {self.scenario} on Kafka {self.release} ({self.mode}) "
            f"{self.outcome.value}{ref} (expected {self.expected.value}): {self.summary}"
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["as_expected"] = self.as_expected
        return data


@dataclass
class RunContext:
    cluster: Cluster
    timeline: Timeline
    history: History
    run_dir: Path

    @property
    def release(self) -> Release:
        return self.cluster.release

    @property
    def mode(self) -> str:
        return self.cluster.mode

    def write_json(self, name: str, data: Any) -> Path:
        path = self.run_dir / name
        path.write_text(json.dumps(data, indent=1, default=str))
        return path


@dataclass(frozen=True)
class Scenario:
    id: str
    title: str
    body: Callable[[RunContext], Finding]
    cluster: Callable[[str, str], ClusterSpec]  # (kafka version or path, mode) -> spec
    kip: str | None = None
    jira: str | None = None
    fixed_in: str | None = None  # None: the behaviour must hold on every release
    min_release: str | None = None  # below it the scenario does not apply
    modes: tuple[str, ...] = ("zk", "kraft")
    min_release_reason: str = ""
    departures: tuple[Departure, ...] = ()

    def departure(self, release: Release) -> Departure | None:
        return next((d for d in self.departures if release.parts < Release(d.until).parts), None)

    def expected(self, release: Release) -> Outcome:
        if self.departure(release) is not None:
            return Outcome.DEPARTS
        if self.fixed_in is not None and release.parts < Release(self.fixed_in).parts:
            return Outcome.REPRODUCED
        return Outcome.CONSISTENT

    def not_applicable(self, release: Release, mode: str) -> str | None:
        if mode not in self.modes:
            return f"runs in {' and '.join(self.modes)} mode only"
        if mode not in release.modes:
            return f"Kafka {release} has no {mode} mode"
        if self.min_release and release.parts < Release(self.min_release).parts:
            return self.min_release_reason or f"needs Kafka {self.min_release} or later"
        return None


def run(
    scenario: Scenario,
    kafka: str,
    mode: str,
    *,
    out: Path = Path("runs"),
    base_image: str | None = None,
) -> Verdict:
    """One run of a scenario against a fresh cluster. Writes the run directory and returns
    the verdict; LogforkErrors about the machine (no engine, unknown release) propagate."""
    release = resolve(kafka).release
    expected = scenario.expected(release)

    def verdict(outcome: Outcome, summary: str, **extra: Any) -> Verdict:
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
            **extra,
        )

    reason = scenario.not_applicable(release, mode)
    if reason:
        return verdict(Outcome.NOT_APPLICABLE, f"not applicable: {reason}")

    spec = scenario.cluster(kafka, mode)
    spec.base_image = base_image or spec.base_image
    cluster = Cluster(spec, run_dir=None)
    run_dir = (out / f"{scenario.id}-{release}-{mode}-{cluster.run_id}").resolve()
    cluster.run_dir = run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    timeline = Timeline(run_dir / "timeline.jsonl")
    history = History(run_dir / "producer.jsonl")
    meta = {
        "scenario": scenario.id,
        "title": scenario.title,
        "kip": scenario.kip,
        "jira": scenario.jira,
        "fixed_in": scenario.fixed_in,
        "release": str(release),
        "mode": mode,
        "started": time.time(),
        "host": platform.node(),
    }
    (run_dir / "run.json").write_text(json.dumps(meta, indent=1))
    timeline.phase("boot")
    try:
        with cluster:
            ctx = RunContext(cluster, timeline, history, run_dir)
            timeline.phase("faults")
            finding = scenario.body(ctx)
        timeline.phase("done")
        if finding.bug_seen:
            bad = (Outcome.REPRODUCED, Outcome.DEPARTS)
            outcome = expected if expected in bad else Outcome.DIVERGED
        else:
            outcome = Outcome.CONSISTENT
        departure = scenario.departure(release)
        summary = finding.summary
        if departure is not None:
            summary += (
                f". {scenario.kip} says: {departure.kip_says}. Kafka {release} instead "
                f"{departure.kafka_does} ({departure.reference})"
            )
        result = verdict(outcome, summary, details=finding.details)
    except (NotReached, WaitTimeout, Aborted) as exc:
        # A wait that timed out inside a scenario is a state that was not reached.
        summary = str(exc) if isinstance(exc, NotReached) else f"not reached: {exc}"
        timeline.record("note", "not-reached", reason=summary)
        result = verdict(Outcome.NOT_REACHED, summary)
    except Exception as exc:
        (run_dir / "error.txt").write_text(traceback.format_exc())
        raise ScenarioError(
            f"{scenario.id} on Kafka {release} ({mode}) failed unexpectedly: "
            f"{type(exc).__name__}: {exc}. The traceback is in {run_dir / 'error.txt'}."
        ) from exc
    result.run_dir = str(run_dir)
    result.phases = timeline.phase_durations()
    result.phases.pop("done", None)
    (run_dir / "verdict.json").write_text(json.dumps(result.to_json(), indent=1, default=str))
    meta.update(
        {
            "finished": time.time(),
            "outcome": result.outcome.value,
            "as_expected": result.as_expected,
            "cluster": cluster.boot and asdict(cluster.boot),
        }
    )
    (run_dir / "run.json").write_text(json.dumps(meta, indent=1, default=str))
    return result
