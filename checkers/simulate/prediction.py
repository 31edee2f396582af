"""What a simulated schedule amounts to: the replicas judged as real logs are
(`checkers.verdict.judge_partition`), each follower's `Fate`, acknowledged writes lost, and
the near misses the explorer ranks schedules by.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from basics.protocol import Protocol
from checkers.model import Fate
from checkers.simulate.state import StepRecord, Write
from checkers.simulate.transactions import hang_cause, open_transaction
from checkers.verdict import DIVERGED, PartitionVerdict, judge_partition
from runrecord.outcome import HANGING, POWER_LOST_MARKER, SKIPPED_MARKER, finding_key

if TYPE_CHECKING:
    from checkers.simulate.simulator import Simulator


@dataclass
class Prediction:
    protocol: Protocol
    outcome: Fate
    diverged_at: int | None
    below_high_watermark: bool
    stuck: dict[int, str]
    lost_acknowledged: list[Write]  # acknowledged acks=all writes missing from the leader
    lost_acks1: list[Write]  # acknowledged acks=1 writes missing from the leader
    unclean_elections: int
    power_losses: int
    leader: int | None
    leader_epoch: int
    isr: list[int]
    logs: dict[int, list[tuple[int, int, int]]]
    log_end_offsets: dict[int, int]
    high_watermarks: dict[int, int]
    steps: list[StepRecord]
    events: list[str]
    verdict: PartitionVerdict
    # Near misses, for ranking schedules: the most versions of one offset the replicas held
    # at once; the most pairs of ISR members that held different data at one offset after
    # a step (either could be elected cleanly: KAFKA-6361's precondition); whether a
    # follower in the ISR that could not fetch lacked the leader's data after a step.
    max_divergent_replicas: int = 0
    max_isr_divergence: int = 0
    isr_gap: bool = False
    risky_elections: int = 0  # clean elections leaving an ISR member that can't truncate
    clean_elections: int = 0  # leader changes within the ISR (preferred, failover, shutdown)
    divergent_failovers: int = 0  # ... to a leader whose data differs from a cut-off replica's
    last_known_elections: int = 0  # KIP-966: the last known leader elected, ISR and ELR empty
    # Where a transaction the coordinator is done with stays open on the final leader's log
    # (its last stable offset, for good: KAFKA-20716), or None.
    hanging: int | None = None
    hang_cause: str = ""  # why it hangs (runrecord.outcome.SKIPPED_MARKER, LOST_MARKER)
    # A marker a power loss dropped from every replica, where KIP-966's rules allow losing
    # what the loss dropped: without eligible leader replicas, or after an unclean or
    # last-known-leader election (checkers.schedules.judge.loss_rule).
    marker_loss_allowed: bool = False
    transactions: int = 0  # transactions begun
    late_ends: int = 0  # late EndTxns that ended a transaction the producer had open
    # Late fetch responses (slow_links): answered with a slice of the leader's log; read
    # after the leader's log changed there; whose new bytes a follower appended.
    late_slices: int = 0
    late_rewritten: int = 0
    late_appends: int = 0
    # How far a slice in flight got towards a rewrite: its follower cut off from the quorum
    # (1), its sender following a newer leader (2), its sender's log changed under it (3)
    # (slow_links.LATE_ISOLATED, ...).
    late_stage: int = 0
    # Why the model cannot predict the schedule, from its own steps (`Transactions`).
    unpredictable: tuple[str, ...] = ()
    clock_used: bool = False  # the run's clock decided when a timeout ran out
    # What the model was asked to follow (`SimState.rules`): a run asks it again with this.
    rules: Protocol | str | None = None

    @property
    def followed(self) -> Protocol | str:
        """What the model followed, to ask it again with: a release's version, or rules."""
        return self.rules or self.protocol

    @property
    def executed(self) -> int:
        return sum(1 for s in self.steps if s.status != "skipped")

    @property
    def skipped(self) -> int:
        return sum(1 for s in self.steps if s.status == "skipped")

    def failure(self) -> str | None:
        """What the run would be a finding for, by the invariants `logfork replay` judges:
        replicas converge; nothing stays stuck; with no unclean election (and no power
        loss, where KIP-966's rules decide instead) no acknowledged acks=all write is lost.
        None: the schedule passes."""
        if self.outcome is Fate.STUCK:
            return "stuck"
        if self.outcome is Fate.DIVERGED:
            return "diverged"
        if self.hanging is not None and not self.marker_loss_allowed:
            return HANGING
        if self.lost_acknowledged and not self.unclean_elections and not self.power_losses:
            return "lost-acknowledged"
        return None

    def finding(self) -> str | None:
        """The failure kind with its cause where the model knows one (`finding_key`): what
        explore shrinks a finding by."""
        failure = self.failure()
        return finding_key(failure, self.hang_cause if failure == HANGING else "")

    def summary(self) -> str:
        if self.outcome is Fate.STUCK:
            who = ", ".join(f"broker {b} ({why})" for b, why in sorted(self.stuck.items()))
            head = f"stuck: {who}"
        elif self.outcome is Fate.DIVERGED:
            # Whether the offset was committed is said once, from the brokers' evidence
            # (runrecord.outcome.high_watermark_clause): the model's own high watermark is
            # in `to_dict`, not in a line beside the brokers' that could contradict it.
            head = f"diverged at offset {self.diverged_at}"
        elif self.hanging is not None:
            head = f"a transaction hangs: the last stable offset stays at {self.hanging}"
            if self.hang_cause == SKIPPED_MARKER:
                head += " (its coordinator skipped the marker: KAFKA-20734)"
            elif self.marker_loss_allowed:
                head += " (a power loss dropped its marker from every replica: allowed)"
        else:
            head = "consistent"
        lost = [w.id for w in self.lost_acknowledged]
        if lost:
            head += f"; acknowledged acks=all writes lost: {lost}"
        return f"{head} ({self.protocol.rules})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "protocol": self.protocol.value,
            "outcome": self.outcome.value,
            "failure": self.failure(),
            "summary": self.summary(),
            "diverged_at": self.diverged_at,
            "below_high_watermark": self.below_high_watermark,
            "stuck": {str(b): why for b, why in self.stuck.items()},
            "lost_acknowledged": [w.to_dict() for w in self.lost_acknowledged],
            "lost_acks1": [w.to_dict() for w in self.lost_acks1],
            "unclean_elections": self.unclean_elections,
            "last_known_elections": self.last_known_elections,
            "power_losses": self.power_losses,
            "hanging": self.hanging,
            "hang_cause": self.hang_cause,
            "marker_loss_allowed": self.marker_loss_allowed,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "isr": self.isr,
            "logs": {str(b): [list(x) for x in log] for b, log in self.logs.items()},
            "log_end_offsets": {str(b): v for b, v in self.log_end_offsets.items()},
            "high_watermarks": {str(b): v for b, v in self.high_watermarks.items()},
            "steps": [s.to_dict() for s in self.steps],
        }


