"""The KRaft quorum's membership (KIP-853): voters added, removed, and a voter's disk lost.

A voter is known by its node id and the directory id of its metadata log dir. In a dynamic
quorum (3.9+) the voter set lives in the metadata log (VotersRecord) and changes one voter
at a time; a voter whose disk is lost comes back with a new directory id, as an observer,
and its old incarnation stays in the set until it is removed. In a static quorum
(controller.quorum.voters) the set never changes, and a wiped voter comes back as the same
voter with an empty log (KAFKA-14077).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar

from runrecord.schedule_cluster import Cluster
from runrecord.steps.base import StepKind, checked
from runrecord.steps.quorum import ACTIVE, check_voter, controller_problems

# A step that changed the voters leaves a quorum the next schedule's shape does not describe.
CHANGED_VOTERS = "the quorum's voters were changed"


def _dynamic(cluster: Cluster | None, what: str) -> Iterator[tuple[str, str]]:
    if cluster is not None and cluster.mode == "kraft" and not cluster.dynamic:
        yield "kind", f'{what} needs a dynamic quorum (cluster.quorum "dynamic", KIP-853)'


@dataclass(frozen=True)
class AddVoter(StepKind):
    """Add a controller that is not a voter (a spare, or a wiped voter formatted again) to a
    dynamic quorum, through `kafka-metadata-quorum add-controller` run on it. `controller`:
    its number (1 is c1); left out, the lowest-numbered one running that does not vote."""

    KIND: ClassVar[str] = "add-voter"
    controller: int | None = field(default=None, metadata=checked(check_voter))

    @property
    def leaves_behind(self) -> str | None:
        return CHANGED_VOTERS

    def problems(self, cluster: Cluster | None) -> Iterator[tuple[str, str]]:
        if self.controller == ACTIVE:
            yield "controller", "must be a controller number: the active one votes already"
        yield from controller_problems(cluster, self.controller, "an added voter")
        yield from _dynamic(cluster, "an added voter")

    def describe(self) -> str:
        who = (
            f"controller {self.controller}"
            if self.controller
            else "a controller that does not vote"
        )
        return f"add {who} to the quorum's voters"


@dataclass(frozen=True)
class RemoveVoter(StepKind):
    """Remove a voter from a dynamic quorum (`kafka-metadata-quorum remove-controller`, by
    its id and the directory id the voter set holds for it). `voter`: "active" (the quorum
    leader, which resigns once the change commits) or a controller number."""

    KIND: ClassVar[str] = "remove-voter"
    voter: str | int = field(default=ACTIVE, metadata=checked(check_voter))

    @property
    def leaves_behind(self) -> str | None:
        return CHANGED_VOTERS

    def problems(self, cluster: Cluster | None) -> Iterator[tuple[str, str]]:
        yield from controller_problems(cluster, self.voter, "a removed voter")
        yield from _dynamic(cluster, "a removed voter")

    def describe(self) -> str:
        who = "the active controller" if self.voter == ACTIVE else f"voter {self.voter}"
        return f"remove {who} from the quorum's voters"


@dataclass(frozen=True)
class WipeVoter(StepKind):
    """A voter loses its metadata disk: it is stopped, its storage emptied and formatted
    again, and started. Static quorum: it comes back as the same voter with an empty log
    (KAFKA-14077). Dynamic: formatted with --no-initial-controllers, it gets a new directory
    id and comes back as an observer; its old incarnation still counts as a voter, down,
    until a `remove-voter`. `voter`: "active" or a controller number."""

    KIND: ClassVar[str] = "wipe-voter"
    voter: str | int = field(default=ACTIVE, metadata=checked(check_voter))

    @property
    def leaves_behind(self) -> str | None:
        return CHANGED_VOTERS

    def problems(self, cluster: Cluster | None) -> Iterator[tuple[str, str]]:
        yield from controller_problems(cluster, self.voter, "a wiped voter")

    def describe(self) -> str:
        who = "the active controller" if self.voter == ACTIVE else f"voter {self.voter}"
        return f"wipe {who}'s metadata disk and format it again"
