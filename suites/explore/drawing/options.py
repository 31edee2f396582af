"""What a drawing is asked for (`DrawOptions`), and the one table of how often each step
kind and each move is drawn.

STEP_WEIGHTS and MOVE_WEIGHTS name every kind and move by the name its family registers
(suites.explore.drawing.registry); their order is the order a seed's random stream meets
them in, so a new kind is added at the end (a seed then gives the schedules it always did
wherever the new kind is not drawn).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from basics.protocol import Protocol
from runrecord.power import CUT

# How often each step kind is drawn, relative to the others. Produce dominates: a
# divergence needs data written in the right epochs. Elections, kills and restarts come
# next, as they move leadership; hold-back and expire-session are the KAFKA-6361 moves.
STEP_WEIGHTS: dict[str, float] = {
    "produce": 30,
    "hold-back": 8,
    "hold-alter-partition": 3,  # KRaft only
    "cut": 3,
    "slow": 3,  # only with slow_links: a leader's responses to a follower come late
    "heal": 6,
    "expire-session": 6,
    "elect-preferred": 8,
    "elect-unclean": 4,  # only with unclean
    "kill": 9,
    "restart": 10,
    "pause": 2,
    "resume": 3,
    "power-loss": 1,
    "quorum": 4,  # KRaft with three voters only
    "wait": 4,
    # The transactional producer's (KRaft only): a transaction that a fault leaves with its
    # data on one replica and its marker on another (KAFKA-20716).
    "txn-write": 10,
    "txn-commit": 6,
    "txn-abort": 2,
    "move-dir": 4,  # only with jbod: a replica moved between its broker's log dirs
    "fail-dir": 3,  # only with jbod: the log dir holding a replica fails
    "reassign": 5,  # only with reassign (KRaft): replicas added, removed or reordered
    "outage": 1,  # only with a filesystem power model: every broker's power cut at once
    # Only with voters (a dynamic KRaft quorum with a spare controller, KIP-853).
    "add-voter": 3,
    "remove-voter": 3,
    "wipe-voter": 2,
}

# Moves of two steps that operators and failures produce together, drawn as one with these
# weights beside STEP_WEIGHTS. Each makes a multi-step precondition of the scenarios
# likely: a preferred replica that lost leadership and came back (bounce, session-flap),
# a write that one follower in the ISR does not get (held-write), and a follower catching up
# through a slow link in one response, held back behind a filler (slow-catch-up: with slow
# links only; what happens while it is in flight is drawn as any other step).
MOVE_WEIGHTS: dict[str, float] = {
    "bounce": 8,  # kill a broker (SIGKILL or SIGTERM), then restart that same broker
    "session-flap": 5,  # expire a broker's session, then heal its cut from the quorum
    "held-write": 8,  # hold a follower back, then produce
    "slow-catch-up": 4,  # slow a follower's link, pause it, produce after a filler, resume it
}


@dataclass(frozen=True)
class DrawOptions:
    unclean: bool = False  # enable unclean elections (config and elect-unclean steps)
    mode: str = "zk"
    brokers: int = 3
    min_steps: int = 4
    max_steps: int = 12
    aware: bool = True  # keep only steps the model says can run when their turn comes
    # Rules the model follows while drawing: a protocol's, or a release's (its version).
    protocol: Protocol | str = Protocol.KIP_279
    weights: Mapping[str, float] = field(default_factory=lambda: dict(STEP_WEIGHTS))
    moves: Mapping[str, float] = field(default_factory=lambda: dict(MOVE_WEIGHTS))
    # A fixed cluster shape, so that one running cluster serves every candidate (broker
    # configs are the cluster's; replicas and topic configs are per topic). None: drawn.
    controller: int | None = None  # ZooKeeper mode: this broker is the controller
    lag_ms: int | None = None  # replica.lag.time.max.ms
    # How a power-loss step loses data, drawn per step (runrecord.power). With the cut
    # model alone nothing is drawn for it, so that a seed gives the schedules it always did.
    power_models: tuple[str, ...] = (CUT,)
    features: Mapping[str, int] = field(default_factory=dict)  # KRaft: formatted with these
    controllers: int = 1  # KRaft: voters of the quorum (quorum steps are drawn with 3)
    jbod: bool = False  # two log dirs per broker, and move-dir steps
    reassign: bool = False  # reassign steps (KRaft), on a broker more than the replicas
    # KRaft: kill, pause and cut steps may name the transaction coordinator. Off, nothing is
    # drawn for it, so that a seed gives the schedules it always did.
    coordinator: bool = False
    # KRaft: commits and aborts may have their first EndTxn held on the wire until a heal
    # (KAFKA-17754). Off, nothing is drawn for it, as for `coordinator`.
    late_ends: bool = False
    # Slow links, and produce steps that write a filler first (KAFKA-18723's window). Off,
    # nothing is drawn for them, as for `coordinator`.
    slow_links: bool = False
    # KRaft: transactional writes may span background partitions (`TxnWrite.partitions`).
    # Off, nothing is drawn for it, as for `coordinator`.
    spanning: bool = False
    # KRaft: a dynamic quorum with a spare controller, and its membership steps (KIP-853).
    # Off, nothing is drawn for them, as for `coordinator`.
    voters: bool = False

    @property
    def kraft(self) -> bool:
        return self.mode == "kraft"

    @property
    def at_coordinator(self) -> bool:
        """Steps may name the transaction coordinator: transactions are drawn in KRaft."""
        return self.coordinator and self.kraft

    @property
    def held_ends(self) -> bool:
        """Commits and aborts may have their EndTxn held: transactions are drawn in KRaft."""
        return self.late_ends and self.kraft

    @property
    def spanning_txns(self) -> bool:
        return self.spanning and self.kraft
