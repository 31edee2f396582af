"""The model's side of a slow link (the `slow` step): it knows the link is slow, and that it
cannot say what the receiver gets from the sender, or when.

A follower behind a slow link receives its fetch responses late, and a broker reads a
response's log slices as the link drains, not as it answers: what arrives may be the
sender's log as it stands seconds later, after a truncation (KAFKA-18723). So the model
replicates as if the link were fast, and counts the schedule among those it cannot
predict once a link is slowed.
"""

from __future__ import annotations

from typing import Any

from checkers.simulate.reassignment import Reassignments
from runrecord.schedule import Slow
from runrecord.schedule_roles import SLOWABLE, pick_pair


class SlowLinks(Reassignments):
    def slow_receivers(self) -> set[int]:
        """Brokers whose fetches from some sender come late: the model cannot say where
        their logs stand until the heal."""
        return {b for _, b in self.slowed}

    def _do_slow(self, step: Slow) -> dict[str, Any]:
        def ok(a: Any, b: Any) -> bool:
            return self.alive(a) and self.alive(b) and (a, b) not in self.slowed

        a, b = pick_pair(step.a, step.b, self.view(), ok, SLOWABLE)
        self.slowed.add((a, b))
        self._event(f"what broker {a} sends broker {b} slowed to {step.rate} KB/s")
        why = "a slow link: what its receiver fetches, and when, depends on its rate"
        if why not in self.cannot_predict:
            self.cannot_predict.append(why)
        return {"a": a, "b": b, "rate": step.rate}

    def lift_slow(self, a: Any = None, b: Any = None) -> list[str]:
        """Lift the slow links (with `a` and `b`, the one between them, either way)."""
        lifted = [(x, y) for x, y in self.slowed if a is None or {x, y} == {a, b}]
        for link in lifted:
            self.slowed.discard(link)
        return [f"{x}->{y}" for x, y in sorted(lifted)]
