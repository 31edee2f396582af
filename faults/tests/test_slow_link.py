"""What a slow link's heal waits for: the bytes still queued between its two ends, as `ss`
prints them (state, Recv-Q, Send-Q, local address, peer address)."""

from __future__ import annotations

from faults.slow_link import queued

# The leader's side of a follower's fetch connection, a response still going out, and an
# idle client connection to the same peer.
SENDER = """\
ESTAB 0      412160 172.30.0.11:9092   172.30.0.13:51234
ESTAB 0      0      172.30.0.11:40112  172.30.0.13:9092
"""
# The follower's side: what arrived that its broker has not read yet.
RECEIVER = "ESTAB 23210  0      172.30.0.13:51234  172.30.0.11:9092\n"


def test_queued_bytes_are_summed_per_column() -> None:
    assert queued(SENDER, 2) == 412160 and queued(SENDER, 1) == 0
    assert queued(RECEIVER, 1) == 23210
    assert queued("", 2) == 0  # no connection between them: nothing in flight
    assert queued("ESTAB\n", 2) == 0  # a line cut short counts nothing
