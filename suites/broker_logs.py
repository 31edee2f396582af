"""What a broker's own log says: where it ends now, lines awaited after that, and the
signs that a follower's replication of a partition stopped for good."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime

from basics.errors import NotReached
from fixtures.cluster import Cluster
from fixtures.waiting import WaitTimeout, wait_until


def _lines_from(node, since: int) -> list[str]:
    """The node's log lines from byte `since` on."""
    with node.log_file.open("rb") as f:
        f.seek(since)
        return f.read().decode(errors="replace").splitlines()


def log_mark(node) -> int:
    """Where the node's log ends now; lines after it are what happens next."""
    return node.log_file.stat().st_size if node.log_file.is_file() else 0


def await_log_line(node, match, *, since: int, what: str, timeout: float = 60.0) -> str:
    """The first line the node logs after `since` that `match` accepts."""

    try:
        found = wait_until(
            lambda: [ln for ln in _lines_from(node, since) if match(ln)],
            bool,
            what=what,
            timeout=timeout,
            describe=lambda ls: ls[-1:] if ls else "no line",
        )
    except WaitTimeout as exc:
        raise NotReached(what, str(exc.last)) from None
    return found[0]


def log_lines(node, text: str, *, since: int = 0) -> list[str]:
    """The node's log lines that contain `text` (from byte `since` on)."""
    if not node.log_file.is_file():
        return []
    return [ln for ln in _lines_from(node, since) if text in ln]


SHUTDOWN_RETRY = "Retrying controlled shutdown"
DEFAULT_SHUTDOWN_BACKOFF_MS = 5000  # Kafka's default controlled.shutdown.retry.backoff.ms


def shutdown_backoffs(node, since: int, broker_config: dict) -> float:
    """What a SIGTERMed broker's controlled shutdown waited between attempts, from its log
    after byte `since`: a ZooKeeper-mode broker that still leads a partition with no other
    ISR member sleeps controlled.shutdown.retry.backoff.ms, then logs that it retries
    (KafkaServer.controlledShutdown, 0.10 to 3.x)."""
    retries = log_lines(node, SHUTDOWN_RETRY, since=since)
    backoff = broker_config.get("controlled.shutdown.retry.backoff.ms", DEFAULT_SHUTDOWN_BACKOFF_MS)
    return len(retries) * int(backoff) / 1000


# Log lines that mean a follower's replication of a partition stopped for good (until
# someone intervenes): the fetcher thread died (before 2.3). The first is KAFKA-6361's
# n < 20 case. The last: a follower whose log ends past its leader's, where the topic
# forbids unclean elections, halts the broker before 2.0 rather than truncate
# (ReplicaFetcherThread.handleOffsetOutOfRange).
STUCK_MARKS = (
    "UnexpectedAppendOffsetException",
    "Error processing data for partition",
    "Out of order offsets",
    "because log truncation is not allowed",
)


# Since KIP-461 a fetcher marks one partition failed instead of dying, and the partition's
# next leadership change starts it afresh: the broker leads it, or a fetcher is added for it.
# A follower fenced while the leader epoch moves on (FENCED_LEADER_EPOCH: "older epoch than
# the current leader") is marked failed that way until its next LeaderAndIsr state, so only
# a mark that nothing restarted since is a stuck follower. A dead fetcher thread (before
# 2.3) is stuck for good, whatever follows: partitions added to it are never fetched.
MARKED_FAILED = "marked as failed"
RESTARTED = re.compile(r"Added fetcher|^(?!.*Follower ).*starts at leader epoch", re.IGNORECASE)


def _names(topic: str) -> re.Pattern[str]:
    """A partition of `topic` named in a log line (`topic-3`; before 1.0 some lines name
    the topic alone: `for topic t,`), and not a topic whose name merely starts or ends the
    same way."""
    return re.compile(rf"(?<![\w.-]){re.escape(topic)}(?:-(\d+)\b|(?=[,\s]))")


def stuck_line(lines: Iterable[str], topic: str | None) -> tuple[int, str] | None:
    """(partition, line) of the first sign in `lines` that replication of a partition of
    `topic` (None: of any) stopped for good; partition -1: the line names no partition."""
    names = _names(topic) if topic is not None else None
    marked: dict[int, str] = {}
    for line in lines:
        found = list(names.finditer(line)) if names is not None else []
        if names is not None and not found:
            continue
        partitions = [int(m.group(1)) for m in found if m.group(1) is not None] or [-1]
        if any(mark in line for mark in STUCK_MARKS):
            return partitions[0], line.strip()[:400]
        if MARKED_FAILED in line:
            marked.setdefault(partitions[0], line.strip()[:400])
        elif RESTARTED.search(line):
            for p in partitions:  # with no topic, every mark and restart is under -1
                marked.pop(p, None)
    return next(iter(marked.items()), None)


def stuck_follower(
    cluster: Cluster, broker_id: int, topic: str | None, *, since: int = 0
) -> tuple[int, str] | None:
    """(partition, log line) of the first sign, in the broker's log from byte `since` on,
    that its replication of a partition of `topic` (None: of any) stopped for good."""
    node = cluster.broker(broker_id)
    if not node.log_file.is_file():
        return None
    return stuck_line(_lines_from(node, since), topic)


def fetcher_dies(cluster: Cluster) -> bool:
    """Whether a partition whose replication fails takes its follower's fetcher thread with
    it, so that every partition that thread fetched stays behind until the broker restarts
    (before 2.3, as KAFKA-6361's stuck follower shows); from 2.3 only that partition is
    marked failed, and it resumes with its next leader change (KIP-461)."""
    return not cluster.release.at_least(2, 3)


