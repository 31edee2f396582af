"""KRaft quorum scenarios (KIP-595).

kip-595-controller-failover: three controllers; the active quorum leader is killed, paused
and partitioned, round after round, while metadata changes keep coming. The controllers'
`__cluster_metadata` replicas must never diverge (judged by the same checker as any
partition), no epoch may have two leaders (LeaderChange records and `quorum-state`), and a
partitioned leader must give up leadership (KIP-595's check-quorum, in Kafka from 3.7,
KAFKA-15489).

kip-595-cluster-id-mismatch: a broker whose meta.properties names another cluster must
refuse to join and shut down, leaving the cluster's logs and its own untouched.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from pathlib import Path

from confluent_kafka.admin import NewTopic

from basics.errors import NotReached
from basics.protocol import Protocol
from checkers.audit import audit
from checkers.checkpoints import read_meta_properties
from checkers.metadata_log import METADATA_TOPICS, decode_metadata_log
from checkers.verdict import PartitionVerdict
from faults import controller, process
from fixtures.cluster import Cluster, ClusterSpec
from fixtures.config import new_uuid
from fixtures.nodes import Node
from fixtures.waiting import NOT_YET, WaitTimeout, wait_until
from observe import kraft
from runrecord.outcome import CONSISTENT, VIOLATED, Symptom
from suites import broker_logs, steps
from suites.scenario import Finding, RunContext, Scenario, Topic

METADATA = METADATA_TOPICS[0]


# -- controller failover ------------------------------------------------------------------
def failover_spec(kafka: str, mode: str) -> ClusterSpec:
    return ClusterSpec(kafka, mode, brokers=3, controllers=3)


class Churn(threading.Thread):
    """Metadata changes that keep coming: a topic created every half second."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(daemon=True, name="metadata-churn")
        self.cluster = cluster
        self.stop_event = threading.Event()
        self.created = 0
        self.failed = 0

    def run(self) -> None:
        admin = self.cluster.admin()
        i = 0
        while not self.stop_event.wait(0.5):
            name = f"churn-{i}"
            i += 1
            future = admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=3)])[
                name
            ]
            try:
                future.result(timeout=20)
                self.created += 1
            except NOT_YET:  # refused during a failover: the next one retries
                self.failed += 1

    def finish(self) -> None:
        self.stop_event.set()
        self.join(timeout=30)


def _leaders_by_epoch(nodes: list[Node]) -> dict[int, set[int]]:
    """Every (epoch -> leader ids) any controller recorded, from its metadata log's
    LeaderChange records and its quorum-state file."""
    seen: dict[int, set[int]] = {}
    for node in nodes:
        log = decode_metadata_log(kraft.metadata_dir(node))
        for change in log.leader_changes:
            seen.setdefault(change.raft_epoch, set()).add(change.leader_id)
        state = kraft.quorum_state(node)
        if state is not None and state.leader_id >= 0:
            seen.setdefault(state.leader_epoch, set()).add(state.leader_id)
    return seen


def _resigned(ctx: RunContext, node: Node, epoch: int, since: int) -> str:
    """Evidence that an isolated leader gave up: its own log says it resigned or stood for
    election again, or its quorum-state moved past the epoch it led."""

    def evidence() -> str | None:
        with node.log_file.open("rb") as f:
            f.seek(since)
            text = f.read().decode(errors="replace")
        for mark in (
            "Did not receive fetch request from the majority",
            "transition to ResignedState",
            "Completed transition to CandidateState",
            "Completed transition to ProspectiveState",
        ):
            if mark in text:
                return next(ln for ln in text.splitlines() if mark in ln)[:300]
        state = kraft.quorum_state(node)
        if state is not None and state.leader_epoch > epoch and state.leader_id != node.node_id:
            return f"quorum-state: {state.raw}"
        return None

    try:
        return wait_until(
            evidence, bool, timeout=60, what=f"isolated leader {node.name} to give up leadership"
        )
    except WaitTimeout as exc:
        raise NotReached(exc.what, str(exc.last)) from None


