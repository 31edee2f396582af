"""KIP-966's conformance table: each statement of the KIP about ELR membership, election
order and unclean-shutdown handling, what the release did, conforms or departs.

The rows are built from what a run of `kip_966` observed (`Story`): the partition's states
as the controller recorded them (the KRaft metadata log's PartitionRecord and
PartitionChangeRecord, ELR and LastKnownElr included; the ZooKeeper state znode) and the
broker registrations. Statements that need ELR are "not in effect" where it is off
(ZooKeeper mode; KRaft before 4.1 unless switched on): departures that Kafka does not
implement there, not violations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from checkers.metadata_log import Registration
from observe.state import PartitionState
from runrecord.conformance import CONFORMS, DEPARTS, VIOLATED, Conformance
from runrecord.conformance import Statement as Row

A, B, C = 1, 2, 3


@dataclass
class Story:
    """What a run saw at each step, for its conformance table."""

    mode: str
    elr: bool  # the controller tracks ELR: eligible.leader.replicas.version >= 1
    feature_level: int | None  # None in ZooKeeper mode
    states: dict[str, PartitionState] = field(default_factory=dict)  # by step: t0, t1, ...
    registration: Registration | None = None  # C's registration after its unclean restart
    clean_marker: bool = False  # C's log dir held .kafka_cleanshutdown when it restarted
    history: list[PartitionState] = field(default_factory=list)  # every recorded state

    @property
    def why_off(self) -> str:
        if self.mode == "zk":
            return "ZooKeeper mode has no ELR (KIP-966 changes the KRaft controller only)"
        return f"eligible.leader.replicas.version={self.feature_level}: ELR is off"


def _row(story: Story, statement: str, seen: str, holds: bool, off: str) -> Row:
    if not story.elr:
        return Row(statement, f"not in effect ({story.why_off}); {off}", DEPARTS, False)
    return Row(statement, seen, CONFORMS if holds else VIOLATED)


def _lke_row(story: Story) -> Row:
    statement = "LastKnownELR keeps the last known ELR members, for unclean recovery"
    seen = sorted({s.last_known_elr for s in story.history if s.last_known_elr})
    observed = f"recorded: {[list(v) for v in seen]}" if seen else "empty throughout this run"
    if not story.elr:
        return Row(statement, f"not in effect ({story.why_off}); {observed}", DEPARTS, False)
    return Row(
        statement,
        f"{observed}; Kafka stores only the last leader there, when the partition first "
        "loses its leader (PartitionChangeBuilder.maybeUpdateLastKnownLeader with "
        "useLastKnownLeaderInBalancedRecovery, which no config turns off)",
        DEPARTS,
        False,
    )


def last_replica_rows(story: Story) -> list[Row]:
    """The main flow: A and B leave the ISR, C loses power and restarts."""
    t0, t1, t2, t3 = (story.states[k] for k in ("t0", "t1", "t2", "t3"))
    unclean = story.states.get("unclean")
    reg = story.registration
    rows = [
        _row(
            story,
            "A replica that leaves the ISR while it keeps min.insync.replicas members does "
            "not enter the ELR",
            f"A left: {t0}",
            not t0.elr,
            f"A left: {t0}",
        ),
        _row(
            story,
            "A replica that leaves the ISR when it falls below min.insync.replicas enters the ELR",
            f"B left: {t1}",
            t1.elr == (B,),
            f"B left: {t1}",
        ),
        _row(
            story,
            "The last ISR member, fenced, leaves the ISR for the ELR (the ISR may become empty)",
            f"C fenced: {t2}",
            C in t2.elr and C not in t2.isr,
            f"C gone: {t2}: C stays the last ISR member and the partition has no leader",
        ),
        _row(
            story,
            "With the ISR empty, an unfenced ELR member is elected leader",
            f"B elected from the ELR in the same record that fenced C: {t2}",
            t2.leader == B,
            "there is no ELR to elect from: the partition waits for C",
        ),
        _row(
            story,
            "The elected ELR member becomes the ISR and leaves the ELR",
            f"{t2}",
            t2.isr == (B,) and B not in t2.elr,
            f"{t2}",
        ),
        _row(
            story,
            "A broker restarting after an unclean shutdown (no clean-shutdown marker, so no "
            "matching PreviousBrokerEpoch) is removed from the ISR and the ELR",
            f"C had no .kafka_cleanshutdown; {unclean} written just before C's registration "
            f"at offset {reg.offset if reg else '?'} (broker epoch "
            f"{reg.broker_epoch if reg else '?'})",
            unclean is not None and not story.clean_marker and C not in unclean.elr,
            f"C had no .kafka_cleanshutdown, re-registered and was elected again: {t3}",
        ),
        _row(
            story,
            "A replica that lost data in an unclean shutdown is not elected leader",
            f"after C's restart: {t3}",
            t3.leader != C,
            f"after C's restart: {t3}: C, holding less than what was acknowledged, leads",
        ),
    ]
    return [*rows, _lke_row(story)]


def last_known_leader_rows(story: Story) -> list[Row]:
    """The fallback: both ELR members restart uncleanly; the last known leader is elected."""
    down, back, elected = (story.states[k] for k in ("both_down", "c_back", "elected"))
    rows = [
        _row(
            story,
            "With no unfenced ISR or ELR member, the partition has no leader; the ISR may be empty",
            f"B and C fenced: {down}",
            down.leader == -1 and not down.isr and set(down.elr) == {B, C},
            f"{down}",
        ),
        _row(
            story,
            "A broker restarting after an unclean shutdown is removed from the ELR",
            f"C re-registered (offset {story.registration.offset if story.registration else '?'}"
            f"): {back}",
            back.elr == (B,),
            f"{back}",
        ),
        Row(
            "With the ISR and the ELR empty and unclean leader election disabled, the leader "
            "is chosen by unclean recovery (KIP-966 part 2), which compares the candidates' "
            "logs",
            f"part 2 never shipped: once B's unclean restart emptied the ELR, the controller "
            f"elected C, the last known leader, at once, as an unclean election "
            f"({elected}), though unclean.leader.election.enable=false and B held the "
            "acknowledged records C had lost (PartitionChangeBuilder.canElectLastKnownLeader)",
            DEPARTS,
            False,
        ),
    ]
    return [*rows, _lke_row(story)]


def table(rows: list[Row]) -> Conformance:
    return Conformance("KIP-966", rows)
