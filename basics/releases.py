"""What each Kafka release does that logfork depends on: its modes, its Java and Scala, the
protocol its followers truncate by, the KIPs it carries. Fetching a release's jars is
fixtures.releases'."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from basics.errors import SetupError
from basics.protocol import Protocol

# Releases the suites are written against; the newest of each line as of this writing.
NEWEST_3_9 = "3.9.2"
# fixtures.catalog checks that this is the newest 4.x listed.
NEWEST_4 = "4.4.0"


def parse_version(text: str) -> tuple[int, ...]:
    if not re.fullmatch(r"\d+(\.\d+){1,3}", text):
        raise SetupError(
            f"'{text}' is not a Kafka version. Give a release number such as 1.1.1, 2.8.2 or "
            f"{NEWEST_3_9}, or the path of a Kafka distribution (a directory with libs/, or a "
            ".tgz)."
        )
    return tuple(int(p) for p in text.split("."))


@dataclass(frozen=True)
class Release:
    """A Kafka release number and the behaviour the suites depend on."""

    version: str

    @cached_property
    def parts(self) -> tuple[int, ...]:
        return parse_version(self.version)

    def at_least(self, *parts: int) -> bool:
        return self.parts >= parts

    @property
    def java(self) -> int:
        # Java 17 is supported from 3.1 (KAFKA-13011); older brokers bundle a ZooKeeper client
        # that breaks on Java 14+, so they get Java 11. 4.x brokers require 17.
        return 17 if self.at_least(3, 1) else 11

    @property
    def scala(self) -> str:
        return "2.13" if self.at_least(2, 4) else "2.12"

    @property
    def modes(self) -> tuple[str, ...]:
        modes = []
        if not self.at_least(4, 0):  # ZooKeeper mode was removed in 4.0 (KIP-833)
            modes.append("zk")
        if self.at_least(3, 3):  # KRaft production-ready from 3.3 (KIP-833)
            modes.append("kraft")
        return tuple(modes)

    @property
    def has_leader_epochs(self) -> bool:  # KIP-101
        return self.at_least(0, 11)

    @property
    def has_kip279(self) -> bool:  # OffsetsForLeaderEpoch v1 returns the epoch (KAFKA-6361)
        return self.at_least(2, 0)

    @property
    def has_kip704(self) -> bool:  # LeaderRecoveryState after unclean elections
        return self.at_least(3, 2)

    @property
    def has_alter_partition(self) -> bool:  # KIP-497: the leader asks the controller
        return self.at_least(2, 7)

    @property
    def has_admin_elections(self) -> bool:  # KIP-460 electLeaders(PREFERRED|UNCLEAN)
        return self.at_least(2, 4)

    @property
    def protocol(self) -> Protocol:
        """How a follower of this release finds where to truncate, with the inter-broker
        protocol at the release's own."""
        if not self.has_leader_epochs:
            return Protocol.HIGH_WATERMARK  # truncate to the high watermark (KIP-101)
        if not self.has_kip279:
            return Protocol.KIP_101  # OffsetsForLeaderEpoch v0
        if not self.at_least(2, 7):
            return Protocol.KIP_279  # v1+: the answer names its epoch
        return Protocol.DIVERGING_EPOCH  # truncation from the Fetch response (KAFKA-10554)

    @property
    def log4j2(self) -> bool:
        return self.at_least(4, 0)

    def __str__(self) -> str:
        return self.version
