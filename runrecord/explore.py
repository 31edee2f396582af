"""explore.json: one `logfork explore` run: every schedule it ran for real (the model's
prediction beside the brokers' outcome), the findings it shrank, the clusters it started
and why. Rewritten after every schedule, so an interrupted run keeps what it did."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runrecord.outcome import Outcome
from runrecord.replay import (
    AGREED,
    AGREED_GIVEN,
    CANNOT_PREDICT,
    DISAGREED,
    NOT_COMPARED,
    category,
)

EXPLORE_JSON = "explore.json"


@dataclass
class ScheduleEntry:
    """One schedule run for real."""

    number: int  # in running order, from 1
    candidate: int  # its index among the candidates (drawn or bred)
    steps: int
    skipped: int  # steps skipped for real
    outcome: Outcome
    failure: str | None  # the finding's kind (None: held, or no verdict)
    summary: str
    predicted: str | None  # the model's failure kind
    prediction: str  # the model's summary
    agree: bool | None  # None: no verdict to compare
    seconds: float  # wall time, cluster boots excluded
    waits: float  # of which the protocol imposed
    run_dir: str
    schedule_file: str
    score: float = 0.0  # the model's ranking score
    report: str | None = None
    fresh_cluster: str | None = None  # why a cluster was started for it
    agreed_if: str = ""  # the model agrees only on this condition (`Comparison.agreed_if`)
    unpredictable: str = ""  # why the model cannot predict it (`Comparison.unpredictable`)
    cluster: str = ""  # with explore --parallel: the cluster that ran it (c1, c2, ...)
    cause: str = ""  # why it failed, where the run can tell (`Judgement.cause`)

    @property
    def category(self) -> str:
        """The model beside the brokers (`Comparison.category`), or NOT_COMPARED where the
        brokers' side reached no verdict, or nothing was compared: never agreement."""
        if not self.outcome.has_verdict:
            return NOT_COMPARED
        return category(self.agree, self.agreed_if, self.unpredictable)


# What an agreement only on a variant was given, in the lines (`Comparison.agreed_if` names
# the variant: a crash's high watermark checkpoint the run could not read).
UNTOLD = "an untold variant"

# Each category's key among explore.json's counts (`ExploreRecord.count`), in the order
# the summary says them.
CATEGORY_KEYS = {
    AGREED: "agreed",
    AGREED_GIVEN: "agreed_given",
    CANNOT_PREDICT: "cannot_predict",
    DISAGREED: "disagreed",
    NOT_COMPARED: "not_reached",
}


def categories(schedules: list[ScheduleEntry]) -> dict[str, int]:
    """How many schedules fell in each category, by explore.json's key; they add up to
    the schedules run."""
    counts = dict.fromkeys(CATEGORY_KEYS.values(), 0)
    for e in schedules:
        counts[CATEGORY_KEYS[e.category]] += 1
    return counts


@dataclass
class ExploreFinding:
    """A violated invariant, shrunk on real brokers."""

    failure: str
    number: int  # the schedule that found it
    original: str  # its schedule file
    minimal: str  # the shrunk schedule file (the original's, when it did not fail again)
    steps: int  # of the minimal schedule
    reproducible: bool  # failed again when re-run, as did every shrinking step it kept
    runs: int  # real runs the shrinking took
    replay: str  # the command that reproduces it
    report: str | None = None
    summary: str = ""
    cause: str = ""  # why it failed, where the run can tell (`ScheduleEntry.cause`)
    # Every real run of the minimal schedule while shrinking (the model's minimal, tried
    # before the original was shrunk, may be the same schedule): how many, and how many
    # failed so. Fewer failures than runs: a race that the replay meets only sometimes.
    minimal_runs: int = 0
    minimal_failed: int = 0

    def tally(self) -> str:
        """How often the minimal schedule failed when run, in words."""
        if self.minimal_failed == self.minimal_runs:
            return "on every re-run"
        return f"in {self.minimal_failed} of its {self.minimal_runs} runs"


@dataclass
class ClusterBoot:
    reason: str
    schedule: str
    seconds: float
    run_dir: str