def failover_body(ctx: RunContext) -> Finding:
    cluster, timeline = ctx.cluster, ctx.timeline
    controllers = cluster.controllers
    churn = Churn(cluster)
    churn.start()
    rounds: list[dict] = []
    resignations: list[str] = []
    try:
        for round_no in range(2):
            for fault in ("kill", "pause", "partition"):
                old = kraft.quorum_leader_node(controllers)
                state = kraft.quorum_state(old)
                epoch = state.leader_epoch if state is not None else -1
                if fault == "kill":
                    old, new = controller.kill_controller(cluster, timeout=60)
                    process.restart(cluster, old)
                elif fault == "pause":
                    old, new = controller.pause_controller(cluster, timeout=60)
                else:
                    mark = broker_logs.log_mark(old)
                    others = [n for n in controllers if n is not old]
                    cut, old, new = controller.isolate_controller(cluster, others, timeout=60)
                    try:
                        resignations.append(_resigned(ctx, old, epoch, mark))
                    finally:
                        cut.heal()
                # Metadata changes flow again through the new leader before the next fault.
                done = churn.created
                try:
                    wait_until(
                        lambda: churn.created,
                        lambda n, d=done: n >= d + 2,
                        timeout=60,
                        what=f"topics created through the new quorum leader {new.name}",
                    )
                except WaitTimeout as exc:
                    raise NotReached(exc.what, f"{exc.last} created in all") from None
                rounds.append(
                    {
                        "round": round_no,
                        "fault": fault,
                        "old": old.name,
                        "new": new.name,
                        "epoch_before": epoch,
                    }
                )
    finally:
        churn.finish()

    # Deposed leaders may hold an uncommitted tail of their own epoch, which Raft has them
    # truncate once they follow the new leader (KIP-595): give them time to do so.
    timeline.phase("convergence")

    def judged() -> PartitionVerdict | None:
        result = audit([n.data_dir for n in controllers], topic=METADATA)
        return next((p for p in result.partitions if p.topic == METADATA), None)

    def shown(v: PartitionVerdict | None) -> str:
        if v is None:
            return "no metadata log read"
        return f"{v.status} at {v.diverged_at}, ends {v.log_end_offsets}"

    with contextlib.suppress(WaitTimeout):  # if they never agree, the check below says so
        wait_until(
            judged,
            lambda v: v is not None and v.status == "consistent" and len(v.replicas) == 3,
            timeout=90,
            what="the controllers' metadata logs to agree",
            describe=shown,
        )
    timeline.phase("check")
    # Raft's own log: judged by the default protocol, as the wait above judged it.
    result = steps.audit_dirs(
        ctx, [n.data_dir for n in controllers], topic=METADATA, protocol=Protocol.KIP_279
    )
    verdict = steps.judged(result, METADATA, [0])[0]
    # Judged on fewer than the three logs it waited for, agreement would be a prefix's.
    ctx.expect(len(verdict.replicas) == len(controllers), "every controller's metadata log read",
               f"the logs of {sorted(verdict.replicas)} only")  # fmt: skip
    by_epoch = _leaders_by_epoch(controllers)
    doubled = {e: sorted(ids) for e, ids in by_epoch.items() if len(ids) > 1}
    details = {
        "rounds": rounds,
        "topics_created": churn.created,
        "creations_refused": churn.failed,
        "resignations": resignations,
        "leaders_by_epoch": {e: sorted(ids) for e, ids in sorted(by_epoch.items())},
        "checker": verdict.to_dict(),
    }
    if verdict.status == "diverged":
        return Finding(
            steps.divergence(verdict),
            f"controllers' metadata logs diverged at offset {verdict.diverged_at}",
            details,
        )
    if doubled:
        return Finding(Symptom(VIOLATED), f"epochs with two leaders: {doubled}", details)
    if churn.created == 0:
        raise NotReached("metadata changes during the faults", "no topic was created")
    return Finding(
        Symptom(CONSISTENT),
        f"{len(rounds)} quorum-leader faults, {churn.created} topics created "
        f"meanwhile; metadata logs consistent, one leader per epoch over "
        f"{len(by_epoch)} epochs, every isolated leader gave up leadership",
        details,
    )


# -- cluster id mismatch ------------------------------------------------------------------
STRAY = 3  # the broker that comes back belonging to another cluster
TOPIC = "kip595id"


def mismatch_spec(kafka: str, mode: str) -> ClusterSpec:
    # The stray broker gives up on registering sooner than the default minute.
    return ClusterSpec(
        kafka,
        mode,
        brokers=3,
        node_config={f"b{STRAY}": {"initial.broker.registration.timeout.ms": 15000}},
    )


