"""The steps of a schedule on the simulated cluster: `Simulator.apply` resolves a step's
targets (roles, lowest eligible broker id first), checks its precondition (a step that
cannot run is skipped, saying what was observed) and runs it; `finish` heals everything,
lets the replicas converge and predicts the outcome (checkers.simulate.prediction).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from basics.protocol import Protocol
from checkers.simulate.prediction import Prediction, predict
from checkers.simulate.slow_links import SlowLinks
from checkers.simulate.state import (
    AS_SEEN,
    LEADER,
    PAUSED,
    RUNNING,
    STOPPED,
    SimBatch,
    SimOptions,
    StepRecord,
    Write,
)
from checkers.simulate.transactions import ABORT
from runrecord.schedule import Cluster
from runrecord.schedule_roles import (
    NO_ALTER_PARTITION,
    Rejected,
    Skip,
    View,
    candidates,
    cannot_hold_alter_partition,
    cannot_register,
    cannot_shut_down,
    cannot_use_log_dir,
    pick,
)
from runrecord.steps.base import QUORUM, Endpoint, Role, Step
from runrecord.steps.disks import FailDir, MoveDir
from runrecord.steps.elections import ElectPreferred, ElectUnclean
from runrecord.steps.links import Cut, ExpireSession, Heal, HoldAlterPartition, HoldBack
from runrecord.steps.processes import Kill, Pause, PowerLoss, Restart, Resume
from runrecord.steps.quorum import ACTIVE, Quorum
from runrecord.steps.reassign import Reassign
from runrecord.steps.waits import Wait
from runrecord.steps.writes import Produce

# log.flush.offset.checkpoint.interval.ms (Kafka's default): how often a broker writes the
# recovery points of its logs to recovery-point-offset-checkpoint.
RECOVERY_CHECKPOINT_SECONDS = 60


class Simulator(SlowLinks):
    """A cluster in the state a schedule's steps have left it in. `apply` runs one step,
    `finish` heals everything, lets the replicas converge and predicts the outcome."""

    def __init__(
        self, cluster: Cluster, protocol: Protocol | str, options: SimOptions | None = None
    ) -> None:
        """`protocol`: the rules to follow, or a release's version (its rules, as
        `basics.releases.Release.protocol` says)."""
        super().__init__(cluster, protocol, options)
        self.settle()  # the topic is created: its first leader learns it leads

    def view(self) -> View:
        """The cluster as a step's roles are resolved against it."""
        ctl = self.ctl
        controller = None if self.cluster.mode == "kraft" else self._controller_broker()
        return View(
            self.cluster.mode,
            self.cluster.broker_ids,
            self.assignment,
            ctl.leader,
            ctl.isr,
            controller,
            self.coordinator(),
        )

    def _candidates(self, target: Endpoint) -> list[Any]:
        return candidates(target, self.view())

    def _pick(self, target: Endpoint, ok: Callable[[Any], str | None], what: str) -> Any:
        return pick(target, self.view(), ok, what)

    def _status_is(self, status: str) -> Callable[[Any], str | None]:
        """The precondition that a broker is running (not paused), stopped or paused, for
        `_pick`: None when it is, else what it is."""

        def ok(b: Any) -> str | None:
            fits = self.alive(b) if status == RUNNING else self.nodes[b].status == status
            return None if fits else self._describe_broker(b)

        return ok

    def apply(self, step: Step) -> StepRecord:
        """Run one step. A step whose precondition does not hold is skipped, saying what was
        observed instead; it changes nothing."""
        self._step = len(self.records)
        self.between_steps()
        self.elected = None
        record = StepRecord(self._step, step.describe(), "done")
        start = len(self.events)
        handler = getattr(self, "_do_" + type(step).__name__.lower())
        try:
            if self._step in self.options.unserved:
                raise Skip("the coordinator or a spanned partition could not serve it")
            record.targets = handler(step) or {}
        except Skip as skip:
            record.status, record.note = "skipped", skip.observed
        except Rejected as rejected:
            record.status, record.note = "rejected", str(rejected)
        self._follow_controller_seen()
        record.events, record.controller = self.events[start:], self.elected
        self.records.append(record)
        self._near_misses()
        self.after_step()
        return record

    def _follow_controller_seen(self) -> None:
        """After a step: take the controller the brokers had, where they moved it while the
        model's kept its session (an unclean election before 2.4 deletes /controller)."""
        seen = self._controller_seen()
        if self.cluster.mode == "kraft" or seen is None or seen == self.controller_id:
            return
        if self.registered(seen):
            self._controller_moves(seen, AS_SEEN)
            self.settle()

    def _do_produce(self, step: Produce) -> dict[str, Any]:
        done = self._write(step.count, step.acks, step.to)
        self.filler_written(step.filler, done)
        return done

    def _write(
        self, count: int, acks: str, to: Any, txn: int | None = None, *, begin: bool = False
    ) -> dict[str, Any]:
        """One batch of `count` records through `to` (a transaction's, with `txn`)."""

        def ok(b: Any) -> str | None:
            r = self.replicas.get(b)
            if r is None:
                return f"broker {b} holds no replica"
            if not self.alive(b):
                return self._describe_broker(b)
            if r.role != LEADER:
                return f"broker {b} does not know it leads (it is {r.role or 'not started'})"
            return None

        if to == Role.LEADER and self.ctl.leader is None:
            raise Skip("the partition has no leader (offline)")
        b = self._pick(to, ok, "produce to")
        r = self.replicas[b]
        min_isr = self.cluster.topic_config.min_insync_replicas
        if acks == "all" and len(r.isr) < min_isr:
            raise Rejected(
                f"NOT_ENOUGH_REPLICAS: ISR {r.isr} is below min.insync.replicas={min_isr}; "
                "nothing written"
            )
        if begin:
            self.begin_txn()
        write = Write(len(self.writes), acks, b, r.epoch, [], False, self._step)
        epoch = -1 if self.v1 else r.epoch
        if self.v1:
            # Message format v1 without compression: every record is its own message.
            batches = [
                SimBatch(r.leo + i, r.leo + i, epoch, f"w{write.id}.{i}") for i in range(count)
            ]
        else:
            batches = [SimBatch(r.leo, r.leo + count - 1, epoch, f"w{write.id}", txn)]
        write.batches = [(x.base, x.last, x.tag) for x in batches]
        self._append(r, batches)
        self.writes.append(write)
        self._event(
            f"broker {b} appends {batches[0].base}..{batches[-1].last} in epoch {r.epoch} "
            f"(write {write.id}, acks={acks})"
        )
        self.settle()
        end = batches[-1].last + 1
        if acks == "1":
            write.acknowledged = True
        else:
            # acks=all: acknowledged once the high watermark passes the write and the ISR
            # still has min.insync.replicas; otherwise the write waits in the leader's
            # purgatory until the request times out, while sessions end and the ISR may
            # shrink under it, which can still complete it.
            def completed() -> bool:
                return r.role == LEADER and r.hw >= end and len(r.isr) >= min_isr

            write.acknowledged = completed()
            if not write.acknowledged:
                self._pass_time(Produce.REQUEST_TIMEOUT)
                write.acknowledged = completed()
        self._event(
            f"write {write.id} {'acknowledged' if write.acknowledged else 'not acknowledged'} "
            f"(high watermark {r.hw}, ISR {r.isr})"
        )
        return {"to": b}

    def _do_holdback(self, step: HoldBack) -> dict[str, Any]:
        leader = self.ctl.leader
        if leader is None or not self.alive(leader):
            raise Skip("no live leader to hold a follower back from")

        def ok(b: Any) -> str | None:
            if b not in self.ctl.isr or b == leader:
                return f"broker {b} is not a follower in the ISR {self.ctl.isr}"
            if not self.alive(b):
                return self._describe_broker(b)
            if not self.linked(b, leader):
                return f"broker {b} is already cut from leader {leader}"
            return None

        b = self._pick(step.target, ok, "hold back")
        self.cuts.add(frozenset((b, leader)))
        self._event(f"broker {b} cut off from leader {leader} (held back)")
        self.settle()
        return {"follower": b, "leader": leader}

    def _do_holdalterpartition(self, step: HoldAlterPartition) -> dict[str, Any]:
        if not self.alter_partition:
            raise Skip(NO_ALTER_PARTITION)
        running = self._status_is(RUNNING)

        def ok(b: Any) -> str | None:
            return cannot_hold_alter_partition(b, self.assignment, running(b), self.held)

        b = self._pick(step.target, ok, "hold the AlterPartition requests of")
        self.held.add(b)
        self._event(f"broker {b}'s AlterPartition requests held")
        self.settle()
        return {"broker": b}

    def _do_cut(self, step: Cut) -> dict[str, Any]:
        for a in self._candidates(step.a):
            for b in self._candidates(step.b):
                if a != b and self.linked(a, b):
                    self.cuts.add(frozenset((a, b)))
                    self._event(f"link {a} - {b} cut")
                    self.settle()
                    return {"a": a, "b": b}
        raise Skip(f"no uncut link between {step.a} and {step.b}")

    def _do_heal(self, step: Heal) -> dict[str, Any]:
        if step.a is None:
            if not self.cuts and not self.held and self.held_end is None and not self.slowed:
                raise Skip("nothing is cut")
            healed = sorted(sorted(map(str, c)) for c in self.cuts) + self.lift_slow()
            was_up = self.quorum_up()
            self.cuts.clear()
            self._quorum_back(was_up)
            released = self._release_held()
            self._event(f"every cut healed ({healed}), AlterPartition released {released}")
            late = self.deliver_held_end()
            self.settle()
            late_end = {"late_end": late} if late else {}
            return {"links": healed, "released": released, **late_end}
        assert step.b is not None
        for a in self._candidates(step.a):
            for b in self._candidates(step.b):
                if frozenset((a, b)) in self.cuts or self.lift_slow(a, b):
                    self.cuts.discard(frozenset((a, b)))
                    self._event(f"link {a} - {b} healed")
                    self.settle()
                    return {"a": a, "b": b}
        raise Skip(f"no cut between {step.a} and {step.b}")

    def _do_expiresession(self, step: ExpireSession) -> dict[str, Any]:
        def ok(b: Any) -> str | None:
            if not self.alive(b) or not self.registered(b):
                return self._describe_broker(b)
            if not self.linked(b, QUORUM):
                return f"broker {b} is already cut from the quorum"
            return None

        b = self._pick(step.target, ok, "expire")
        self.cuts.add(frozenset((b, QUORUM)))
        self._event(f"broker {b} cut off from the quorum until its session expires")
        self.advance(self._session_timeout(b))
        return {"broker": b}

    def _do_electpreferred(self, step: ElectPreferred) -> dict[str, Any]:
        preferred = self.assignment[0]
        if self.ctl.leader == preferred:
            raise Skip(f"preferred replica {preferred} already leads")
        if not self.registered(preferred):
            raise Skip(self._describe_broker(preferred))
        if preferred not in self.ctl.isr:
            raise Skip(f"preferred replica {preferred} is not in the ISR {self.ctl.isr}")
        if self.cluster.mode == "zk" and self._controller_broker() is None:
            raise Skip("no controller")
        self.ctl.leader = preferred
        self._bump()
        self._note_clean_election()
        self._event(f"preferred election: broker {preferred} leads in epoch {self.ctl.epoch}")
        self.settle()
        return {"leader": preferred}

    def _do_electunclean(self, step: ElectUnclean) -> dict[str, Any]:
        live_isr = [b for b in self.ctl.isr if self.registered(b)]
        if live_isr:
            raise Skip(f"ISR member(s) {live_isr} alive: that would be a clean election")

        def ok(b: Any) -> str | None:
            if b not in self.replicas:
                return f"broker {b} holds no replica"
            if b in self.ctl.isr:
                return f"broker {b} is in the ISR {self.ctl.isr}"
            if not self.registered(b):
                return self._describe_broker(b)
            return None

        b = self._pick(step.target, ok, "elect")
        self._elect_unclean(b)
        self.settle()
        return {"leader": b}

    def _do_kill(self, step: Kill) -> dict[str, Any]:
        running = self._status_is(RUNNING)

        def ok(b: Any) -> str | None:
            if running(b) is None and step.signal == "SIGTERM":
                return cannot_shut_down(b, self._controller_broker(), self.linked)
            return running(b) or (cannot_register(b, self.linked) if step.restart else None)

        b = self._pick(step.target, ok, "kill")
        if step.signal == "SIGTERM":
            self._controlled_shutdown(b)
            self.settle()
        else:
            self._stop(b)
            self._event(f"broker {b} killed (SIGKILL)")
            if not step.restart or self._waits_out_its_session():
                self.advance(self._session_timeout(b))
        if step.restart:
            if self.nodes[b].registered and self._waits_out_its_session():
                self.advance(self._session_timeout(b))
            self._start(b)
            self._event(f"broker {b} restarted at once")
            self.settle()
        return {"broker": b}

    def _waits_out_its_session(self) -> bool:
        """Whether a broker back within its session registers only once that session ended:
        in ZooKeeper mode its old ephemeral registration must expire first, and a KRaft
        controller from 4.0 refuses another incarnation while the old session lives
        (DUPLICATE_BROKER_REGISTRATION: KAFKA-17793; KAFKA-19047 would have accepted it
        and was reverted, KAFKA-19130). Before 4.0 a KRaft broker registers again at once."""
        return self.cluster.mode == "zk" or self.reregistration_fences

    def _do_restart(self, step: Restart) -> dict[str, Any]:
        stopped = self._status_is(STOPPED)

        def ok(b: Any) -> str | None:
            return stopped(b) or cannot_register(b, self.linked)

        b = self._pick(step.target, ok, "restart")
        self._start(b)
        self.settle()
        return {"broker": b}

    def _do_pause(self, step: Pause) -> dict[str, Any]:
        b = self._pick(step.target, self._status_is(RUNNING), "pause")
        self.nodes[b].status = PAUSED
        self._event(f"broker {b} paused")
        self.settle()
        return {"broker": b}

    def _do_resume(self, step: Resume) -> dict[str, Any]:
        b = self._pick(step.target, self._status_is(PAUSED), "resume")
        self.nodes[b].status = RUNNING
        self._event(f"broker {b} resumed")
        self.settle()
        return {"broker": b}

    def _log_dir_target(self, target: Endpoint, failing: bool, what: str) -> int:
        running, view, up = self._status_is(RUNNING), self.view(), self.can_talk
        why = lambda b: cannot_use_log_dir(  # noqa: E731
            b, view, running(b), failing=failing, quorum=up(b, QUORUM)
        )
        return self._pick(target, why, what)

    def _do_movedir(self, step: MoveDir) -> dict[str, Any]:
        b = self._log_dir_target(step.target, False, "move the replica of")
        # The swap puts a copy of the log in its place (KIP-113): its batches and its
        # leader epoch cache are the same, so nothing the model keeps changes. A move left
        # in flight changes nothing either: the current log serves until the swap.
        how = "throttled" if step.throttle else "swapped in"
        self._event(f"broker {b}'s replica moved to its other log dir ({how})")
        return {"broker": b}

    def _do_faildir(self, step: FailDir) -> dict[str, Any]:
        b = self._log_dir_target(step.target, True, "fail the log dir of")
        # The broker takes the dir offline, with the replica, and tells the controller
        # (KRaft: its next heartbeat names the dir, KIP-858; ZooKeeper mode: a
        # log_dir_event_notification, KIP-112), which acts as for a broker that lost its
        # session: out of the ISR, its leadership moved. For this partition the broker is
        # down until it restarts on the disk, after a controlled shutdown (faults.disk)
        # that the controller sees as clean; what reached the disk stays there.
        self._stop(b, clean=True)
        if self.nodes[b].registered:
            self.nodes[b].registered = False
            self._failed.add(b)
        self._event(f"broker {b}'s log dir fails: its replica goes offline")
        self.settle()
        return {"broker": b}

    def _do_reassign(self, step: Reassign) -> dict[str, Any]:
        return self.reassign_step(step, self.view())

    def _do_powerloss(self, step: PowerLoss) -> dict[str, Any]:
        b = self._pick(step.target, self._status_is(RUNNING), "cut the power of")
        r = self.replicas.get(b)
        lost: list[SimBatch] = []
        told = dict(self.options.kept_after_power_loss).get(self._step)
        if r is not None:
            cut = r.flushed
            if step.lose is not None and r.batches:
                nth = r.batches[-step.lose].base if step.lose <= len(r.batches) else 0
                cut = max(cut, nth)
            if told is not None:
                cut = told
            lost = [x for x in r.batches if x.last >= cut]
            r.batches = [x for x in r.batches if x.last < cut]
            before, r.leo = r.leo, r.batches[-1].last + 1 if r.batches else 0
            if r.leo < before:
                self.power_drops.append((r.leo, before))
        self._stop(b)
        self.power_losses += 1
        spans = ", ".join(x.span for x in lost) or "nothing"
        self._event(f"broker {b} loses power; unflushed {spans} gone")
        self.advance(self._session_timeout(b))
        return {"broker": b, "lost_batches": len(lost)}

    def _do_quorum(self, step: Quorum) -> dict[str, Any]:
        """A fault of the KRaft controller quorum. The quorum elects another leader while a
        majority of its voters runs; without one, nobody fences brokers or changes the
        partition until it has one again, when every broker's session starts afresh."""
        voter = self.quorum_leader if step.voter == ACTIVE else step.voter
        if voter is None:
            raise Skip("the quorum has no leader")
        state, cut = self.voters[voter], self.voter_cut(voter)
        wanted = {"kill": RUNNING, "pause": RUNNING, "isolate": RUNNING}.get(step.action)
        wanted = wanted or {"restart": STOPPED, "resume": PAUSED}[step.action]
        if state != wanted:
            raise Skip(f"voter {voter} is {state}")
        if step.action == "isolate" and cut in self.cuts:
            raise Skip(f"voter {voter} is already isolated")
        was_up = self.quorum_up()
        if step.action == "isolate":
            self.cuts.add(cut)
        else:
            self.voters[voter] = {"kill": STOPPED, "pause": PAUSED}.get(step.action, RUNNING)
        if self.quorum_leader == voter and step.action != "restart":
            self.quorum_leader = None
        self._quorum_back(was_up)
        leader = self.quorum_leader
        self._event(
            f"voter {voter}: {step.action}; quorum "
            + (f"led by voter {leader}" if leader is not None else "without a majority")
        )
        self.settle()
        return {"voter": voter, "quorum_leader": leader}

    def _quorum_back(self, was_up: bool) -> None:
        """After a change to the voters: the quorum led by its lowest reachable voter while
        a majority is up; a quorum that came back starts every broker's session afresh."""
        if not self.quorum_up():
            self.quorum_leader = None
            return
        if self.quorum_leader is None:
            self.quorum_leader = self.voters_up()[0]
        if not was_up:
            for node in self.nodes.values():
                node.disconnected = 0.0

    def _do_wait(self, step: Wait) -> dict[str, Any]:
        self._pass_time(step.seconds)
        return {}

    def _pass_time(self, seconds: float) -> None:
        """Time passing within a step: `advance`, and the periodic checkpoints (high
        watermark, recovery point) of the brokers that run through it."""
        self.advance(seconds)
        for b, r in self.replicas.items():
            interval = self.cluster.checkpoint_interval_ms(b) / 1000
            if self.alive(b) and seconds >= interval:
                r.hw_checkpoint = r.hw
            if self.alive(b) and seconds >= RECOVERY_CHECKPOINT_SECONDS:
                r.flushed = max(r.flushed, min(r.recovered, r.leo))

    # -- the end --------------------------------------------------------------------------

    def finish(self) -> Prediction:
        """Heal everything (cuts, pauses, stopped brokers: those the controller has in the
        ISR first, then by broker id), let the replicas converge, and judge."""
        self.catch_up(len(self.records) - 1)
        self.abort_if_told_at_heal(len(self.records))
        self._step = -1
        self._event("heal: every cut, pause and stopped broker (and voter)")
        was_up = self.quorum_up()
        self.lift_slow()
        self.cuts.clear()
        for v in self.voters:
            self.voters[v] = RUNNING
        self._quorum_back(was_up)
        self._release_held()
        self.deliver_held_end()
        for node in self.nodes.values():
            if node.status == PAUSED:
                node.status = RUNNING
        self.settle()
        stopped = [b for b, n in self.nodes.items() if n.status == STOPPED]
        for b in sorted(stopped, key=lambda x: (x not in self.ctl.isr, x)):
            self._start(b)
            self.settle()
        longest = max(self.cluster.lag_time_ms(b) for b in self.cluster.broker_ids) / 1000
        self.advance(longest + 1)
        if self.txn is not None:
            # Left open: the coordinator aborts it once its timeout has passed (a run waits
            # for that before it judges), unless the steps' clock placed it inside one.
            self.abort_unplaced()
            self.end_txn(ABORT, "left open: the coordinator aborts it at its timeout")
            self.settle()
        return predict(self)

    def copy(self) -> Simulator:
        return copy.deepcopy(self)
