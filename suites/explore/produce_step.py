"""The `produce` step on real brokers: one batch through the broker the step names, after
the filler it may ask for (suites.explore.slow_steps)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runrecord import schedule_roles as roles
from runrecord.schedule_roles import Rejected, Skip
from runrecord.steps.base import Role
from runrecord.steps.writes import Produce
from suites.explore import slow_steps
from suites.steps import check_landed, write_batch

if TYPE_CHECKING:
    from suites.explore.actions import Live

# An acks=all write the ISR does not complete is answered with a timeout after
# Produce.REQUEST_TIMEOUT (the model lets that time pass too); a write is not retried by a
# timeout, so one step is one batch (a re-send after NOT_LEADER_FOR_PARTITION makes the step
# not reached: check_landed).
REQUEST_TIMEOUT = Produce.REQUEST_TIMEOUT
NOT_ENOUGH_REPLICAS = "Not enough in-sync replicas"  # librdkafka's text of error 19


def produce(live: Live, step: Produce) -> tuple[dict[str, Any], float]:
    """Write the batch (and the filler first); skipped where no broker fits, rejected where
    the leader refuses it for want of in-sync replicas."""
    view = live.view()
    if step.to == Role.LEADER and view.leader is None:
        raise Skip("the partition has no leader (offline)")

    def ok(b: Any) -> str | None:
        if b not in live.assignment:
            return f"broker {b} holds no replica"
        if not live.alive(b):
            return live.describe(b)
        seen = live.own_leader(b)
        if seen != b:
            return f"broker {b} does not know it leads (its metadata says leader {seen})"
        return None

    b = roles.pick(step.to, view, ok, "produce to")
    filler: dict[str, Any] = {}
    if step.filler:  # first, so that a fetch response carries it ahead of the batch
        filler = slow_steps.write_filler(live.cluster, live.topic, step.filler, b)
    sends = write_batch(
        live.ctx,
        live.topic,
        step.count,
        to=b,
        acks=step.acks,
        request_timeout=REQUEST_TIMEOUT,
    )
    errors = sorted({s.error for s in sends if s.error})
    offsets = [s.offset for s in sends if s.ok]
    if any(NOT_ENOUGH_REPLICAS in e for e in errors):
        raise Rejected(f"broker {b} refused the write: {errors[0]}; nothing written")
    acknowledged = not errors and len(offsets) == step.count
    check_landed(live.cluster, b, sends)
    live.ctx.timeline.record(
        "note",
        "batch",
        topic=live.topic,
        broker=b,
        acks=step.acks,
        first=offsets[0] if offsets else None,
        last=offsets[-1] if offsets else None,
        acknowledged=acknowledged,
        errors=errors,
    )
    if filler and filler["filler_leader"] != b:
        # The model puts the filler on the batch's leader (checkers.simulate.slow_links).
        live.unknown.append(
            f"the filler of the write to broker {b} went to broker {filler['filler_leader']}"
        )
    waits = REQUEST_TIMEOUT if step.acks == "all" and not acknowledged else 0.0
    return {"to": b, "acknowledged": acknowledged, "errors": errors, **filler}, waits
