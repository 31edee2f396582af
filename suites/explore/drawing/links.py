"""Links between nodes (hold-backs, AlterPartition holds, cuts, slow links, session
expiries and heals), as explore draws and shrinks them, and the moves made of them."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from runrecord.schedule import Cluster
from runrecord.steps.base import QUORUM, Role
from runrecord.steps.links import Cut, ExpireSession, Heal, HoldAlterPartition, HoldBack, Slow
from runrecord.steps.processes import Pause, Resume
from runrecord.steps.writes import Produce
from suites.explore.drawing.choices import AT_COORDINATOR, COUNTS, choose, replica_or, sometimes
from suites.explore.drawing.options import DrawOptions
from suites.explore.drawing.registry import Change, Drawing, Move, register, register_move
from suites.explore.drawing.writes import FILLERS, draw_produce

SLOW_RATES = [10, 30, 30, 100]  # KB/s of a slow link
# Of the heals drawn with slow links, those of one link: a heal of every cut lifts the slow
# links too, and what they hold back arrives at once, so KAFKA-18723's window (a held-back
# follower let fetch again while a response is still in flight) needs one link healed.
PAIRED = 0.5
# Of the slow catch-up moves, those whose follower is then cut off from the quorum while its
# response is in flight: it learns of no leader change meanwhile, so the response is not
# dropped when one comes (KAFKA-18723's window).
ISOLATED = 0.5


def _kraft(options: DrawOptions) -> bool:
    return options.kraft


def _slow_links(options: DrawOptions) -> bool:
    return options.slow_links


def draw_hold_back(rng: random.Random, c: Cluster, _o: Any = None) -> HoldBack:
    return HoldBack(replica_or(rng, c, [(Role.FOLLOWER_IN_ISR, 0.8)]))


def _draw_hold_alter_partition(rng: random.Random, c: Cluster, _o: Any) -> HoldAlterPartition:
    return HoldAlterPartition(replica_or(rng, c, [(Role.LEADER, 0.8)]))


def _draw_cut(rng: random.Random, c: Cluster, options: DrawOptions) -> Cut:
    a = replica_or(rng, c, [(Role.LEADER, 0.4), (Role.FOLLOWER_IN_ISR, 0.3)])
    b = choose(rng, [(QUORUM, 0.3), (Role.CONTROLLER, 0.2), (Role.LEADER, 0.2), ("id", 0.3)])
    if b == "id":
        b = rng.choice(c.broker_ids)
    step = Cut(a, b)
    if options.at_coordinator and sometimes(rng, AT_COORDINATOR):  # its first end
        step = replace(step, a=Role.COORDINATOR)
    return step


def _draw_slow(rng: random.Random, c: Cluster, _o: Any) -> Slow:
    """The leader's link to a follower, mostly; KB/s that make a 700 KB filler take from
    7 s to over a minute (a follower gives up on a fetch after 30 s and asks again)."""
    a = Role.LEADER if rng.random() < 0.8 else rng.choice(c.replicas)
    b = replica_or(rng, c, [(Role.FOLLOWER_IN_ISR, 0.8)])
    return Slow(a, b, rng.choice(SLOW_RATES))


def _draw_heal(rng: random.Random, c: Cluster, options: DrawOptions) -> Heal:
    # Every cut: a specific heal is for shrinking to find, or for a slow link to need.
    if not options.slow_links or not sometimes(rng, PAIRED):
        return Heal()
    a = replica_or(rng, c, [(Role.LEADER, 0.5)])
    b = choose(rng, [(Role.ANY_BROKER, 0.5), (QUORUM, 0.2), ("id", 0.3)])
    return Heal(a, rng.choice(c.broker_ids) if b == "id" else b)


def draw_expire_session(rng: random.Random, c: Cluster, _o: Any = None) -> ExpireSession:
    return ExpireSession(replica_or(rng, c, [(Role.LEADER, 0.5), (Role.FOLLOWER_IN_ISR, 0.3)]))


def _merge_heals(a: Heal, b: Heal) -> Change:
    return Heal(), "merge the heals"


def _widen_heal(step: Heal) -> Change | None:
    return (Heal(), "heals every cut") if step.a is not None else None


register(
    Drawing(HoldBack, draw_hold_back),
    Drawing(HoldAlterPartition, _draw_hold_alter_partition, allowed=_kraft),
    Drawing(Cut, _draw_cut),
    Drawing(Slow, _draw_slow, allowed=_slow_links),
    Drawing(Heal, _draw_heal, merge=_merge_heals, widen=_widen_heal),  # type: ignore[arg-type]
    Drawing(ExpireSession, draw_expire_session),
)


def _pin_heal(step: Any, targets: dict[str, Any]) -> Any:
    broker = targets.get("broker", targets.get("follower"))
    return Heal(broker, QUORUM) if broker is not None and isinstance(step, Heal) else step


register_move(
    Move(
        "session-flap",
        lambda rng, c: [draw_expire_session(rng, c), Heal()],
        _pin_heal,
    )
)
register_move(
    Move("held-write", lambda rng, c: [draw_hold_back(rng, c), draw_produce(rng, c)], _pin_heal)
)


def _slow_catch_up(rng: random.Random, c: Cluster) -> list[Any]:
    count, filler = rng.choice(COUNTS), rng.choice(FILLERS)
    slow = Slow(Role.LEADER, Role.FOLLOWER_IN_ISR, rng.choice(SLOW_RATES))
    fill = Produce(count, "1", filler=filler)
    steps: list[Any] = [slow, Pause(Role.FOLLOWER_IN_ISR), fill, Resume(Role.ANY_BROKER)]
    if rng.random() < ISOLATED:
        steps.append(Cut(Role.ANY_BROKER, QUORUM))  # pinned to the follower resumed
    return steps


def _pin_catch_up(step: Any, targets: dict[str, Any]) -> Any:
    """The pause takes the follower behind the slow link just drawn; the cut, the follower
    resumed."""
    if isinstance(step, Pause) and "b" in targets:
        return Pause(targets["b"])
    broker = targets.get("broker", targets.get("follower"))
    if broker is not None and isinstance(step, Cut):
        return Cut(broker, step.b)
    return step


register_move(Move("slow-catch-up", _slow_catch_up, _pin_catch_up, allowed=_slow_links))