def dead_fetcher(
    cluster: Cluster, brokers: Iterable[int], topic: str | None, since: dict[int, int]
) -> tuple[int, str] | None:
    """(broker, log line) of the first of `brokers` whose fetcher thread died replicating a
    partition of `topic` (None: of any), reading each log from its mark in `since`; None
    where fetcher threads do not die (fetcher_dies)."""
    if not fetcher_dies(cluster):
        return None
    for b in brokers:
        found = stuck_follower(cluster, b, topic, since=since.get(b, 0))
        if found is not None:
            return b, found[1]
    return None


# A follower whose fetch offset its leader answers OFFSET_OUT_OF_RANGE logs this line each
# time (AbstractFetcherThread.handleOutOfRangeError). Once after a leader change is normal;
# reset to the very offset it fetched from, it asks again at the next round and loops:
# KAFKA-20961, a leader whose epoch cache lost its empty epochs to a log-dir swap answers so
# until new writes arrive (KAFKA-15608).
# A follower ahead of its leader's end resets to its own end instead, with the second line.
_OUT_OF_RANGE = (
    re.compile(
        r"Current offset (?P<at>\d+) for partition (?P<tp>\S+) is out of range"
        r".*Reset fetch offset to (?P<to>\d+)"
    ),
    re.compile(
        r"Reset fetch offset for partition (?P<tp>\S+) from (?P<at>\d+) to the current "
        r"local replica's end offset (?P<to>\d+)"
    ),
)


def same_offset_resets(lines: Iterable[str], topic: str) -> dict[int, tuple[int, str]]:
    """Per partition of `topic`: how many times `lines` reset a fetch to the offset it
    already stood at, and the last such line."""
    names = _names(topic)
    found: dict[int, tuple[int, str]] = {}
    for line in lines:
        m = next(filter(None, (r.search(line) for r in _OUT_OF_RANGE)), None)
        if m is None or m.group("at") != m.group("to"):
            continue
        named = names.fullmatch(m.group("tp"))
        if named is None or named.group(1) is None:
            continue
        p = int(named.group(1))
        found[p] = (found.get(p, (0, ""))[0] + 1, line.strip()[:400])
    return found


def fetch_resets(node, topic: str, *, since: int) -> dict[int, tuple[int, str]]:
    """same_offset_resets of the node's log from byte `since` on."""
    if not node.log_file.is_file():
        return {}
    return same_offset_resets(_lines_from(node, since), topic)


# A transaction coordinator that finds no leader for a partition takes it for deleted, drops
# the partition's marker and completes the transaction without it. KRaft from 4.3.0 gives a
# partition with leader -1 no leader at all, so an offline partition's marker is dropped
# (KAFKA-20734); TransactionMarkerChannelManager.addTxnMarkersToBrokerQueue logs this at INFO,
# naming the partitions.
MARKER_SKIPPED = "likely deleted already and hence can be skipped"


def skipped_markers(lines: Iterable[str], topic: str) -> dict[int, str]:
    """Partition of `topic` -> the first line in `lines` where a coordinator skipped its
    marker."""
    names = _names(topic)
    found: dict[int, str] = {}
    for line in lines:
        if MARKER_SKIPPED not in line:
            continue
        for m in names.finditer(line):
            if m.group(1) is not None:
                found.setdefault(int(m.group(1)), line.strip()[:400])
    return found


def broker_lines(cluster: Cluster, since: dict[int, int]) -> dict[int, list[str]]:
    """Every broker's log lines from its mark in `since`, by broker id: what the
    transaction coordinator logged, wherever it moved between brokers."""
    return {
        b: _lines_from(node, since.get(b, 0))
        for b, node in sorted(cluster.brokers.items())
        if node.log_file.is_file()
    }


def markers_skipped(logs: dict[int, list[str]], topic: str) -> dict[int, str]:
    """skipped_markers in every broker's lines (`broker_lines`), the first broker's first."""
    found: dict[int, str] = {}
    for b, lines in logs.items():
        for p, line in skipped_markers(lines, topic).items():
            found.setdefault(p, f"broker {b}'s log: {line}")
    return found


# The coordinator's line as it aborts a transaction open past transaction.timeout.ms
# (TransactionCoordinator.abortTimedOutTransactions; "of transactionalId: X" before 3.x's
# rewording, and at DEBUG only in the oldest releases, where nothing is told).
TIMEOUT_ROLLBACK = re.compile(
    r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\].*Completed rollback (?:of )?ongoing "
    r"transaction (?:for|of) transactionalId:? (\S+) due to timeout"
)


def timeout_rollbacks(lines: Iterable[str], transactional_id: str) -> list[float]:
    """When (epoch seconds; a node logs in UTC) a coordinator logged aborting the
    transactional id's transaction at its timeout."""
    found = []
    for line in lines:
        m = TIMEOUT_ROLLBACK.match(line)
        if m and m.group(3) == transactional_id:
            at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
            found.append(at.timestamp() + int(m.group(2)) / 1000)
    return found


def rolled_back_at_timeout(logs: dict[int, list[str]], transactional_id: str) -> list[float]:
    """timeout_rollbacks in every broker's lines (`broker_lines`), in time order."""
    return sorted(
        at for lines in logs.values() for at in timeout_rollbacks(lines, transactional_id)
    )
