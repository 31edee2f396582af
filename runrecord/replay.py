"""What one schedule did on real brokers, as `logfork replay` and `logfork explore` record
it: each step's outcome (done, skipped with what was observed, or rejected), the judgement
of the invariants, and the protocol model's prediction beside it. Kept in the run
directory's verdict.json (`details`) and in the explore run's explore.json."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runrecord import outcome
from runrecord.power import PowerCut

DONE, SKIPPED, REJECTED = "done", "skipped", "rejected"

# The kinds of finding a schedule can end in (`Judgement.failure`), as the model names them
# (checkers.simulate.Prediction.failure); a finding on the background workload's partition
# carries BACKGROUND after its kind.
DIVERGED, STUCK, LOST = outcome.DIVERGED, outcome.STUCK, outcome.LOST
UNJUDGED = "unjudged"  # a partition's kind when it could not be judged
FENCED_LEADER = outcome.FENCED_LEADER
HANGING = outcome.HANGING  # a transaction open for good: its last stable offset stuck
TORN = outcome.TORN_TRANSACTION  # one transaction committed on a replica, aborted on another
DUPLICATE = outcome.DUPLICATE_SEQUENCE  # one idempotent write appended twice to a replica
RECREATED = outcome.RECREATED  # a replica of an offline log dir re-created in another
FETCH_LOOP = outcome.FETCH_LOOP  # a follower looping on OffsetOutOfRange after the heal
LEFT_BEHIND = outcome.LEFT_BEHIND  # a removed replica still current on its broker
EPOCH_CACHE_LOST = outcome.EPOCH_CACHE_LOST  # a leader epoch cache lost an epoch
METADATA_DIVERGED = "metadata-diverged"  # KRaft: the metadata log's copies disagree
EPOCH_REGRESSION = "epoch-regression"  # a replica's leader epochs go back on its disk
# KRaft: the quorum broke an invariant of its own (two leaders in an epoch, an epoch going
# back, a voter set other than the one the membership steps made)
QUORUM_BROKEN = "quorum-broken"
BACKGROUND = "@background"


@dataclass
class StepResult:
    """One step as it ran."""

    index: int
    step: str  # the step, in words
    kind: str
    status: str  # DONE, SKIPPED or REJECTED
    targets: dict[str, Any] = field(default_factory=dict)  # brokers its roles resolved to
    observed: str = ""  # what held instead, when skipped or rejected
    seconds: float = 0.0
    waits: float = 0.0  # of which the protocol imposed (session timeouts, wait steps, ...)
    unsettled: str = ""  # where the cluster stood when it did not settle as the model did
    settling: float = 0.0  # of `seconds`, spent waiting for the cluster to stand as the model
    # Of `seconds`, those before its first fault or heal took effect (rules set up on every
    # node it touches): what held before the step ran on through them, what it makes not.
    lead: float = 0.0
    began: float = 0.0  # wall-clock time (epoch seconds) it started: places what brokers logged
    # skipped for what the model does not follow (runrecord.schedule_roles.Unserved)
    unserved: bool = False


def placed_before(wall: float, steps: list[StepResult]) -> int:
    """Where a moment of the run (epoch seconds) falls among its steps: the index of the
    first step whose fault had not yet taken effect then (`began` plus `lead`); the number
    of steps when after the last one's, but before it ended; one more when in the heal."""
    for r in steps:
        if wall < r.began + r.lead:
            return r.index
    if steps and wall < steps[-1].began + steps[-1].seconds:
        return len(steps)
    return len(steps) + 1


def inside_a_step(wall: float, steps: list[StepResult]) -> bool:
    """Whether a moment fell inside a step, once its fault had taken effect and before the
    step ended (its consequences, an election say, still under way): `placed_before` then
    names the step after it."""
    return any(r.began + r.lead <= wall < r.began + r.seconds for r in steps)


def placement(index: int, steps: int) -> str:
    """Where `placed_before` put a moment among `steps` steps, in words."""
    if index < steps:
        return f"before step {index}"
    return "after the last step" if index == steps else "in the heal"