def _fingerprint(data_dir: Path) -> dict[str, str]:
    """What must not change: every segment and epoch checkpoint of every partition."""
    out = {}
    for path in sorted(data_dir.glob("*-*/*")):
        if path.parent.name.startswith("__cluster_metadata"):
            continue  # the metadata log grows all the time (KIP-595 no-op records)
        if path.suffix == ".log" or path.name == "leader-epoch-checkpoint":
            out[str(path.relative_to(data_dir))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def mismatch_body(ctx: RunContext) -> Finding:
    cluster, timeline = ctx.cluster, ctx.timeline
    steps.produce_batch(ctx, TOPIC, 50, to=1, acks="all")
    stray = cluster.broker(STRAY)
    process.kill(cluster, stray, signal="SIGTERM")
    meta_path = stray.data_dir / "meta.properties"
    original = read_meta_properties(meta_path)
    foreign = new_uuid()
    text = meta_path.read_text().replace(
        f"cluster.id={original.cluster_id}", f"cluster.id={foreign}"
    )
    meta_path.write_text(text)
    timeline.record("fault", "foreign-cluster-id", node=stray.name, cluster_id=foreign)
    stray_before = _fingerprint(stray.data_dir)
    others_before = {i: _fingerprint(cluster.broker(i).data_dir) for i in (1, 2)}

    mark = broker_logs.log_mark(stray)
    stray.start()
    try:
        wait_until(
            stray.status,
            lambda s: s == "exited",
            timeout=120,
            what=f"broker {STRAY} with a foreign cluster id to shut down",
        )
    except WaitTimeout as exc:
        raise NotReached(exc.what, f"status {exc.last}") from None
    timeline.phase("check")
    with stray.log_file.open("rb") as f:
        f.seek(mark)
        log = f.read().decode(errors="replace").splitlines()
    refusal = [
        ln
        for ln in log
        if "INCONSISTENT_CLUSTER_ID" in ln or "Invalid cluster.id" in ln or "cluster ID" in ln
    ]
    registered = STRAY in cluster.registered_brokers()
    stray_after = _fingerprint(stray.data_dir)
    others_after = {i: _fingerprint(cluster.broker(i).data_dir) for i in (1, 2)}
    meta_after = read_meta_properties(meta_path)
    checks = {
        "refused": bool(refusal),
        "exited": stray.exit_code(),
        "never_registered": not registered,
        "own_log_untouched": stray_after == stray_before,
        "cluster_logs_untouched": others_after == others_before,
        "meta_properties_untouched": meta_after.cluster_id == foreign,
    }
    details = {
        "checks": checks,
        "refusal": refusal[:3],
        "foreign_cluster_id": foreign,
        "cluster_id": original.cluster_id,
    }
    problems = [k for k, v in checks.items() if v is False or (k == "exited" and v in (0, None))]
    # Restore the node so the run directory's log dirs are one cluster's again.
    meta_path.write_text(text.replace(f"cluster.id={foreign}", f"cluster.id={original.cluster_id}"))
    if problems:
        return Finding(
            Symptom(VIOLATED),
            f"a broker with a foreign cluster id: {', '.join(problems)} failed ({checks})",
            details,
        )
    return Finding(
        Symptom(CONSISTENT),
        f"broker {STRAY} refused to join ({refusal[0].split('] ', 1)[-1][:150]})"
        f", exited with {checks['exited']}; its log and the cluster's are untouched",
        details,
    )


FAILOVER = Scenario(
    id="kip-595-controller-failover",
    title="KIP-595: the KRaft quorum leader killed, paused and partitioned under metadata load",
    body=failover_body,
    cluster=failover_spec,
    kip="KIP-595",
    modes=("kraft",),
    min_release="3.7.0",
    min_release_reason="a partitioned quorum leader resigns only from 3.7 (KAFKA-15489)",
)

MISMATCH = Scenario(
    id="kip-595-cluster-id-mismatch",
    title="KIP-595: a node from another cluster refuses to join and touches nothing",
    body=mismatch_body,
    cluster=mismatch_spec,
    topic=Topic.fixed(TOPIC, [1, 2, 3], **{"min.insync.replicas": 2}),
    kip="KIP-595",
    modes=("kraft",),
)
