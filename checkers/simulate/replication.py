"""Replication on the simulated cluster: a follower truncates by its release's rules (the
protocol model, `checkers.model.truncate_follower`, on lineages built from the abstract
logs), then fetches whole batches from its leader; leaders and followers move their high
watermarks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from basics.protocol import Protocol
from checkers.model import truncate_follower
from checkers.simulate.state import FOLLOWER, LEADER, Replica, differ

if TYPE_CHECKING:
    from checkers.simulate.simulator import Simulator


class Replication:
    """Truncation, fetching and high watermarks (`_replicate`, one round of every follower):
    a part of the simulator (`Simulator.replication`)."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim

    def _truncate(self, r: Replica, leader: Replica, *, quiet: bool = False) -> bool:
        """Run the protocol's truncation (checkers.model) and apply where it lands. `quiet`:
        say nothing unless the log changed."""
        before = r.leo
        result = truncate_follower(self.sim.lineage(leader), self.sim.lineage(r), self.sim.protocol)
        target = result.truncation_offset
        requested = self._requested(result, r, leader)
        mid_batch = self.sim.protocol in (Protocol.HIGH_WATERMARK, Protocol.KIP_101) and (
            target < requested < r.leo
        )
        self.sim._truncate_log(r, requested if mid_batch else target, to_target=mid_batch)
        r.needs_truncation = False
        if quiet and r.leo == before:
            return False
        for line in result.describe()[: len(result.rounds)]:
            self.sim._event(f"broker {r.broker}: {line}")
        if mid_batch:
            self.sim._event(
                f"broker {r.broker}: Log.truncateTo({requested}) drops the batch holding it "
                f"yet sets the log end offset to {requested} (Kafka before 2.0)"
            )
        return r.leo != before

    def _requested(self, result: Any, r: Replica, leader: Replica) -> int:
        """The offset a KIP-101 or high-watermark truncation asked for (before the batch
        holding it rounds it down)."""
        last = result.rounds[-1] if result.rounds else None
        if last is None:
            return result.truncation_offset
        if last.request == "high-watermark" or last.fallback or last.answer_offset is None:
            return min(r.hw, r.leo)
        if self.sim.protocol is Protocol.KIP_101:
            return min(last.answer_offset, r.leo)
        return result.truncation_offset

    def _fetch(self, r: Replica, leader: Replica) -> bool:
        """One fetch round to catch up: whole batches from the one holding the follower's
        log end offset."""
        if r.leo > leader.leo:
            # OffsetOutOfRange above the leader's end (an unclean leader, or KIP-101's
            # scenario 2): the follower truncates to the leader's log end offset. Before 2.0
            # it halts instead when the topic forbids unclean elections.
            old = self.sim.protocol in (Protocol.HIGH_WATERMARK, Protocol.KIP_101)
            if old and not self.sim.cluster.topic_config.unclean_leader_election_enable:
                r.stuck = (
                    f"halted: log end offset {r.leo} beyond the leader's {leader.leo} and "
                    "truncation not allowed (unclean.leader.election.enable=false)"
                )
                self.sim._event(f"broker {r.broker} {r.stuck}")
                return True
            removed = self.sim._truncate_log(r, leader.leo, to_target=old)
            self.sim._event(
                f"broker {r.broker}: offset out of range, truncated "
                f"{', '.join(b.span for b in removed) or 'nothing'} to the leader's log end "
                f"offset {leader.leo}"
            )
            return True
        index = next((i for i, b in enumerate(leader.batches) if b.last >= r.leo), None)
        if index is None:
            return False
        first = leader.batches[index]
        if first.base < r.leo:
            r.stuck = (
                f"out-of-order offsets: batch {first.span} from broker {leader.broker} starts "
                f"below its log end offset {r.leo}"
            )
            self.sim._event(f"broker {r.broker} is stuck: {r.stuck}")
            return True
        fetched = list(leader.batches[index:])
        self.sim._append(r, fetched)
        shown = fetched[0].span if len(fetched) == 1 else f"{fetched[0].span}..{fetched[-1].span}"
        self.sim._event(f"broker {r.broker} fetches {shown} from broker {leader.broker}")
        return True

    def _near_misses(self) -> None:
        """After a step, for ranking: ISR members holding different data at one offset,
        and an ISR member that lacks the leader's data and cannot fetch it."""
        isr = [self.sim.replicas[b] for b in self.sim.ctl.isr]
        pairs = sum(1 for i, a in enumerate(isr) for other in isr[i + 1 :] if differ(a, other))
        self.sim.max_isr_divergence = max(self.sim.max_isr_divergence, pairs)
        lead = (
            self.sim.replicas.get(self.sim.ctl.leader) if self.sim.ctl.leader is not None else None
        )
        if lead is not None:
            for r in isr:
                if (
                    r is not lead
                    and r.leo < lead.leo
                    and not self.sim.can_talk(r.broker, lead.broker)
                ):
                    self.sim.isr_gap = True

    def _replicate(self) -> bool:
        changed = False
        for b, r in sorted(self.sim.replicas.items()):
            if r.role != FOLLOWER or r.stuck or not self.sim.alive(b) or r.leader is None:
                continue
            if self.sim.awaiting(b):
                continue  # its one fetch is in flight behind a filler (slow_links)
            leader = self.sim.replicas.get(r.leader)
            if leader is None or leader.role != LEADER or not self.sim.can_talk(b, r.leader):
                continue
            if self.sim.protocol is Protocol.DIVERGING_EPOCH and leader.epoch != r.epoch:
                continue  # KIP-320: fetches carry the leader epoch; a mismatch is fenced
            if r.needs_truncation:
                changed |= self._truncate(r, leader)
            elif self.sim.protocol is Protocol.DIVERGING_EPOCH and r.epochs:
                # KIP-595's diverging epoch: every fetch is checked, not only the first.
                changed |= self._truncate(r, leader, quiet=True)
            changed |= self._fetch(r, leader)
            if leader.fetched.get(b) != r.leo:
                leader.fetched[b] = r.leo
                changed = True
            if r.leo >= leader.leo and not r.stuck:
                leader.lag[b] = 0.0
        for r in self.sim.replicas.values():
            if r.role == LEADER and self.sim.alive(r.broker):
                known = [r.leo] + [r.fetched.get(f) for f in r.isr if f != r.broker]
                if None not in known:
                    hw = min(x for x in known if x is not None)
                    if hw > r.hw:
                        r.hw = hw
                        changed = True
        for b, r in self.sim.replicas.items():
            leader = self.sim.replicas.get(r.leader) if r.leader is not None else None
            if (
                r.role == FOLLOWER
                and leader is not None
                and leader.role == LEADER
                and self.sim.can_talk(b, leader.broker)
                and not r.stuck
            ):
                hw = min(r.leo, leader.hw)
                if hw != r.hw:
                    r.hw = hw
                    changed = True
        return changed
