"""A schedule's steps on real brokers: `Live` (context) is the cluster as the steps see it,
and each family of step kinds has its live actions in a module of its own (writes, links,
elections, processes, disks, reassign, quorum, waits, txn), registered by kind (registry;
`families` imports every one). The heal that ends a schedule (heal) and the settling after
each step (settle) are the counterparts of the simulator's `finish` and `settle`.
"""
