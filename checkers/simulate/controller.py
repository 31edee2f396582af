"""The simulated cluster's control plane, and time.

Sessions (ZooKeeper) and fencing (KRaft), the controller acting on brokers that lost them
(failed followers leave the ISR, a failed leader is replaced, cleanly or, where enabled,
uncleanly), LeaderAndIsr reaching the brokers, controlled shutdown, ISR expansion and
shrinking. `settle` lets the cluster act until nothing changes; `advance` lets time pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from checkers.simulate.state import (
    FOLLOWER,
    LEADER,
    RUNNING,
    Replica,
    SimulationError,
    differ,
)
from runrecord.steps.base import QUORUM

if TYPE_CHECKING:
    from checkers.simulate.simulator import Simulator


class ControlPlane:
    """The controller and the brokers' reactions to it, and time: a part of the simulator
    (`Simulator.control`), beside replication and the transactional producer."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self._began = 0.0  # the model's time when the step running began

    def _bump(self) -> None:
        self.sim.ctl.epoch += 1

    def before_step(self) -> None:
        """The wall clock before a step: the rest of the last step's time on the brokers,
        and the time this one spends before its fault takes effect (`catch_up`), then what
        the transactions time."""
        self.catch_up(self.sim._step - 1)
        self.catch_up(self.sim._step, lead=True)
        self.sim.transactions.before_step()
        self._began = self.sim.time

    def catch_up(self, step: int, *, lead: bool = False) -> None:
        """A step takes longer on real brokers than the protocol waits the model counts for
        it (its rules set up in every node it touches, a settle waiting for the cluster, a
        write for its answer). By the run's clock (`SimOptions.step_seconds`), a paused or
        cut-off broker's session, or a follower's lag, runs on through that time: the part
        before the step's fault took effect (`SimOptions.step_lead`) ahead of it (`lead`),
        the rest of it at its end. Seen on 4.4.0: a leader cut off from the quorum, then
        `wait 5` with a 6 s session; the brokers fenced it during the wait, which took
        10.2 s. And a cut from the quorum that took 8.0 s on a loaded machine, most of them
        setting up its rules: the leader was fenced only in the wait after the next step."""
        clock, leads = self.sim.options.step_seconds, self.sim.options.step_lead
        if not 0 <= step < len(clock):
            return
        ahead = leads[step] if step < len(leads) else 0.0
        behind = ahead if lead else clock[step] - ahead - (self.sim.time - self._began)
        if behind <= 0:
            return
        start = len(self.sim.events)
        self.advance(behind)
        # What the clock added counts from here on: a session or a follower's lag running.
        running = any(n.disconnected for n in self.sim.nodes.values()) or any(
            any(r.lag.values()) for r in self.sim.replicas.values()
        )
        self.sim.transactions.clock_used |= running or len(self.sim.events) > start
        if len(self.sim.events) > start:  # a session or a follower's lag ran out meanwhile
            said = (
                f"step {step} spent {behind:.1f} s on the brokers before its fault took effect"
                if lead
                else f"step {step} took {clock[step]:.1f} s on the brokers, {behind:.1f} s more "
                "than the model's own time for it"
            )
            self.sim._event(f"the run's clock: {said}")
            self.sim.events.insert(start, self.sim.events.pop())  # said before what it caused

    def _leave_isr(self, b: int) -> None:
        """The controller takes a broker out of the ISR. With eligible leader replicas, one
        that leaves while the ISR falls below min.insync.replicas joins the ELR (KIP-966:
        ELR = old ELR + old ISR - new ISR, fenced brokers and lagging followers alike)."""
        ctl = self.sim.ctl
        ctl.isr.remove(b)
        below = len(ctl.isr) < self.sim.cluster.topic_config.min_insync_replicas
        if self.sim.elr and below and b not in ctl.elr:
            ctl.elr.append(b)

    def _isr_restored(self) -> None:
        """KIP-966: the ELR empties once the ISR is back to min.insync.replicas."""
        if (
            self.sim.elr
            and len(self.sim.ctl.isr) >= self.sim.cluster.topic_config.min_insync_replicas
        ):
            self.sim.ctl.elr = []

    def _note_clean_election(self, leaving: int | None = None) -> None:
        """A near miss worth ranking: the new leader lacks a batch that another live ISR
        member holds, and that member cannot reach it to truncate (KIP-279 scenario 1,
        steps 2 and 3: both brokers still in the ISR, cut off from each other)."""
        leader = self.sim.replicas[self.sim.ctl.leader] if self.sim.ctl.leader is not None else None
        if leader is None:
            return
        self.sim.clean_elections += 1
        for r in self.sim.replicas.values():
            reachable = self.sim.alive(r.broker) and self.sim.can_talk(r.broker, leader.broker)
            if r is not leader and not reachable and differ(leader, r):
                # KIP-279 scenario 1, step 3: the new leader and a replica that cannot
                # truncate yet hold different data at the same offsets.
                self.sim.divergent_failovers += 1
                break
        held = {(x.base, x.last, x.tag) for x in leader.batches}
        for b in self.sim.ctl.isr:
            if b in (leader.broker, leaving) or not self.sim.alive(b):
                continue
            if self.sim.can_talk(b, leader.broker):
                continue  # it will truncate what the new leader lacks: an ordinary failover
            if any((x.base, x.last, x.tag) not in held for x in self.sim.replicas[b].batches):
                self.sim.risky_elections += 1
                return

    def _controller_reacts(self) -> bool:
        """The controller acts on brokers that lost their session: failed followers leave
        the ISR, a failed leader is replaced (from the ISR; out of it only where unclean
        election is enabled), an offline partition gets a leader when one comes back."""
        ctl, changed = self.sim.ctl, False
        if self.sim.cluster.mode == "zk" and self.sim._controller_broker() is None:
            return False  # no broker holds a session: nobody can act
        if self.sim.cluster.mode == "kraft" and not self.sim.quorum_up():
            return False  # no quorum, no active controller: nobody can act
        # Once per failure, as the controller's broker-failure event does: a ZooKeeper-mode
        # leader may add a follower that still fetches straight back (faults/session.py).
        failed, self.sim._failed = self.sim._failed, set()
        for b in sorted(failed):
            if b in ctl.isr and b != ctl.leader and not self.sim.registered(b) and len(ctl.isr) > 1:
                self._leave_isr(b)
                if self.sim.bump_epoch_on_isr_shrink:
                    self._bump()
                self.sim._event(f"controller removes failed broker {b} from the ISR {ctl.isr}")
                changed = True
        if ctl.leader is not None and self.sim.registered(ctl.leader):
            return changed
        old = ctl.leader
        if self.sim.elr and old is not None and old in ctl.isr:
            # With ELR the fenced leader leaves the ISR even as its last member.
            self._leave_isr(old)
        clean = [b for b in self.sim.assignment if b in ctl.isr and self.sim.registered(b)]
        eligible = [b for b in self.sim.assignment if b in ctl.elr and self.sim.registered(b)]
        last = ctl.last_known_leader
        unclean = [b for b in self.sim.assignment if self.sim.registered(b)]
        if clean:
            ctl.leader = clean[0]
            ctl.isr = [b for b in ctl.isr if self.sim.registered(b)]
            self._bump()
            self._note_clean_election()
            self.sim._event(
                f"controller elects broker {ctl.leader} from the ISR (epoch {ctl.epoch}, "
                f"ISR {ctl.isr})"
            )
            return True
        if self.sim.elr and not ctl.isr and eligible:
            # KIP-966: with the ISR empty, an unfenced ELR member leads, a clean election.
            ctl.leader, ctl.isr = eligible[0], [eligible[0]]
            ctl.elr.remove(eligible[0])
            self._bump()
            self._note_clean_election()
            self.sim._event(
                f"controller elects broker {ctl.leader} from the ELR (epoch {ctl.epoch}, "
                f"ELR left {ctl.elr})"
            )
            return True
        if (
            self.sim.elr
            and not ctl.isr
            and not ctl.elr
            and last is not None
            and self.sim.registered(last)
        ):
            # With ISR and ELR empty the controller elects the last known leader at once,
            # as an unclean election (RECOVERING), whatever unclean.leader.election.enable
            # says (PartitionChangeBuilder.canElectLastKnownLeader; KIP-966 part 2 never
            # shipped).
            self._elect_unclean(last)
            self.sim.last_known_elections += 1
            self.sim._event("(the last known leader, ISR and ELR empty: KIP-966)")
            return True
        if unclean and self.sim.cluster.topic_config.unclean_leader_election_enable:
            self._elect_unclean(unclean[0])
            return True
        if old is not None:
            # The controller writes the leaderless state as a new leader epoch, even when
            # the leader was the ISR's last member: ZooKeeper mode removes it through
            # LeaderAndIsr.newLeaderAndIsr, and KRaft's PartitionChangeRecord setting the
            # leader to -1 bumps it too (PartitionRegistration.merge).
            ctl.leader = None
            ctl.last_known_leader = old
            self._bump()
            self.sim._event(
                f"partition offline: no live replica in the ISR {ctl.isr} (epoch {ctl.epoch})"
            )
            return True
        return changed

    def _elect_unclean(self, broker: int) -> None:
        self.sim.ctl.leader = broker
        self.sim.ctl.isr = [broker]
        self.sim.ctl.elr = []  # an unclean or last-known-leader election empties the ELR
        self._bump()
        self.sim.unclean_elections += 1
        self.sim._event(
            f"controller elects out-of-sync broker {broker} (unclean, epoch {self.sim.ctl.epoch})"
        )

    def _registrations(self) -> bool:
        changed = False
        for node in self.sim.nodes.values():
            b = node.broker
            if not node.registered and self.sim.alive(b) and self.sim.can_talk(b, QUORUM):
                node.registered = True
                node.disconnected = 0.0
                self.sim._event(f"broker {b} registers (new session)")
                unclean = node.restarted and self.sim.reregistration_fences and not node.clean
                if unclean and b in self.sim.ctl.elr:
                    # An unclean restart (no clean-shutdown marker to show the controller
                    # its previous broker epoch) leaves the ELR (KAFKA-15586, KAFKA-18635).
                    self.sim.ctl.elr.remove(b)
                    self.sim._event(f"broker {b} restarted uncleanly: out of the ELR")
                node.restarted = False
                changed = True
        return changed

    def _deliver(self) -> bool:
        """LeaderAndIsr: brokers the controller can reach learn the partition's state."""
        ctl, changed = self.sim.ctl, False
        if ctl.leader is None:
            return False
        for b, r in sorted(self.sim.replicas.items()):
            if not (
                self.sim.alive(b) and self.sim.registered(b) and self.sim._reaches_controller(b)
            ):
                continue
            if ctl.leader == b:
                if r.role != LEADER or r.epoch != ctl.epoch:
                    self._become_leader(r)
                    changed = True
                elif r.isr != ctl.isr:
                    r.isr = list(ctl.isr)
                    changed = True
            elif r.role != FOLLOWER or r.leader != ctl.leader or r.epoch != ctl.epoch:
                self._become_follower(r, ctl.leader)
                changed = True
        return changed

    def _become_leader(self, r: Replica) -> None:
        r.role, r.leader, r.epoch = LEADER, r.broker, self.sim.ctl.epoch
        r.isr = list(self.sim.ctl.isr)
        r.needs_truncation, r.stuck = False, None
        r.fetched, r.lag = {}, {}
        if self.sim.epoch_on_election and not self.sim.v1:
            self.sim._assign_epoch(r, r.epoch, r.leo)
        # Partition.makeLeader: the followers' log end offsets are unknown until they fetch,
        # so only a leader alone in the ISR moves its high watermark at once.
        if r.isr == [r.broker]:
            r.hw = max(r.hw, r.leo)
        self.sim._event(
            f"broker {r.broker} leads in epoch {r.epoch} (log end offset {r.leo}, ISR {r.isr})"
        )

    def _become_follower(self, r: Replica, leader: int) -> None:
        new_leader = r.role != FOLLOWER or r.leader != leader
        r.role, r.leader, r.epoch = FOLLOWER, leader, self.sim.ctl.epoch
        r.isr, r.fetched, r.lag = [], {}, {}
        if not new_leader:
            return
        r.needs_truncation, r.stuck = True, None
        self.sim._event(f"broker {r.broker} follows broker {leader} in epoch {r.epoch}")
        if self.sim.v1:
            # Before KIP-101 the follower truncates to its high watermark as it becomes a
            # follower, before fetching anything (ReplicaManager.makeFollowers).
            self.sim.replication._truncate(r, r)

    def _controlled_shutdown(self, b: int) -> None:
        """SIGTERM: the controller moves leadership away and drops the broker from the ISR
        first; the broker flushes its logs and checkpoints its high watermarks, then
        deregisters."""
        ctl = self.sim.ctl
        if self.sim.registered(b) and b in self.sim.replicas:
            others = [
                x for x in self.sim.assignment if x in ctl.isr and x != b and self.sim.registered(x)
            ]
            if ctl.leader == b and others:
                ctl.leader = others[0]
                self._leave_isr(b)
                self._bump()
                self._note_clean_election(leaving=b)
                self.sim._event(
                    f"controlled shutdown: broker {others[0]} leads in epoch {ctl.epoch}"
                )
                if self.sim.v1 and self.sim._reaches_controller(b):
                    # The new LeaderAndIsr goes to the replica shutting down as well
                    # (ControlledShutdownLeaderSelector), which becomes a follower before it
                    # stops: before KIP-101 that truncates its log to its high watermark.
                    self._become_follower(self.sim.replicas[b], others[0])
            elif ctl.leader != b and b in ctl.isr and len(ctl.isr) > 1:
                self._leave_isr(b)
                if self.sim.bump_epoch_on_isr_shrink:
                    self._bump()
                self.sim._event(f"controlled shutdown: broker {b} leaves the ISR {ctl.isr}")
        r = self.sim.replicas.get(b)
        if r is not None:
            r.flushed = r.leo
            r.hw_checkpoint = r.hw
        self.sim._stop(b, clean=True)
        self.sim.nodes[b].registered = False
        self.sim._event(f"broker {b} shut down (SIGTERM)")

    def _expand_isr(self) -> bool:
        ctl = self.sim.ctl
        lead = self.sim.replicas.get(ctl.leader) if ctl.leader is not None else None
        if (
            lead is None
            or lead.role != LEADER
            or lead.epoch != ctl.epoch
            or not self.sim.alive(lead.broker)
        ):
            return False
        changed = False
        for b in self.sim.assignment:
            f = self.sim.replicas[b]
            leo = lead.fetched.get(b)
            if b in ctl.isr or leo is None or f.stuck:
                continue
            fetching = f.role == FOLLOWER and f.leader == lead.broker
            # KRaft keeps fenced brokers out of the ISR (KIP-841); ZooKeeper mode does not.
            fenced = self.sim.cluster.mode == "kraft" and not self.sim.registered(b)
            caught_up = fetching and not fenced and self.sim.can_talk(b, lead.broker)
            if caught_up and leo >= lead.hw and self.sim._can_write_isr(lead.broker, ("add", b)):
                ctl.isr = [x for x in self.sim.assignment if x in ctl.isr or x == b]
                lead.isr = list(ctl.isr)
                lead.lag[b] = 0.0
                self._isr_restored()
                self.sim._event(f"broker {b} caught up and rejoins the ISR {ctl.isr}")
                changed = True
        return changed

    def _release_held(self) -> list[int]:
        """The heal: held AlterPartition requests land, late. The controller takes one
        only if the partition is as its sender saw it (ZooKeeper's zkVersion, KRaft's
        partition epoch), and KRaft never adds a fenced broker (KIP-841); a rejected
        request leaves the leader to ask again from what it sees now."""
        released, ctl = sorted(self.sim.held), self.sim.ctl
        for broker, (action, b, seen) in sorted(self.sim.pending.items()):
            fenced = (
                action == "add" and self.sim.cluster.mode == "kraft" and not self.sim.registered(b)
            )
            if seen != (ctl.leader, ctl.epoch, tuple(ctl.isr)) or fenced:
                self.sim._event(f"broker {broker}'s late AlterPartition ({action} {b}) rejected")
                continue
            if action == "remove":
                self._leave_isr(b)
                if self.sim.bump_epoch_on_isr_shrink:
                    self._bump()
            else:
                ctl.isr = [x for x in self.sim.assignment if x in ctl.isr or x == b]
                self._isr_restored()
            self.sim._event(f"broker {broker}'s late AlterPartition ({action} {b}): ISR {ctl.isr}")
        self.sim.held.clear()
        self.sim.pending.clear()
        return released

    def settle(self) -> None:
        """Let the cluster act until nothing changes: sessions, the controller, LeaderAndIsr,
        truncation, fetching, high watermarks, ISR expansion. No time passes."""
        for _ in range(200):
            changed = self._registrations()
            changed |= self._controller_reacts()
            changed |= self._deliver()
            changed |= self.sim._replicate()
            changed |= self._expand_isr()
            changed |= self.sim.reassignments._reassignment_acts()
            changed |= self.sim.transactions._write_markers()
            if not changed:
                return
        raise SimulationError("the simulated cluster did not settle")  # a simulator bug

    def advance(self, seconds: float) -> None:
        """Let time pass: sessions of paused or cut-off brokers expire; the leader drops
        followers that have not caught up for replica.lag.time.max.ms."""
        self.sim.time += seconds
        self.sim.transactions._time_out_transactions()
        # Without a quorum nobody fences anyone; its next leader starts every broker's
        # session afresh (BrokerHeartbeatManager on activation).
        quorum = self.sim.cluster.mode != "kraft" or self.sim.quorum_up()
        for node in self.sim.nodes.values():
            b = node.broker
            heard = not quorum or (node.status == RUNNING and self.sim.linked(b, QUORUM))
            if not node.registered or heard:
                node.disconnected = 0.0
                continue
            node.disconnected += seconds
            if node.disconnected >= self.sim._session_timeout(b):
                node.registered = False
                # A ZooKeeper-mode successor reads the live brokers from /brokers/ids when it
                # takes over (KafkaController.initializeControllerContext): the old
                # controller is simply absent, no BrokerChange reports it, and
                # onBrokerFailure never takes it out of an ISR. Its leader's lag check may.
                if self.sim.cluster.mode == "kraft" or b != self.sim.controller_id:
                    self.sim._failed.add(b)
                what = "is fenced" if self.sim.cluster.mode == "kraft" else "loses its session"
                self.sim._event(f"broker {b} {what} ({node.status}, {node.disconnected:g} s)")
        lead = (
            self.sim.replicas.get(self.sim.ctl.leader) if self.sim.ctl.leader is not None else None
        )
        if lead is not None and lead.role == LEADER and self.sim.alive(lead.broker):
            limit = self.sim.cluster.lag_time_ms(lead.broker) / 1000
            for b in [x for x in lead.isr if x != lead.broker]:
                f = self.sim.replicas[b]
                fetching = (
                    f.role == FOLLOWER
                    and f.leader == lead.broker
                    and not f.stuck
                    and self.sim.can_talk(b, lead.broker)
                    and f.leo >= lead.leo
                )
                lead.lag[b] = 0.0 if fetching else lead.lag.get(b, 0.0) + seconds
                # The leader's ISR write is conditional on the version it knows
                # (zkVersion, partition epoch): a stale view makes it fail.
                current = lead.isr == self.sim.ctl.isr
                behind = lead.lag[b] > limit and current
                if behind and self.sim._can_write_isr(lead.broker, ("remove", b)):
                    self._leave_isr(b)
                    lead.isr = list(self.sim.ctl.isr)
                    self.sim._event(
                        f"leader {lead.broker} drops broker {b} from the ISR after "
                        f"{lead.lag[b]:g} s behind (ISR {self.sim.ctl.isr})"
                    )
        self.settle()