@dataclass
class ShardRecord:
    """One Spark task of `explore --spark-master`: the schedules it was given, where it ran
    them, and how it ended."""

    index: int
    schedules: list[int]  # the numbers given to it
    status: str  # SHARD_DONE, SHARD_LOST or SHARD_FAILED
    worker: str = ""  # "executor E on HOST" (one executor per worker and application)
    detail: str = ""  # why it was lost or failed
    seconds: float = 0.0


SHARD_DONE, SHARD_LOST, SHARD_FAILED = "done", "lost", "failed"


@dataclass
class ShardCandidate:
    """A schedule handed to a shard, with its number in the whole run's ranked order."""

    number: int
    index: int  # among the candidates (`Candidate.index`)
    score: float
    schedule: dict[str, Any]  # runrecord.schedule.to_dict


# A shard's work directory: the plan its task hands the shard process, and where that
# process leaves its explore directory.
SHARD_PLAN, SHARD_OUT = "plan.json", "out"


@dataclass
class ShardPlan:
    """What one Spark task of `explore --spark-master` runs (suites/explore/shard.py): the
    run's settings and its share of the ranked candidates."""

    index: int
    kafka: str
    mode: str
    seed: int
    unclean: bool
    guided: bool
    power_models: list[str]
    reuse: bool
    report: bool
    parallel: int | None  # clusters at once on the worker (None: its machine's default)
    base_image: str | None
    minutes: float | None  # from the shard's start
    command: str
    candidates: list[ShardCandidate]


@dataclass
class NotRun:
    """A schedule given to a shard that did not report it: never a pass."""

    number: int
    candidate: int
    steps: int
    schedule_file: str
    shard: int
    why: str


@dataclass
class ExploreRecord:
    release: str
    mode: str
    seed: int
    unclean: bool
    guided: bool
    budget: int | None
    minutes: float | None
    started: float
    command: str
    finished: float | None = None
    interrupted: bool = False
    pool: int = 0  # candidates ranked
    searching: float = 0.0  # seconds spent running candidates (cluster boots included)
    shrink_runs: int = 0  # real runs spent shrinking findings
    parallel: int = 1  # clusters run at once (explore --parallel)
    schedules: list[ScheduleEntry] = field(default_factory=list)
    findings: list[ExploreFinding] = field(default_factory=list)
    boots: list[ClusterBoot] = field(default_factory=list)
    # explore --spark-master: the master, each task, and the schedules no task reported.
    spark_master: str = ""
    shards: list[ShardRecord] = field(default_factory=list)
    not_run: list[NotRun] = field(default_factory=list)
    # The schedules by category (`ScheduleEntry.category`), as `count` last left them: the
    # model's own agreement, agreement only under an untold variant, schedules it cannot
    # predict, disagreements, and those without a verdict. They add up to `schedules`.
    agreed: int = 0
    agreed_given: int = 0
    cannot_predict: int = 0
    disagreed: int = 0
    not_reached: int = 0

    def count(self) -> dict[str, int]:
        """Count the schedules by category into the fields above, and return the counts."""
        counts = categories(self.schedules)
        for key, n in counts.items():
            setattr(self, key, n)
        return counts

    def agreement(self) -> str:
        """How many schedules reached a verdict, and the model beside the brokers by
        category, each counted apart: the summary line's words and the explore page's."""
        c = self.count()
        return (
            f"{self.verdicts} of {len(self.schedules)} reached a verdict; the model: "
            f"{c['agreed']} agreed, {c['agreed_given']} agreed given {UNTOLD}, "
            f"{c['cannot_predict']} cannot predict, {c['disagreed']} disagreed, "
            f"{c['not_reached']} not reached"
        )

    @property
    def verdicts(self) -> int:
        """Schedules the brokers' side reached a verdict on (held, or a finding)."""
        return sum(1 for e in self.schedules if e.outcome.has_verdict)

    @property
    def judged(self) -> list[ScheduleEntry]:
        return [e for e in self.schedules if e.agree is not None]

    @property
    def disagreements(self) -> list[ScheduleEntry]:
        return [e for e in self.schedules if e.agree is False]
