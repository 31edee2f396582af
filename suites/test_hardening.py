"""Interrupted runs leave nothing behind.

A real `logfork run` is started 20 times and sent SIGINT at a random point each time: while
images are checked, the cluster boots, a fault is in force, the checker reads, or teardown
is under way. After each run nothing logfork created may remain: no container (running,
paused or stopped), network, volume, iptables rule (they live in the containers' network
namespaces) or process; and `logfork clean` is never called.

SIGTERM, what CI timeouts and orchestrators send, must end a run as SIGINT does: torn down,
one line, exit 143.
"""

import json
import os
import random
import signal
import socket
import subprocess
import sys

import pytest

from fixtures import cleanup, engine
from fixtures.waiting import wait_until

RUNS = int(os.environ.get("LOGFORK_INTERRUPTS", "20"))
SCENARIO = "kip-279-s1-equal"


def _restore_sigint() -> None:
    # A child of a non-interactive shell may start with SIGINT ignored; a user's Ctrl-C
    # reaches logfork with the default handler, so that is what the child gets.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def leftovers(client, volumes_before: set[str], marker: str, owner: str | None = None) -> list[str]:
    found = []
    flt = {"label": f"{cleanup.LABEL_OWNER}={owner}" if owner else cleanup.LABEL}
    found += [
        f"container {c.name} ({c.status})" for c in client.containers.list(all=True, filters=flt)
    ]
    found += [f"network {n.name}" for n in client.networks.list(filters=flt)]
    found += [f"volume {v.name}" for v in client.volumes.list() if v.name not in volumes_before]
    procs = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True).stdout
    found += [f"process {line}" for line in procs.splitlines() if "pgrep" not in line]
    return found


def _logfork_run(kafka_target, out, *extra, scenario=SCENARIO, **popen) -> subprocess.Popen:
    command = ["run", scenario, "--kafka-version", kafka_target.kafka]
    command += ["--kafka-mode", kafka_target.mode, "--out", str(out), *extra]
    return subprocess.Popen([sys.executable, "-m", "suites.cli", *command], **popen)


def _signal_when(
    proc: subprocess.Popen, probe, ok, what: str, sig: int, timeout: float = 180
) -> tuple[str, str]:
    """Send `sig` once `probe` satisfies `ok`; the process's output once it has ended."""
    try:
        wait_until(probe, ok, what=what, timeout=timeout)
        proc.send_signal(sig)
        return proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.cluster
def test_sigterm_ends_like_sigint(kafka_target, tmp_path):
    client = engine.client()
    volumes_before = {v.name for v in client.volumes.list()}
    out = tmp_path / "runs"
    proc = _logfork_run(
        kafka_target, out, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    owner = f"{socket.gethostname()}:{proc.pid}"
    # Terminate while the cluster is up: its containers exist and must all go.
    _, err = _signal_when(
        proc,
        lambda: client.containers.list(filters={"label": f"{cleanup.LABEL_OWNER}={owner}"}),
        lambda running: len(running) >= 3,
        "the run's brokers to be running",
        signal.SIGTERM,
    )
    assert proc.returncode == 143, err
    # Progress lines ("[logfork] ... cluster up") may or may not have been printed before
    # the signal landed; besides them, the one line a terminated run prints, no traceback.
    said = [ln for ln in err.strip().splitlines() if not ln.startswith("[logfork] ")]
    assert said == ["logfork: terminated (SIGTERM); the cluster was torn down"], err
    assert leftovers(client, volumes_before, str(out), owner) == []


@pytest.mark.cluster
def test_sigterm_leaves_no_crash_simulating_mount(kafka_target, tmp_path):
    """A run whose log dirs sit on crash-simulating filesystems, terminated while its
    cluster is up: its containers, its mounts and their daemons all go."""
    from fixtures.crashfs import stale_mounts

    if kafka_target.mode != "zk":
        pytest.skip("kip-101-s2 runs in ZooKeeper mode")
    client = engine.client()
    volumes_before = {v.name for v in client.volumes.list()}
    out = tmp_path / "runs"
    proc = _logfork_run(kafka_target, out, "--power-model", "unsynced", "--no-report",
                        scenario="kip-101-s2", stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE, text=True)  # fmt: skip
    owner = f"{socket.gethostname()}:{proc.pid}"
    _, err = _signal_when(
        proc,
        lambda: stale_mounts(out, include_live=True),
        lambda mounts: len(mounts) >= 3,
        "the run's brokers' log dirs mounted",
        signal.SIGTERM,
    )
    assert proc.returncode == 143, err
    assert stale_mounts(out, include_live=True) == []
    assert leftovers(client, volumes_before, str(out), owner) == []


@pytest.mark.slow
@pytest.mark.cluster
def test_interrupted_runs_leave_nothing(kafka_target, tmp_path):
    client = engine.client()
    volumes_before = {v.name for v in client.volumes.list()}
    rng = random.Random(int(os.environ.get("LOGFORK_SEED", "7")))
    out = tmp_path / "runs"
    codes = []
    for i in range(RUNS):
        point = rng.uniform(0.5, 45.0)
        proc = _logfork_run(
            kafka_target,
            out,
            preexec_fn=_restore_sigint,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            proc.wait(timeout=point)  # the random point; a run that finishes first is fine
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"run {i}: still running 180s after SIGINT at {point:.1f}s")
        codes.append(proc.returncode)
        assert "Traceback" not in err, f"run {i} (SIGINT at {point:.1f}s):\n{err[-2000:]}"
        left = leftovers(client, volumes_before, str(out))
        assert left == [], f"run {i} (SIGINT at {point:.1f}s, exit {proc.returncode}) left {left}"
    # Most runs must really have been interrupted, not finished before the signal.
    assert codes.count(130) >= RUNS // 2, codes


@pytest.mark.slow
@pytest.mark.cluster
def test_interrupted_explore_leaves_nothing_and_says_what_it_found(kafka_target, tmp_path):
    client = engine.client()
    volumes_before = {v.name for v in client.volumes.list()}
    out = tmp_path / "explore"
    command = ["explore", "--kafka-version", kafka_target.kafka, "--kafka-mode", kafka_target.mode]
    # One cluster: "the second schedule started" then means the first one is over.
    command += ["--seed", "1", "--budget", "3", "--unclean", "--out", str(out), "--parallel", "1"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "suites.cli", *command],
        preexec_fn=_restore_sigint,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Interrupt during the second schedule: a topic, cuts and a background workload live.
    stdout, err = _signal_when(
        proc,
        lambda: (out / "runs").is_dir() and len(list((out / "runs").iterdir())),
        lambda n: n >= 2,
        "the second schedule to start",
        signal.SIGINT,
        timeout=600,
    )
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "interrupted" in stdout.splitlines()[-1], stdout
    record = json.loads((out / "explore.json").read_text())
    assert record["interrupted"] and len(record["schedules"]) >= 1
    # What it says it found is what it recorded: a replay line per finding, or none.
    if record["findings"]:
        assert stdout.count("replay: logfork replay") == len(record["findings"]), stdout
    else:
        assert "nothing found so far" in stdout and "replay: logfork replay" not in stdout
    owner = f"{socket.gethostname()}:{proc.pid}"
    assert leftovers(client, volumes_before, str(out), owner) == []
