"""Telling a stuck follower from one Kafka restarted, on lines of real brokers' logs."""

from __future__ import annotations

from suites.broker_logs import stuck_line

# Kafka 4.3.1 (KRaft): broker 1, a follower of epoch 0 fenced as the leader epoch moved to 1,
# marks the partition failed; it then leads it, follows again and gets a fetcher.
FENCED_THEN_RESTARTED = [
    "[2026-11-22 17:59:59,972] INFO [ReplicaFetcherManager on broker 1] Added fetcher to "
    "broker 2 for partitions HashMap(kip279-0 -> InitialFetchState(...,0,0))",
    "[2026-11-22 18:00:00,027] INFO [ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0] "
    "Partition kip279-0 has an older epoch (0) than the current leader. Will await the new "
    "LeaderAndIsr state before resuming fetching.",
    "[2026-11-22 18:00:00,027] WARN [ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0] "
    "Partition kip279-0 marked as failed (kafka.server.ReplicaFetcherThread)",
    "[2026-11-22 18:00:00,053] INFO [Broker id=1] Leader kip279-0 with topic id Some(X) "
    "starts at leader epoch 1 from offset 0 with partition epoch 1, high watermark 0",
    "[2026-11-22 18:00:15,407] INFO [Broker id=1] Follower kip279-0 starts at leader epoch 2 "
    "from offset 21 with partition epoch 3 and high watermark 11. Current leader is 2.",
    "[2026-11-22 18:00:15,410] INFO [ReplicaFetcherManager on broker 1] Added fetcher to "
    "broker 2 for partitions HashMap(kip279-0 -> InitialFetchState(...,2,21))",
]
MARKED = (0, FENCED_THEN_RESTARTED[2].strip())

# Kafka 1.1.1: the fetcher thread dies on KAFKA-6361's out-of-order offsets (n < 20).
THREAD_DIED = [
    "[2026-11-22 16:56:19,596] INFO [ReplicaFetcherManager on broker 2] Added fetcher for "
    "partitions List([kip279-0, initOffset 11 to broker BrokerEndPoint(1,b1,9092)] )",
    "[2026-11-22 16:56:19,700] ERROR [ReplicaFetcher replicaId=2, leaderId=1, fetcherId=0] "
    "Error processing data for partition kip279-0 offset 11",
]


def test_a_partition_marked_failed_then_restarted_is_not_stuck():
    assert stuck_line(FENCED_THEN_RESTARTED, "kip279") is None
    assert stuck_line(FENCED_THEN_RESTARTED[:4], "kip279") is None  # it leads it now
    assert stuck_line(FENCED_THEN_RESTARTED[:3], "kip279") == MARKED
    # A follower line alone does not restart fetching; the fetcher that follows it does.
    assert stuck_line([*FENCED_THEN_RESTARTED[:3], FENCED_THEN_RESTARTED[4]], "kip279") == MARKED
    assert stuck_line([*FENCED_THEN_RESTARTED, MARKED[1]], "kip279") == MARKED


def test_a_dead_fetcher_thread_is_stuck_whatever_follows():
    assert stuck_line(THREAD_DIED, "kip279") == (0, THREAD_DIED[1].strip())
    assert stuck_line([*THREAD_DIED, THREAD_DIED[0]], "kip279") == (0, THREAD_DIED[1].strip())
    assert stuck_line(THREAD_DIED, "other-topic") is None
