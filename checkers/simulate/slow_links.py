"""The model's side of a slow link (the `slow` step) and of a produce step's filler: the
fetch response a slowed follower waits for, and what it holds when it arrives.

A leader reads a fetch response's log slices from its file as the link drains, not as it
answers (FileRecords.writeTo re-reads the file at each socket write): a slice records only
its file positions. A follower that was paused, or cut off from its leader, while a filler
and a batch were written asks for both at once when it can fetch again; the leader puts the
idle filler partition first (KIP-227's fetch session moves the partitions it returned
records for to the end), so the batch's bytes are read only once the filler has gone out at
the link's rate. Meanwhile the follower fetches nothing else (one fetch in flight per
leader). What arrives:

- the leader's file shorter than the slice's end then: the send fails ("has been truncated
  during write") and the follower asks again;
- whole batches starting at the slice's first position: those, whatever the leader's log
  holds there by then: after a truncation and new writes of the same sizes, batches of a
  newer leader epoch (KAFKA-18723). The follower appends them, unless its release skips a
  batch whose partition leader epoch is above the one it fetches in, and every batch after
  it (UnifiedLog.hasHigherPartitionLeaderEpoch: 3.9.1, 4.0.1, 4.1.0);
- anything else (a position inside a batch) is not the model's to say.

The follower drops the response if it learned a newer leader epoch first (its fetcher
removes the partition), if either end stopped, and after request.timeout.ms (30 s). When
it arrives is the run's clock's to say (`SimOptions.step_seconds`); where the arrival falls
inside a step that changed either log, the model cannot predict the schedule. Without a
clock (drawing and ranking) each step counts NOMINAL_STEP_S besides the model's own waits.

Batch sizes are estimated from their kind and record count (a produce step's records are
`<topic>-<tag>-<i>`, so equal counts make equal sizes); only their alignment matters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from checkers.simulate.state import FOLLOWER, LEADER, SimBatch
from runrecord.steps.base import QUORUM

if TYPE_CHECKING:
    from checkers.simulate.simulator import Simulator

FETCH_TIMEOUT_S = 30.0  # a follower's request.timeout.ms for one fetch
# How far a slice in flight got towards being rewritten (`SlowLinks._note_late_stage`).
LATE_ISOLATED, LATE_FOLLOWS, LATE_TRUNCATED, LATE_REFILLED = 1, 2, 3, 4
NOMINAL_STEP_S = 1.0  # a step's duration where no run's clock says (drawing and ranking)
# Estimated bytes: a record batch's header, a record's overhead beside its key and value
# (both `<topic>-<tag>-<i>`, about 20 bytes before the number), a marker's control batch.
BATCH_HEADER, RECORD_OVERHEAD, NAME, MARKER_BYTES = 61, 8, 20, 78


@dataclass
class LateResponse:
    """A fetch response on its way from `leader` to `follower`, behind a filler."""

    leader: int
    follower: int
    epoch: int  # the leader epoch the follower fetched in
    start: int  # the follower's log end offset: the slice's first offset
    tags: tuple[str, ...]  # the batches the slice held when the leader answered
    first: int  # the slice's file positions, [first, end)
    end: int
    drain: float  # seconds the filler takes at the link's rate
    built: int  # the step it was answered in
    built_time: float  # the model's time then
    # Sent by a zombie (fenced, or no longer the controller's leader): its filler is on no
    # other broker, and it truncates it, under the send, once it learns it follows.
    zombie: bool = False
    straddled: tuple[Any, ...] | None = None  # the logs as they stood, where it fell in a step


def batch_bytes(b: SimBatch) -> int:
    if b.control:
        return MARKER_BYTES
    count = b.last - b.base + 1
    return BATCH_HEADER + sum(RECORD_OVERHEAD + 2 * (NAME + len(str(i))) for i in range(count))


def positions(batches: list[SimBatch]) -> list[tuple[int, SimBatch]]:
    """Each batch with its file position."""
    out, at = [], 0
    for b in batches:
        out.append((at, b))
        at += batch_bytes(b)
    return out


class SlowLinks:
    """Slow links, the fillers a follower fetches first and the responses they hold back:
    a part of the simulator (`Simulator.slow`)."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim

    def slow_receivers(self) -> set[int]:
        """Brokers whose fetches from some sender come late: a run does not wait for their
        log ends to stand where the model's do."""
        return {b for _, b in self.sim.slowed}

    def lift_slow(self, a: Any = None, b: Any = None) -> list[str]:
        """Lift the slow links (with `a` and `b`, the one between them, either way): what
        they still carried arrives at once. A heal of every cut (the final one too) lifts
        them first and lets what they held back arrive and be read before it heals any cut
        (faults.slow_link), so a follower cut off from the quorum takes its response before
        it can learn of a new leader: left to race, on 3.9.0 the news won."""
        lifted = [(x, y) for x, y in self.sim.slowed if a is None or {x, y} == {a, b}]
        for link in lifted:
            del self.sim.slowed[link]
            self.sim.fillers.pop(link, None)  # it goes out at once with whatever follows it
            for late in [r for r in self.sim.late_responses if (r.leader, r.follower) == link]:
                self._arrive(late, "as the slow link is lifted")
        return [f"{x}->{y}" for x, y in sorted(lifted)]

    def drop_responses(self, b: int) -> None:
        """A broker that stops takes its connections with it: a response in flight to or
        from it is lost, whatever it does next (a restart makes new connections)."""
        for late in [r for r in self.sim.late_responses if b in (r.leader, r.follower)]:
            self.sim.late_responses.remove(late)
            self.sim._event(
                f"broker {late.follower}'s late fetch response from broker {late.leader} is "
                f"lost: broker {b} stopped"
            )

    # -- a filler, and the response it holds back -------------------------------------------

    def filler_written(self, kb: int | None, targets: dict[str, Any]) -> None:
        """A produce step's filler went to its leader first. A follower behind a slow link
        from it that is fetching gets the filler alone (its fetch waiting at the leader is
        answered by the filler's append) and waits for it; one that is not fetching now gets
        it ahead of the leader's log in its next fetch response."""
        leader = targets.get("to")
        if not kb or leader is None:
            return
        for a, f in list(self.sim.slowed):
            if a != leader:
                continue
            if not self._fetching(f, leader) or self.sim.awaiting(f):
                self.sim.fillers[(a, f)] = max(kb, self.sim.fillers.get((a, f), 0))
                continue
            self._send(a, f, kb, [])

    def _send(self, a: int, f: int, kb: int, sliced: list[tuple[int, SimBatch]]) -> None:
        """Leader `a` answers follower `f`'s fetch: a `kb` KB filler, then `sliced` (its
        batches past the follower's end, with their file positions)."""
        r, drain = self.sim.replicas[f], kb / self.sim.slowed[(a, f)]
        first, end = 0, 0
        if sliced:
            first, end = sliced[0][0], sliced[-1][0] + batch_bytes(sliced[-1][1])
        tags = tuple(b.tag for _, b in sliced)
        late = LateResponse(
            a, f, r.epoch, r.leo, tags, first, end, drain, self.sim._step, self.sim.time
        )
        late.zombie = not self.sim.registered(a) or self.sim.ctl.leader != a
        self.sim.late_responses.append(late)
        what = f"then its log from offset {r.leo} ({len(sliced)} batch(es))" if sliced else "alone"
        self.sim._event(f"broker {a} answers broker {f}'s fetch: a {kb} KB filler, {what}, read as "
                    f"the link drains ({drain:.0f} s)")  # fmt: skip

    def _fetching(self, f: int, leader: int) -> bool:
        r = self.sim.replicas.get(f)
        return r is not None and r.leader == leader and self.sim.can_talk(f, leader)

    def awaiting(self, broker: int) -> bool:
        return any(r.follower == broker for r in self.sim.late_responses)

    def send_fillers(self) -> None:
        """A follower held back behind a filler fetches again: its leader answers with the
        filler first, and the follower waits for that response alone."""
        for (a, f), kb in list(self.sim.fillers.items()):
            r, lead = self.sim.replicas.get(f), self.sim.replicas.get(a)
            if (a, f) not in self.sim.slowed or r is None or lead is None or lead.role != LEADER:
                continue
            if r.role != FOLLOWER:
                continue
            if not self._fetching(f, a) or r.epoch != lead.epoch or self.sim.awaiting(f):
                continue
            del self.sim.fillers[(a, f)]
            sliced = [(p, b) for p, b in positions(lead.batches) if b.last >= r.leo]
            self.sim.late_slices += bool(sliced)
            self._send(a, f, kb, sliced)

    # -- when it arrives ---------------------------------------------------------------------

    def before_step(self) -> None:
        for late in list(self.sim.late_responses):
            passed = self._late_passed(late)
            if passed:
                clocked = self.sim.options.step_seconds
                self._arrive(late, "by the run's clock" if clocked else "by the model's time")
            elif passed is None and late.straddled is None:
                late.straddled = self._logs(late)

    def after_step(self) -> None:
        """A response whose arrival fell inside this step arrives at its end; where the
        step changed either log meanwhile, the model cannot say what it held."""
        self._note_late_stage()
        for late in [r for r in self.sim.late_responses if r.straddled is not None]:
            if late.straddled != self._logs(late):
                why = (
                    f"broker {late.follower}'s late fetch response from broker {late.leader} "
                    f"arrived inside step {self.sim._step}, which changed what it would hold"
                )
                self.sim.transactions._cannot(why)
            self._arrive(late, f"during step {self.sim._step}")
        if not self.sim.options.step_seconds:  # by the model's own time, at the step's end
            for late in [r for r in self.sim.late_responses if self._late_passed(r, at_end=True)]:
                self._arrive(late, f"by the end of step {self.sim._step}")
        if self.sim.late_responses:
            self.sim.control.settle()

    def _note_late_stage(self) -> None:
        """How far a slice in flight got towards KAFKA-18723's race, for ranking: its
        follower cut off from the quorum, so that it cannot learn of a new leader first
        (LATE_ISOLATED); then its sender, alive, following a newer leader that lacks the
        slice, which the follower has not learned of (LATE_FOLLOWS); then no longer holding
        the slice's batches there, truncated to that leader's log (LATE_TRUNCATED); then
        holding other batches as far as the slice's end (LATE_REFILLED).
        Writes of the same sizes after that rewrite it (`late_rewritten`)."""
        for late in self.sim.late_responses:
            # A reassignment may have taken either end's replica away meanwhile.
            r, sender = self.sim.replicas.get(late.follower), self.sim.replicas.get(late.leader)
            if r is None or sender is None or not late.tags:
                continue
            if r.leader != late.leader or r.epoch != late.epoch:
                continue
            if self.sim.linked(late.follower, QUORUM) or not self.sim.alive(late.leader):
                continue
            there = positions(sender.batches)
            held = tuple(b.tag for p, b in there if late.first <= p < late.end)
            stage = LATE_ISOLATED
            lead = self.sim.replicas.get(sender.leader) if sender.leader is not None else None
            newer = sender.role == FOLLOWER and sender.epoch > late.epoch and lead is not None
            if newer and held != late.tags:
                size = there[-1][0] + batch_bytes(there[-1][1]) if there else 0
                # Written past the slice's end again: the next write of the right sizes lines
                # a newer epoch's batches up where the slice is read.
                stage = LATE_REFILLED if size >= late.end else LATE_TRUNCATED
            elif newer and late.tags[0] not in {b.tag for b in lead.batches}:
                # A follower of a newer leader now that lacks the slice: it will truncate it
                # once it fetches, and copy that leader's writes to the same positions.
                stage = LATE_FOLLOWS
            self.sim.late_stage = max(self.sim.late_stage, stage)

    def _late_passed(self, late: LateResponse, *, at_end: bool = False) -> bool | None:
        """Whether the filler had drained (or the fetch timed out) before this step began
        (`at_end`: by its end, by the model's own time)."""
        seconds = min(late.drain, FETCH_TIMEOUT_S)
        if self.sim.options.step_seconds:
            passed = self.sim.transactions._wall_passed(late.built, seconds)
            self.sim.transactions.clock_used |= passed is not None
            return passed
        steps = self.sim._step - late.built + (1 if at_end else 0)
        elapsed = steps * NOMINAL_STEP_S + self.sim.time - late.built_time
        return elapsed >= seconds

    def _logs(self, late: LateResponse) -> tuple[Any, ...]:
        lead, r = self.sim.replicas.get(late.leader), self.sim.replicas.get(late.follower)
        if lead is None or r is None:
            return ()
        return (tuple(b.tag for b in lead.batches), r.leader, r.epoch, r.leo)

    def _arrive(self, late: LateResponse, when: str) -> None:
        self.sim.late_responses.remove(late)
        who = f"broker {late.follower}'s late fetch response from broker {late.leader}"
        lead, r = self.sim.replicas.get(late.leader), self.sim.replicas.get(late.follower)
        if lead is None or r is None:
            self.sim._event(f"{who} is dropped: a reassignment removed a replica of its ends")
            return
        if late.drain >= FETCH_TIMEOUT_S:
            self.sim._event(f"{who} timed out (request.timeout.ms): it fetches again")
            return
        if not (self.sim.alive(late.leader) and self.sim.alive(late.follower)):
            self.sim._event(f"{who} is lost: an end stopped or paused")
            return
        if r.leader != late.leader or r.epoch != late.epoch or r.leo != late.start:
            self.sim._event(f"{who} is dropped: broker {late.follower} moved on")
            return
        if not late.tags:
            return  # a filler alone: the follower fetches again
        if late.zombie and lead.role != LEADER:
            self.sim._event(
                f"{who} fails: broker {late.leader} truncated the filler only it held, a "
                "zombie, under the send"
            )
            return
        at = positions(lead.batches)
        size = at[-1][0] + batch_bytes(at[-1][1]) if at else 0
        if size < late.end:
            self.sim._event(f"{who} fails: broker {late.leader}'s log is shorter than the slice")
            return
        read = [b for p, b in at if p >= late.first and p + batch_bytes(b) <= late.end]
        if not any(p == late.first for p, _ in at):
            why = f"{who} starts inside a batch of broker {late.leader}'s log ({when})"
            self.sim.transactions._cannot(why)
            return
        if tuple(b.tag for b in read) == late.tags:
            return  # what it asked for: replication as usual
        self.sim.late_rewritten += 1
        kept: list[SimBatch] = []
        for b in read:
            if self.sim.skips_newer_epoch and b.epoch > late.epoch:
                self.sim._event(
                    f"{who} ({when}): skipping batch {b.span} of leader epoch {b.epoch}, above "
                    f"its own {late.epoch}, and every batch after it"
                )
                break
            kept.append(b)
        if not kept:
            return
        if kept[0].base != r.leo:
            why = f"{who} holds batches from offset {kept[0].base}, not its log end {r.leo}"
            self.sim.transactions._cannot(why)
            return
        self.sim._append(r, kept)
        self.sim.late_appends += 1
        self.sim._event(
            f"{who} ({when}) holds what broker {late.leader}'s log has there now: broker "
            f"{late.follower} appends {', '.join(f'{b.span} (epoch {b.epoch})' for b in kept)}"
        )
