"""Simulate a fault schedule on abstract replicas of one partition, under a release's rules.

The simulator predicts what a schedule (runrecord/schedule.py) does to a partition
with two or three replicas, without a cluster: where every replica's log ends up once
everything is healed and has converged (consistent, diverged at an offset, or a follower
stuck) and which acknowledged writes are gone. It is deterministic: the same schedule and
protocol always give the same prediction, step by step.

What it models, per replica: its log (batches tagged with the write they came from and the
leader epoch that wrote them), log end offset, high watermark and the high watermark's
checkpoint, leader epoch cache, flush point; per broker: running, stopped or paused, its
ZooKeeper session (KRaft: not fenced), its links to the other brokers and to the quorum;
and the controller's view of the partition: leader, leader epoch, ISR. Truncation is
`checkers.model.truncate_follower` on lineages built from the abstract logs, so the four
protocol generations are the model's; fetching, the high watermark, the ISR, elections and
power loss are modelled here.

Time: a step takes no time, except `wait` (its seconds), the steps that wait for a
session to end (`expire-session`, SIGKILL `kill`, `power-loss`: the broker's session
timeout), and an acks=all write the ISR does not complete (`Produce.REQUEST_TIMEOUT`).
Followers that stop catching up leave the ISR after replica.lag.time.max.ms of that time; a
paused broker, or one cut off from the quorum, loses its session after its session timeout.
High watermark checkpoints are written when that much time passes at once (`wait`, a write
timing out) and by clean shutdowns only: steps are assumed to follow each other faster than
the checkpoint interval (the scripted scenarios wait explicitly wherever they need a
checkpoint, e.g. KIP-101 scenario 1). Real steps can be slower: a run on real brokers reads
the checkpoint each crash left on disk and tells it (`SimOptions.hw_checkpoint_at`);
`checkpoint_variants` gives the outcomes where an untold crash came after a checkpoint.

The package, by composition: `state` (the replicas, brokers and controller view; topology;
appending and truncating logs) and `simulator` (`Simulator`: that state, `apply` and
`finish`, and the parts it is made of, each holding the simulator and reaching the others
through it): `replication` (truncation by the protocol's rules, fetching, high
watermarks), `transactions` (the schedule's transactional producer and its coordinator's
markers), `controller` (sessions, the controller's elections and ISR changes,
LeaderAndIsr, `settle`, and time), `reassignment`, `slow_links`. Each step kind's effect is
its family's rule (`rules/`: writes, links, elections, processes, disks, reassign, quorum,
waits, txn), as the schedule language, the live actions and the drawing have theirs.
`runs` (`simulate`, `checkpoint_variants`), `prediction` (the judgement: `Prediction`).
"""

from checkers.simulate import rules  # noqa: F401 - every kind's rule registered
from checkers.simulate.prediction import Prediction
from checkers.simulate.runs import checkpoint_variants, simulate
from checkers.simulate.simulator import Simulator
from checkers.simulate.state import SimBatch, SimOptions, SimulationError, StepRecord, Write

__all__ = [
    "Prediction",
    "SimBatch",
    "SimOptions",
    "SimulationError",
    "Simulator",
    "StepRecord",
    "Write",
    "checkpoint_variants",
    "simulate",
]
