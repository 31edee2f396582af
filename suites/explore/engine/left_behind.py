"""After the heal: a broker a reassignment took off the schedule's partition must hold no
copy of it under the partition's own name. The controller's change stops the replica and
deletes it (its dir renamed `-delete` at once, removed later); a broker that was down then
finds it a stray when it starts and deletes it (KRaft: KAFKA-13127; from 3.7 renamed
`-stray` as its logs load). A copy left current is one that a later reassignment back to
that broker, or the broker's own restart, could read back as the replica's log."""

from __future__ import annotations

from collections.abc import Iterable

from basics.errors import NotReached
from fixtures.cluster import Cluster
from fixtures.waiting import WaitTimeout, wait_until

# The broker renames a removed replica when it applies the change; one that was down does
# so when it loads its logs at start. The heal started every broker before this is asked.
RENAME_WAIT = 10.0


def left_behind(
    cluster: Cluster, topic: str, partition: int, brokers: Iterable[int]
) -> dict[int, str]:
    """Broker -> the path of its current copy of the partition, for each of `brokers` (none
    of them a replica now) that still holds one after RENAME_WAIT."""
    brokers = list(brokers)

    def found() -> dict[int, str]:
        return {
            b: str(d / f"{topic}-{partition}")
            for b in brokers
            for d in cluster.broker(b).log_dirs
            if (d / f"{topic}-{partition}").is_dir()
        }

    if not brokers:
        return {}
    try:
        wait_until(found, lambda f: not f, what="removed replicas renamed", timeout=RENAME_WAIT)
    except WaitTimeout as exc:
        if isinstance(exc.last, dict):
            return exc.last
        # The host could not list the dirs: nothing was seen, which is no verdict.
        raise NotReached(f"the log dirs of brokers {brokers} listed", str(exc.last)) from None
    return {}
