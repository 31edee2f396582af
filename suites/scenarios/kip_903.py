"""kip-903-empty-disk-rejoin (KAFKA-14139): a delayed AlterPartition adds a broker to the ISR
after it came back on an empty disk.

Leader A (b1) and follower B (b2) hold the partition (min.insync.replicas=1, unclean
leader election off); the controller holds nothing (c1 in KRaft, b3 in ZooKeeper mode).
Following KIP-903:

  1. B is cut off and leaves the ISR; S1 is acknowledged by A alone.
  2. A's AlterPartition requests to the controller are held (faults.filters: its other
     traffic, heartbeats included, flows). The cut heals, B catches up, and A asks to add B
     to the ISR: the request is sent and held.
  3. B fails hard; the controller notices (fenced, or its session expired) and leaves the
     partition alone, B not being in the ISR. B comes back on empty disks, cut off from A
     so that it stays empty, and registers: a new broker epoch.
  4. The held request is released: the controller has seen B's new registration first.

From 3.7 (KIP-858) B also reports its new replica's log dir (AssignReplicasToDirs), which
the controller records as a partition change: the partition epoch moves on, and that alone
would make the delayed request fail (INVALID_UPDATE_VERSION). That report is held at the
controller until the delayed request is answered, so that the request meets the check
KIP-903 added.

Before KIP-903 the controller accepts it: B, empty, joins the ISR. A then fails, B is
elected (cleanly, from the ISR) with an empty log, and A, back, truncates to it: every
acknowledged record is gone. From 3.5 (KRaft, metadata.version 3.5-IV1+) the request
carries the broker epoch B had when it caught up (AlterPartition v3, from Fetch v15's
ReplicaState; KAFKA-14617), the controller rejects it (INELIGIBLE_REPLICA), and A, failing,
is elected again once back.
The ZooKeeper controller ignores those epochs (KafkaController.processAlterPartition) and
ZooKeeper mode was removed in 4.0 unfixed: there the loss is expected on every release.
"""

from __future__ import annotations

from basics.errors import NotReached
from faults import disk, filters, network, process
from fixtures.cluster import ClusterSpec
from fixtures.nodes import Node
from fixtures.waiting import WaitTimeout, wait_until
from observe import kraft
from observe.controller import active_controller
from observe.replicas import replica
from observe.state import PartitionState, partition_state, state_path
from observe.state import history as metadata_history
from runrecord.outcome import LOST, Symptom
from suites import broker_logs, steps
from suites.scenario import Finding, RunContext, Scenario, Topic

TOPIC = "kip903"
A, B = 1, 2
BATCH = 5
S0, S1 = (0, BATCH - 1), (BATCH, 2 * BATCH - 1)
# What the leader logs when the controller refuses the new ISR (Partition, 3.5+)
REJECTED = "since the controller rejected the request with INELIGIBLE_REPLICA"


def spec(kafka: str, mode: str) -> ClusterSpec:
    lag = {"replica.lag.time.max.ms": 10000}  # how long the cut-off B stays in the ISR
    if mode == "zk":
        return steps.controller_apart(kafka, mode, broker_config=lag)
    return ClusterSpec(kafka, mode, brokers=2, broker_config=lag)


def _registration(ctx: RunContext) -> int:
    """Where B's current registration stands in the controller's record: the zxid that
    created /brokers/ids/2, or the offset of B's last RegisterBrokerRecord."""
    if ctx.mode == "zk":
        return ctx.cluster.zk_client().get(f"/brokers/ids/{B}")[1].czxid
    log = kraft.metadata_log(ctx.cluster.controllers)
    return max((r.offset for r in log.registrations if r.broker_id == B), default=-1)


def _isr_written_at(ctx: RunContext) -> int:
    """Where the controller last wrote B into the ISR: the state znode's last zxid, or the
    offset of the first record of the latest run of states with B in the ISR."""
    if ctx.mode == "zk":
        return ctx.cluster.zk_client().get(state_path(TOPIC, 0))[1].mzxid
    written = -1
    for state in metadata_history(ctx.cluster, TOPIC, 0):
        if B not in state.isr:
            written = -1
        elif written < 0:
            written = state.version or 0
    return written


def _hold_directory_report(ctx: RunContext, controller: Node) -> filters.Filter | None:
    """From 3.7 (KIP-858, metadata.version 3.7-IV2) a broker reports the log dir of each
    replica it creates (AssignReplicasToDirs) and the controller bumps the partition epoch
    for it; the delayed AlterPartition would then fail on that epoch, before the broker
    epoch check KIP-903 added. The report is held at the controller, so the delayed request
    meets that check."""
    if ctx.mode != "kraft" or not ctx.release.at_least(3, 7):
        return None
    return filters.hold_requests(
        ctx.cluster,
        ctx.broker(B),
        controller,
        filters.ASSIGN_REPLICAS_TO_DIRS,
        "AssignReplicasToDirs",
        at_receiver=True,
    )


