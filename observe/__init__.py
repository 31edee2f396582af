"""Observation below the faults: what a cluster's state is, read from its source of truth.

Partition states (ZooKeeper's state znodes, the KRaft metadata log), the KRaft quorum, the
active controller, a raw wire-protocol client, and the run timeline every fault and step
writes to. Faults and suites observe through here; nothing here changes a cluster.
"""
