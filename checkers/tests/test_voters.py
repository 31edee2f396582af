"""The KRaft quorum's membership (KIP-853): the control records that carry it, the model's
rules for its steps, the schedule language's checks of them, the quorum's invariants and
the tool's answer, each from crafted inputs."""

from __future__ import annotations

import pytest

from checkers.metadata_log import LeaderChange, MetadataLog, VoterSet
from checkers.metadata_records import Voter, decode_kraft_version, decode_voters
from checkers.schedules.invariants import quorum_violations
from checkers.simulate import Simulator
from faults.voters import parse_status
from runrecord.schedule import Cluster, Schedule, dumps, loads
from runrecord.schedule_fields import ScheduleError
from runrecord.steps.quorum import Quorum
from runrecord.steps.voters import AddVoter, RemoveVoter, WipeVoter
from runrecord.steps.writes import Produce

# A VotersRecord as 4.4.0's format wrote it into a bootstrap checkpoint: voters 101 to 103,
# each with its directory id and its CONTROLLER endpoint on port 9093.
VOTERS_RECORD = bytes.fromhex(
    "0000040000006599b9cacaba1f400ba686ddd22d6163e2020b434f4e54524f4c4c4552036331238500000000"
    "010000000000663a830cfabc81493f9d2247dd647731fd020b434f4e54524f4c4c4552036332238500000000"
    "0100000000006756e2bf54b3284b62a160fe51b969f854020b434f4e54524f4c4c4552036333238500000000"
    "01000000"
)


def test_a_voters_record_names_each_voter_by_id_directory_and_endpoint() -> None:
    voters = decode_voters(VOTERS_RECORD)
    assert [v.voter_id for v in voters] == [101, 102, 103]
    assert voters[0].directory_id == "mbnKyrofQAumht3SLWFj4g"
    assert voters[2].endpoints == ("CONTROLLER://c3:9093",)
    assert decode_kraft_version(bytes.fromhex("0000000100")) == 1


DYNAMIC = Cluster(
    mode="kraft", brokers=3, replication_factor=2, controllers=3, quorum="dynamic",
    spare_controllers=1,
)  # fmt: skip


def test_the_model_follows_the_voter_set() -> None:
    sim = Simulator(DYNAMIC, "4.4.0")
    assert sim.apply(Produce(2)).status == "done"
    added = sim.apply(AddVoter())
    assert added.targets["controller"] == 4 and added.targets["voters"] == [1, 2, 3, 4]
    removed = sim.apply(RemoveVoter())  # the leader, 1: it resigns, 2 leads
    assert removed.targets == {"voter": 1, "voters": [2, 3, 4], "quorum_leader": 2}
    # A wiped voter's old incarnation still votes, down: it cannot be added again until
    # it is removed.
    assert sim.apply(WipeVoter(3)).status == "done"
    assert sim.apply(AddVoter(3)).status == "skipped"
    assert sim.apply(Quorum("kill", 3)).status == "skipped"
    assert sim.apply(RemoveVoter(3)).targets["voters"] == [2, 4]
    assert sim.apply(AddVoter(3)).targets["voters"] == [2, 3, 4]
    # Two of three down: the quorum has no leader, and no change can be made.
    sim.apply(Quorum("kill", 3))
    sim.apply(Quorum("kill", 4))
    assert sim.apply(AddVoter(1)).status == "skipped"
    assert not sim.quorum_up()
    assert not sim.finish().unpredictable


def test_a_static_quorums_wiped_voter_makes_the_schedule_unpredictable() -> None:
    static = Cluster(mode="kraft", brokers=3, replication_factor=2, controllers=3)
    sim = Simulator(static, "3.9.2")
    assert sim.apply(WipeVoter(2)).status == "done"
    assert "KAFKA-14077" in " ".join(sim.finish().unpredictable)


def test_a_schedule_says_what_membership_steps_need() -> None:
    text = dumps(Schedule(DYNAMIC, steps=(AddVoter(4), RemoveVoter(), WipeVoter(2))))
    assert '"quorum": "dynamic"' in text and '"spare_controllers": 1' in text
    assert loads(text).steps == (AddVoter(4), RemoveVoter(), WipeVoter(2))
    static = text.replace('"quorum": "dynamic",', "").replace('"spare_controllers": 1,', "")
    with pytest.raises(ScheduleError, match="needs a dynamic quorum"):
        loads(static)
    with pytest.raises(ScheduleError, match="spare_controllers"):
        loads(text.replace('"quorum": "dynamic"', '"quorum": "static"'))
    with pytest.raises(ScheduleError, match="the cluster has 4 controller"):
        loads(text.replace('"controller": 4', '"controller": 6'))


def _log(name: str, changes: list[tuple[int, int]], voters: dict[int, str] | None = None):
    log = MetadataLog(name)
    log.leader_changes = [LeaderChange(leader, (), (), epoch, i) for i, (leader, epoch) in
                          enumerate(changes)]  # fmt: skip
    if voters is not None:
        made = tuple(Voter(v, d, ()) for v, d in voters.items())
        log.voter_sets = [VoterSet(made, 1, 9, False)]
    return log


def test_the_quorums_invariants() -> None:
    made = {101: "a", 104: "d"}
    healthy = {"c1": _log("c1", [(101, 1), (104, 2)], made), "b1": _log("b1", [(104, 2)])}
    assert quorum_violations(healthy, "c1", made) is None
    assert quorum_violations(healthy, "c1", None) is None
    two = {**healthy, "c2": _log("c2", [(102, 2)])}
    assert "epoch 2 has two leaders: 104 in b1's" in quorum_violations(two, "c1", None)
    back = {"c1": _log("c1", [(101, 3), (104, 2)])}
    assert "epoch 2 after epoch 3" in quorum_violations(back, "c1", None)
    stale = quorum_violations(healthy, "c1", {101: "a", 102: "b", 104: "d"})
    assert "records last (offset 9) is 101 (a), 104 (d)" in stale
    assert "made 101 (a), 102 (b), 104 (d)" in stale


STATUS = """log4j:WARN No appenders could be found for logger.
ClusterId:              z1Cx7s6XRceSDbbDoACAbQ
LeaderId:               102
LeaderEpoch:            2
HighWatermark:          185
CurrentVoters:          [{"id": 101, "directoryId": "mbnK", "endpoints": ["CONTROLLER://c1:9093"]}, {"id": 104, "directoryId": "PRMU", "endpoints": ["CONTROLLER://c4:9093"]}]
CurrentObservers:       [{"id": 2, "directoryId": "W17g"}, {"id": 103, "directoryId": "VuK_"}]
"""  # noqa: E501 - as the tool prints it


def test_describe_quorums_status() -> None:
    view = parse_status(STATUS)
    assert (view.leader_id, view.leader_epoch) == (102, 2)
    assert view.voters == {101: "mbnK", 104: "PRMU"}
    assert view.observers == {2: "W17g", 103: "VuK_"}