@dataclass
class RunHistory:
    """What a schedule's steps did on real brokers, and what the run saw that the model
    cannot decide for itself: the one value a run builds (suites.explore.live.context.Live
    fills it as the steps run) and the model comparison takes (checkers.schedules.comparison),
    as Jepsen's checkers take a history."""

    steps: list[StepResult] = field(default_factory=list)  # each as it ran, in order
    power_cuts: list[PowerCut] = field(default_factory=list)  # what each power loss dropped
    # (step, broker): where a controller election went (ZooKeeper mode: a race)
    controller_after: list[tuple[int, int]] = field(default_factory=list)
    coordinator_at: list[tuple[int, int]] = field(default_factory=list)  # (step, coordinator)
    # (step, broker, offset): the high watermark checkpoint each crash left on the disk
    hw_checkpoints: list[tuple[int, int, int]] = field(default_factory=list)
    # What the run saw that the model cannot follow (a filler that went elsewhere than its
    # batch, a held EndTxn released to another coordinator), in words.
    unknown: list[str] = field(default_factory=list)
    # Where among the steps the coordinator logged aborting a transaction at its timeout
    # (runrecord.replay.placed_before), and which of those fell inside the step before.
    timeout_aborts: list[int] = field(default_factory=list)
    timeout_aborts_within: list[int] = field(default_factory=list)


@dataclass
class Judgement:
    """The invariants against what the brokers did, per partition and overall."""

    failure: str | None  # the finding's kind (None: every invariant held)
    summary: str
    partition: int | None = None  # the partition of the finding
    rule: str | None = None  # the rule that decided acknowledged-write loss, when one did
    evidence: dict[str, Any] = field(default_factory=dict)
    partitions: dict[int, str | None] = field(default_factory=dict)  # partition -> kind
    # Why the invariants could not be judged (a partition with no audit verdict, an audit
    # error): the run is "not reached", never a pass. Empty when judged.
    unjudged: str = ""
    # Why the finding happened, where the run can tell (outcome.SKIPPED_MARKER, ...).
    cause: str = ""
    # partition -> its kind once the findings the protocol model does not follow are set
    # aside (checkers.schedules.judge.BESIDE_MODEL): only for partitions that showed one.
    modelled: dict[int, str | None] = field(default_factory=dict)


# What the model's prediction came to beside the brokers' outcome, once the run told it all
# it could (`Comparison.category`); explore counts each apart, never one as another.
AGREED = "agreed"
AGREED_GIVEN = "agreed given"  # only under a variant the run could not tell (`agreed_if`)
CANNOT_PREDICT = "cannot predict"  # counted neither way (`unpredictable`)
DISAGREED = "disagreed"
NOT_COMPARED = "not reached"  # the brokers' side has no verdict: nothing to compare


def category(agree: bool | None, agreed_if: str = "", unpredictable: str = "") -> str:
    """AGREED only where the model's own prediction, given what the run told it, is the
    brokers' outcome; a variant the run could not tell makes it AGREED_GIVEN; nothing
    compared (`agree` None) is NOT_COMPARED, never agreement."""
    if unpredictable:
        return CANNOT_PREDICT
    if agree is None:
        return NOT_COMPARED
    if not agree:
        return DISAGREED
    return AGREED_GIVEN if agreed_if else AGREED


@dataclass
class Comparison:
    """The protocol model's prediction for the schedule's partition beside the real one."""

    predicted: str | None  # the model's failure kind (None: consistent)
    actual: str | None  # what the brokers did to the same partition
    agree: bool
    prediction: str  # the model's summary line
    steps_differ: list[int] = field(default_factory=list)  # steps run by one side only
    # When only a variant of the model's run agrees (`checkers.simulate.checkpoint_variants`):
    # which, in words. Empty when the model's own prediction agrees, or none does.
    agreed_if: str = ""
    # What the run told the model before it predicted (what filesystem power losses kept).
    told: str = ""
    # Why the model cannot predict this schedule (a power loss rolled back a file it does not
    # follow): such a schedule counts neither as agreement nor as disagreement.
    unpredictable: str = ""

    @property
    def category(self) -> str:
        return category(self.agree, self.agreed_if, self.unpredictable)