def _release(
    ctx: RunContext, held: filters.Filter, registered: int, controller: Node
) -> tuple[PartitionState, str]:
    """Release the held request and wait for the controller's answer: B in the ISR, or the
    leader logging the rejection."""
    cluster, a = ctx.cluster, ctx.broker(A)
    mark = broker_logs.log_mark(a)
    held.heal()

    def answer() -> str | None:
        if B in partition_state(cluster, TOPIC).isr:
            return "accepted"
        with a.log_file.open("rb") as f:
            f.seek(mark)
            if REJECTED in f.read().decode(errors="replace"):
                return "rejected"
        return None

    try:
        said = wait_until(answer, bool, what="the controller's answer", timeout=120)
    except WaitTimeout as exc:
        raise NotReached("the delayed AlterPartition answered", str(exc.last)) from None
    state = partition_state(cluster, TOPIC)
    if said == "rejected":
        # The controller says why: KIP-903's check names B's stale broker epoch.
        why = next(
            (
                ln.split("because ", 1)[-1].split(" in the new ISR", 1)[0]
                for ln in broker_logs.log_lines(controller, "Rejecting AlterPartition")
                if f"from node {A}" in ln
            ),
            "(the controller logged no reason)",
        )
        said = f"rejected: {why}"
    if said == "accepted":
        written = _isr_written_at(ctx)
        ctx.expect(
            written > registered,
            f"B written into the ISR after its new registration (at {registered})",
            f"written at {written}",
        )
    return state, str(said)


def body(ctx: RunContext) -> Finding:
    cluster = ctx.cluster
    a, b = ctx.broker(A), ctx.broker(B)
    controller = active_controller(cluster)
    sends = steps.produce_batch(ctx, TOPIC, BATCH, to=A, acks="all")
    ctx.expect_log(B, [S0], "S0 on B")

    # 1. B leaves the ISR; S1 is acknowledged by A alone (min.insync.replicas=1).
    cut = network.partition(cluster, b, a)
    sends += steps.produce_batch(ctx, TOPIC, BATCH, to=A, acks="all")
    steps.await_isr(cluster, TOPIC, (A,), what="1: B out of the ISR")

    # 2. A's AlterPartition held; B catches up; A asks to add it.
    held = filters.hold_requests(cluster, a, controller, filters.ALTER_PARTITION, "AlterPartition")
    cut.heal()
    wait_until(
        lambda: replica(cluster, B, TOPIC).leo,
        lambda leo: leo == 2 * BATCH,
        what="2: B caught up",
        timeout=60,
    )
    held.await_dropped("2: A's AlterPartition adding B sent")
    pending = partition_state(cluster, TOPIC)
    ctx.expect(pending.isr == (A,), "2: the controller has not seen the request", pending)

    # 3. B fails hard and comes back on empty disks, cut off from A.
    before = _registration(ctx)
    process.crash(cluster, b)
    after = partition_state(cluster, TOPIC)
    ctx.expect(after == pending, "3: the partition untouched by B's failure", after)
    disk.replace_disks(cluster, b)
    keep_empty = network.partition(cluster, a, b)
    directory_report = _hold_directory_report(ctx, controller)
    process.restart(cluster, b)
    registered = _registration(ctx)
    ctx.expect(registered > before, f"3: B registered anew (after {before})", registered)
    ctx.expect_log(B, [], "3: B back with an empty log")
    if directory_report is not None:
        directory_report.await_dropped("3: B reported its new replica's log dir")
    now = partition_state(cluster, TOPIC)
    ctx.expect(now == pending, "3: the partition unchanged since A's request", now)

    # 4. The delayed request reaches the controller, after B's registration.
    state, said = _release(ctx, held, registered, controller)
    if directory_report is not None:
        directory_report.heal()
    ctx.timeline.record("note", "alter-partition", answer=said, state=str(state))
    accepted = said == "accepted"
    if accepted:
        ctx.expect_log(B, [], "4: B in the ISR with an empty log")

    # What follows: A fails. B, in the ISR, is elected with its empty log; else no one is.
    process.crash(cluster, a)
    keep_empty.heal()  # A's namespace went with it
    elected = steps.await_election(
        cluster, TOPIC, B if accepted else None, what="5: B, in the ISR, elected; else no one"
    )
    process.restart(cluster, a)
    observed, verdicts, details = steps.judge_loss(ctx, TOPIC, sends, [A, B])
    details |= {"alter_partition": said, "registration": registered, "elected": str(elected)}
    how = (
        f"the delayed AlterPartition was {said} after B's new registration "
        f"({'zxid' if ctx.mode == 'zk' else 'metadata offset'} {registered}); "
        f"then {elected}"
    )
    return Finding(observed, f"{how}; {verdicts}", details)


SCENARIO = Scenario(
    id="kip-903-empty-disk-rejoin",
    title="KIP-903: a delayed AlterPartition adds a broker that came back on an empty disk",
    body=body,
    cluster=spec,
    topic=Topic.fixed(
        TOPIC, [A, B], **{"min.insync.replicas": 1, "unclean.leader.election.enable": False}
    ),
    kip="KIP-903",
    jira="KAFKA-14139",
    fixed_in="3.5.0",  # KRaft only: AlterPartition v3 broker epochs (KAFKA-14617)
    # Before 2.7 a ZooKeeper-mode leader wrote the ISR to ZooKeeper itself: no request to the
    # controller to delay (AlterIsr, KIP-497).
    min_release="2.7.0",
    min_release_reason="needs AlterIsr/AlterPartition (KIP-497, 2.7.0)",
    unfixed={
        "zk": "KIP-903 changed the KRaft controller only; the ZooKeeper controller ignores the "
        "broker epochs in AlterPartition (KafkaController.processAlterPartition), and "
        "ZooKeeper mode was removed in 4.0"
    },
    # B, empty, elected: every acknowledged record, from offset 0, is gone.
    symptom=Symptom(LOST, offset=S0[0]),
)