def predict(sim: Simulator) -> Prediction:
    """Judge the replicas as the simulation has left them."""
    lineages = [sim.lineage(r) for _, r in sorted(sim.replicas.items())]
    verdict = judge_partition(lineages, leader=sim.ctl.leader, protocol=sim.protocol)
    stuck = {b: r.stuck for b, r in sorted(sim.replicas.items()) if r.stuck}
    if stuck:
        outcome = Fate.STUCK
    elif verdict.status == DIVERGED:
        outcome = Fate.DIVERGED
    else:
        outcome = Fate.CONSISTENT
    lead = sim.replicas.get(sim.ctl.leader) if sim.ctl.leader is not None else None
    held = {(b.base, b.last, b.tag) for b in lead.batches} if lead else set()
    lost = [w for w in sim.writes if w.acknowledged and not set(w.batches) <= held]
    hanging = open_transaction(lead.batches) if lead else None
    cause = hang_cause(sim, lead.batches, hanging) if lead and hanging is not None else ""
    return Prediction(
        protocol=sim.protocol,
        outcome=outcome,
        diverged_at=verdict.diverged_at,
        below_high_watermark=verdict.below_high_watermark,
        stuck=stuck,
        lost_acknowledged=[w for w in lost if w.acks == "all"],
        lost_acks1=[w for w in lost if w.acks == "1"],
        unclean_elections=sim.unclean_elections,
        power_losses=sim.power_losses,
        leader=sim.ctl.leader,
        leader_epoch=sim.ctl.epoch,
        isr=list(sim.ctl.isr),
        logs={b: r.spans() for b, r in sorted(sim.replicas.items())},
        log_end_offsets={b: r.leo for b, r in sorted(sim.replicas.items())},
        high_watermarks={b: r.hw for b, r in sorted(sim.replicas.items())},
        steps=list(sim.records),
        events=list(sim.events),
        verdict=verdict,
        max_divergent_replicas=sim.max_divergent,
        max_isr_divergence=sim.max_isr_divergence,
        risky_elections=sim.risky_elections,
        clean_elections=sim.clean_elections,
        divergent_failovers=sim.divergent_failovers,
        isr_gap=sim.isr_gap,
        last_known_elections=sim.last_known_elections,
        hanging=hanging,
        hang_cause=cause,
        marker_loss_allowed=cause == POWER_LOST_MARKER
        and (not sim.elr or sim.unclean_elections > 0),
        transactions=sim.transactions.txns,
        late_ends=sim.transactions.late_ended,
        late_slices=sim.late_slices,
        late_rewritten=sim.late_rewritten,
        late_appends=sim.late_appends,
        late_stage=sim.late_stage,
        unpredictable=(*sim.transactions.cannot_predict, *sim.cannot_predict),
        clock_used=sim.transactions.clock_used,
        rules=sim.rules,
    )
