"""The model's prediction for the schedule's partition beside what the brokers did to it: a
run's `Comparison`. A run tells the model what it cannot know for itself (who won a
controller election, the high watermark checkpoint a crash left on disk, where a power loss
under a filesystem model left the partition, the steps skipped for what the model does not
follow, the coordinator found, each step's duration), and the model predicts again with it;
what it still cannot follow counts the schedule apart, never as agreement. What is left is
one of four categories (`Comparison.category`): agreed; agreed given a variant the run could
not tell (a crash whose checkpoint it could not read); cannot predict; disagreed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from basics.protocol import Protocol
from checkers.schedules.judge import SCHEDULE_PARTITION
from checkers.simulate import Prediction, SimOptions, checkpoint_variants, simulate
from runrecord.power import CUT
from runrecord.replay import DONE, Comparison, Judgement, RunHistory, StepResult, placement
from runrecord.schedule import Schedule


def compare(
    prediction: Prediction,
    judgement: Judgement,
    history: RunHistory,
    schedule: Schedule | None = None,
    *,
    model: list[Any] | None = None,
) -> Comparison:
    """The model's failure kind for the schedule's partition beside the brokers', given the
    run's history (`model`: the model's steps, by default the prediction's). The run tells
    the model what it decided that the model cannot: which broker won a controller election
    (`controller_after`, as seen on the brokers), and the high watermark checkpoint each
    crash left on disk (`hw_checkpoints`: step, broker, offset), which the model predicts
    again with. With the schedule, a disagreement is then looked up among the outcomes where
    a crash the run could not read came after a checkpoint its steps outran: the model
    agrees given that variant (`agreed_if`), counted apart from agreement. What a power loss
    under a filesystem model kept is the brokers' fsyncs' to decide: the run tells the model
    (`power_cuts`), which predicts again with it, or says it cannot predict when a file it
    does not follow was rolled back. Steps the transaction coordinator could not serve
    (`StepResult.unserved`), and the coordinator a step naming it found (`coordinator_at`),
    are told alike. `unknown`: what the run saw that the model cannot follow.
    `timeout_aborts`: where among the steps the coordinator logged aborting a transaction
    at its timeout (`SimOptions.timeout_aborts`), which the steps' durations cannot place;
    `timeout_aborts_within`: those that fell inside the step before."""
    model = prediction.steps if model is None else model
    real = history.steps
    controller_after = tuple(history.controller_after)
    power_cuts = tuple(history.power_cuts)
    coordinator_at = tuple(history.coordinator_at)
    unknown = tuple(history.unknown)
    timeout_aborts = tuple(history.timeout_aborts)
    timeout_aborts_within = tuple(history.timeout_aborts_within)
    hw_checkpoints = tuple(history.hw_checkpoints)
    actual = judgement.partitions.get(SCHEDULE_PARTITION)
    # A finding the model does not follow is set aside: the model answers for the rest.
    beside = judgement.modelled.get(SCHEDULE_PARTITION, actual)
    rules = prediction.followed
    told = tuple(
        (c.step, c.broker, c.ends[SCHEDULE_PARTITION][1])
        for c in power_cuts
        if c.model != CUT and SCHEDULE_PARTITION in c.ends
    )
    unserved = frozenset(r.index for r in real if r.unserved)
    # What the run tells the model besides the power losses (which the checkpoint variants
    # below do not take).
    seen = SimOptions(
        controller_after=controller_after,
        hw_checkpoint_at=hw_checkpoints,
        unserved=unserved,
        coordinator_at=coordinator_at,
        timeout_aborts=timeout_aborts,
        timeout_aborts_within=timeout_aborts_within,
        step_seconds=tuple(r.seconds for r in real),
        step_lead=tuple(r.lead for r in real),
    )
    said = []
    # Every step ran: the run's clock times what the model's own time cannot (a request's
    # timeout, the coordinator's abort at the transaction timeout).
    timed = bool(real) and len(real) == len(model)
    tells = bool(
        told or unserved or coordinator_at or timeout_aborts or controller_after or hw_checkpoints
    )
    if (tells or timed) and schedule is not None:
        options = dataclasses.replace(seen, kept_after_power_loss=told)
        again = simulate(schedule, rules, options=options)
        # The clock alone changes nothing unless it decided a timeout, or found one it
        # cannot place: the first prediction stands then.
        if tells or again.clock_used or again.unpredictable:
            prediction, model = again, again.steps
        if controller_after:
            elected = ", ".join(f"broker {b} after step {i}" for i, b in controller_after)
            said.append(f"given the controller elections the brokers held ({elected})")
        if hw_checkpoints:
            read = ", ".join(f"step {i}: broker {b} at {o}" for i, b, o in hw_checkpoints)
            said.append(f"given the high watermark checkpoints the crashes left on disk ({read})")
        if told:
            said.append(
                "given where the power losses left the partition ("
                + ", ".join(f"step {i}: broker {b}'s log end {end}" for i, b, end in told)
                + ")"
            )
        if unserved:
            steps = ", ".join(str(i) for i in sorted(unserved))
            said.append(
                f"given the steps the run skipped for what the model does not follow ({steps})"
            )
        if coordinator_at:
            # Each change only: a run tells it at every transactional step.
            changes = [(i, b) for k, (i, b) in enumerate(coordinator_at)
                       if k == 0 or coordinator_at[k - 1][1] != b]  # fmt: skip
            found = ", ".join(f"broker {b} at step {i}" for i, b in changes)
            said.append(f"given the transaction coordinator the run found ({found})")
        if timeout_aborts:
            at = ", ".join(placement(i, len(real)) for i in timeout_aborts)
            said.append(f"given where the coordinator aborted at the transaction timeout ({at})")
        if prediction.clock_used:
            said.append("given how long the steps took on the brokers")
    predicted = prediction.failure()
    differ = [
        r.index
        for r, m in zip(real, model, strict=False)
        if (r.status == "skipped") != (m.status == "skipped")
    ]
    comparison = Comparison(predicted, actual, predicted == beside, prediction.summary(), differ)
    aside = []
    if beside != actual:
        rest = f"{beside} besides" if beside else "nothing else"
        if comparison.agree:
            said.append(f"{actual} set aside, which it does not follow; the brokers showed {rest}")
        else:
            aside.append(f"the brokers showed {actual}, which it does not follow, and {rest}")
    comparison.told = "; ".join(said)
    # A transactional write the client timed out on where the model's was acknowledged may
    # or may not have reached the log: the client routes by its own metadata (to a zombie
    # leader cut off from the quorum, say), which the model does not follow.
    acked = {m.index: m.targets.get("acknowledged") for m in model}
    unacked = [
        _unacknowledged(r)
        for r in real
        if r.kind == "txn-write"
        and r.status == DONE
        and r.targets.get("acknowledged") is False
        and acked.get(r.index)
    ]
    comparison.unpredictable = "; ".join(
        [
            *(
                f"the power loss of broker {c.broker} at step {c.step} rolled back "
                f"{', '.join(c.unmodelled)}"
                for c in power_cuts
                if c.unmodelled
            ),
            *unacked,
            *unknown,
            *prediction.unpredictable,
            *aside,
        ]
    )
    if not comparison.agree and schedule is not None and not comparison.unpredictable:
        condition = _agreeing_condition(schedule, rules, beside, seen)
        if condition is not None:
            comparison.agree, comparison.agreed_if = True, condition
    return comparison


def _unacknowledged(r: StepResult) -> str:
    elsewhere = [p for p in r.targets.get("unacknowledged", []) if p != SCHEDULE_PARTITION]
    if elsewhere and SCHEDULE_PARTITION not in r.targets.get("unacknowledged", []):
        # The transaction can only abort now, which the model, following partition 0
        # alone, does not know.
        parts = ", ".join(str(p) for p in elsewhere)
        return (
            f"the transactional write at step {r.index} was not acknowledged on partition "
            f"{parts}, which the model does not follow"
        )
    return (
        f"the transactional write at step {r.index} was not acknowledged, where the model's "
        "was: whether it reached the log is unknown"
    )


def _agreeing_condition(
    schedule: Schedule,
    protocol: Protocol | str,
    actual: str | None,
    base: SimOptions,
) -> str | None:
    """The variant the run could not tell on which the model reaches the brokers' outcome,
    in words, or None: a high watermark checkpoint caught up before crashes whose
    checkpoint the run did not read. `base`: what the run told the model (the controller
    elections, the checkpoints it read, the steps the coordinator could not serve, the
    coordinator it found), which every variant keeps."""
    for crashes, variant in checkpoint_variants(schedule, protocol, options=base):
        if variant.failure() == actual:
            steps = ", ".join(str(i) for i in crashes)
            return (
                f"if the high watermark checkpoint had caught up before the crash at step "
                f"{steps}: {variant.summary()}"
            )
    return None
