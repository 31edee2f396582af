"""Names for the protocol generations and states the checker reasons about.

Standard library only: `fixtures.releases` maps a release to its `Protocol` and runs before
the virtualenv exists (`.ci/run` calls it with the system Python).
"""

from __future__ import annotations

from enum import Enum, IntEnum


class Protocol(Enum):
    """How a follower finds where to truncate its log (see `checkers.model`)."""

    HIGH_WATERMARK = "high-watermark"  # before 0.11
    KIP_101 = "kip-101"  # OffsetsForLeaderEpoch v0, 0.11 to 1.1
    KIP_279 = "kip-279"  # v1+: the answer names its epoch, 2.0 to 2.6
    DIVERGING_EPOCH = "diverging-epoch"  # the Fetch response's diverging epoch, 2.7+

    @property
    def rules(self) -> str:
        return {
            Protocol.HIGH_WATERMARK: "pre-KIP-101 rules",
            Protocol.KIP_101: "KIP-101 rules",
            Protocol.KIP_279: "KIP-279 rules",
            Protocol.DIVERGING_EPOCH: "KIP-320/KIP-595 rules",
        }[self]


class RecoveryState(IntEnum):
    """A partition's LeaderRecoveryState (KIP-704): the value KRaft's metadata records carry
    and the ZooKeeper state znode's "leader_recovery_state"; absent means RECOVERED."""

    RECOVERED = 0
    RECOVERING = 1

    def __str__(self) -> str:
        return self.name

    @classmethod
    def parse(cls, value: object) -> RecoveryState:
        """From a record's int or a run record's name."""
        if isinstance(value, str):
            return cls[value]
        return cls(int(value))  # type: ignore[call-overload]
