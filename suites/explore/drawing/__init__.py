"""How explore comes by its schedules, on the model alone: drawing candidates from a seed
(generate), ranking and breeding them (guide), and shrinking a finding (shrink). Nothing
here touches a cluster.

Each family of step kinds says how its kinds are drawn, mutated and shrunk in a module of
its own (writes, links, elections, processes, quorum, waits, txn, disks, reassign), which
registers them (registry); `families` imports every one, in the order they are drawn.
"""
