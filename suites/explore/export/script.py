"""`logfork replay FILE --export-script DIR`: the replay as a script anyone with a Kafka
distribution can run.

The script brings the replay's cluster up as plain Java processes on loopback, with the
exact server.properties logfork ran (only listeners, addresses and directories rewritten),
formats KRaft storage as logfork did, creates the topic with the same assignment and
configs, runs each step that ran in the replay against the broker it resolved to there, and
ends with the symptom checked by Kafka's own DumpLogSegments and tools. Every wait is a
condition polled with a limit; a wait that gives up exits 3 (not reached), never 0.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from basics.releases import Release
from checkers.checkpoints import parse_properties
from fixtures.config import (
    log_config_name,
    log_config_property,
    property_value,
    render_properties,
)
from runrecord.replay import StepResult
from runrecord.schedule import Schedule
from suites.explore.export import (  # noqa: F401 (each registers its family's exporters)
    checks,
    disks,
    elections,
    links,
    processes,
    txn,
    voters,
    waits,
    writes,
)
from suites.explore.export.registry import NEEDS, ExportError, Ran, lines_for
from suites.explore.live.writes import needs_filler

SCRIPT = "reproduce.sh"
LIB = Path(__file__).with_name("lib.sh")  # the helpers every script carries
# Node k listens on $PORT_BASE + 10 k (+1 for a combined node's controller listener); the
# configs carry @PORT+n@, filled in when the script runs.
PORT_BASE = 29090

# Kafka's tools by the main class a distribution's bin/ script runs. Classes moved between
# releases (from core's kafka.* to the tools module over the 3.x line; DumpLogSegments only
# in 4.3, KAFKA-14579, as fixtures/tools.py found), so the script picks, in the jars it is
# given, the first that is there: the same script runs on the bad release and the good one.
TOOL_CLASSES = {
    "TOPICS": ("org.apache.kafka.tools.TopicCommand", "kafka.admin.TopicCommand"),
    "DUMP_LOG": ("org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments"),
    "STORAGE": ("kafka.tools.StorageTool", "org.apache.kafka.tools.StorageTool"),
    "REASSIGN": (
        "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
        "kafka.admin.ReassignPartitionsCommand",
    ),
    "TRANSACTIONS": ("org.apache.kafka.tools.TransactionsCommand",),
    "ELECT": ("org.apache.kafka.tools.LeaderElectionCommand", "kafka.admin.LeaderElectionCommand"),
}


@dataclass(frozen=True)
class Node:
    name: str  # as logfork named it: b1, c1, ...
    index: int  # its address is @ADDR+index@: loopback, or its own namespace's
    node_id: int
    port: int  # the broker listener (a controller's own, for a controller)
    controller_port: int | None
    broker: bool

    @property
    def addr(self) -> str:
        return f"@ADDR+{self.index}@"

    @property
    def listens(self) -> int:
        """The port a handshake proves a link by: the broker's, or the controller's."""
        return self.port if self.broker else self.controller_port or 0


def _nodes(run_dir: Path) -> list[Node]:
    found = []
    names = sorted(p.name for p in (run_dir / "nodes").iterdir() if p.is_dir())
    for k, name in enumerate(names):
        props = _properties(run_dir / "nodes" / name / "config" / "server.properties")
        node_id = int(props.get("node.id") or props.get("broker.id") or 0)
        port = 10 * k
        roles = props.get("process.roles", "broker").split(",")
        ctl = None if "controller" not in roles else port if roles == ["controller"] else port + 1
        found.append(Node(name, k, node_id, port, ctl, "broker" in roles))
    return found


def _properties(path: Path) -> dict[str, str]:
    return parse_properties(path.read_text())


def _rewrite(props: dict[str, str], node: Node, nodes: list[Node]) -> dict[str, str]:
    """The node's settings on loopback: one listener per role, its own port, its own dirs."""
    by_name = {n.name: n for n in nodes}
    out = dict(props)
    listeners, advertised = [], []
    if node.broker:
        listeners.append(f"INTERNAL://{node.addr}:{_port(node.port)}")
        advertised.append(f"INTERNAL://{node.addr}:{_port(node.port)}")
    if node.controller_port is not None:
        listeners.append(f"CONTROLLER://{node.addr}:{_port(node.controller_port)}")
    out["listeners"] = ",".join(listeners)
    if advertised:
        out["advertised.listeners"] = ",".join(advertised)
    else:
        out.pop("advertised.listeners", None)
    if "controller.quorum.voters" in props:
        quorum = []
        for voter in props["controller.quorum.voters"].split(","):
            vid, _, host = voter.partition("@")
            target = by_name[host.split(":")[0]]
            quorum.append(f"{vid}@{target.addr}:{_port(target.controller_port)}")
        out["controller.quorum.voters"] = ",".join(quorum)
    out["log.dirs"] = ",".join(
        d.replace("/logfork/", f"@WORK@/{node.name}/") for d in props["log.dirs"].split(",")
    )
    return out


def _port(offset: int | None) -> str:
    return f"@PORT+{offset}@"


def _format_args(run_dir: Path, node: str) -> list[str] | None:
    """The KRaft storage format's arguments as logfork ran them (after StorageTool), its
    config path moved to the node's work dir; None where the node formats nothing."""
    for line in (run_dir / "nodes" / node / "config" / "start.sh").read_text().splitlines():
        words = shlex.split(line)
        if "kafka.tools.StorageTool" in words:
            i = words.index("kafka.tools.StorageTool")
            return [_here(w, node) for w in words[i + 1 :]]
    return None


def _here(word: str, node: str) -> str:
    return word.replace("/logfork/config/", f"@WORK@/{node}/")


def export_script(
    schedule: Schedule,
    steps: list[StepResult],
    run_dir: Path,
    release: Release,
    out: Path,
    title: str,
    topic: str = "reproduce",
) -> Path:
    """Write DIR/reproduce.sh and the nodes' configs beside it; returns the script. Raises
    ExportError, having written nothing, where a step or the mode cannot be exported."""
    if schedule.cluster.mode != "kraft":
        raise ExportError(
            "only KRaft clusters are exported yet: a ZooKeeper-mode script would also run ZooKeeper"
        )
    body_lines: list[str] = []
    needs: set[str] = set()
    for result in steps:
        step = schedule.steps[result.index]
        body_lines.append(f"# step {result.index}: {result.step}")
        if result.status != "done":
            body_lines.append(f"#   skipped in the replay: {result.observed or result.status}")
            continue
        body_lines += lines_for(step, Ran(result.targets))
        needs |= NEEDS[type(step)]
        body_lines.append(f'log "step {result.index} done: {_quote(result.step)}"')
    nodes = _nodes(run_dir)
    out.mkdir(parents=True, exist_ok=True)
    log_name = log_config_name(release)
    formats = {}
    for node in nodes:
        conf = run_dir / "nodes" / node.name / "config"
        target = out / "nodes" / node.name
        target.mkdir(parents=True, exist_ok=True)
        props = _rewrite(_properties(conf / "server.properties"), node, nodes)
        (target / "server.properties").write_text(render_properties(props))
        logging = (conf / log_name).read_text().replace("/logfork/logs/", f"@WORK@/{node.name}/")
        (target / log_name).write_text(logging)
        formats[node.name] = _format_args(run_dir, node.name)
    shape = schedule.cluster
    assignment = ",".join(
        ":".join(str(b) for b in shape.partition_replicas(p)) for p in shape.partitions
    )
    config = shape.topic_config.kafka_configs()
    networked = "network" in needs
    text = _header(schedule, release, run_dir, log_name, nodes, formats, topic, title, networked)
    transactions = any(s.transactional for s in schedule.steps)
    filler = shape.partition_replicas(0) if needs_filler(schedule) else None
    text += _setup(nodes, assignment, config, transactions, "writer" in needs, filler)
    text += "\n".join(body_lines) + "\n"
    text += checks.symptom(transactions, _brokers(nodes), shape.partitions)
    script = out / SCRIPT
    script.write_text(text)
    script.chmod(0o755)
    return script


def _shell_words(args: list[str]) -> str:
    """The arguments quoted for the shell, the work dir left to expand."""
    return " ".join(shlex.quote(a) for a in args).replace("@WORK@", '"$WORK"')


def _quote(text: str) -> str:
    return text.replace('"', "'").replace("$", "")


def _brokers(nodes: list[Node]) -> dict[int, str]:
    return {n.node_id: n.name for n in nodes if n.broker}


def _header(
    schedule: Schedule,
    release: Release,
    run_dir: Path,
    log_name: str,
    nodes: list[Node],
    formats: dict[str, list[str] | None],
    topic: str,
    title: str,
    networked: bool,
) -> str:
    prop, prefix = log_config_property(release)
    boot = ",".join(f"$(node_addr {n.index}):$((PORT_BASE + {n.port}))" for n in nodes if n.broker)
    names = " ".join(n.name for n in nodes)
    brokers = " ".join(n.name for n in nodes if n.broker)
    controllers = " ".join(n.name for n in nodes if n.controller_port is not None)
    controller = next(n.name for n in nodes if n.controller_port is not None)
    tool_vars = "\n".join(
        f"{k}=$(pick_class {' '.join(v)})" for k, v in sorted(TOOL_CLASSES.items())
    )
    settings = "\n".join(f"{k}={v}" for k, v in txn.SETTINGS.items())
    fmt_cases = "\n".join(
        f'    {name}) tool "$STORAGE" {_shell_words(args)} >/dev/null ;;'
        for name, args in formats.items()
        if args is not None
    )
    ids = "\n".join(f"NODE_OF[{n.node_id}]={n.name}" for n in nodes if n.broker)
    ids += "\n" + "\n".join(
        f"INDEX[{n.name}]={n.index} ID_OF[{n.name}]={n.node_id} LISTEN[{n.name}]={n.listens}"
        for n in nodes
    )
    if networked:
        where = (
            "in a network namespace each, on a bridge (NET=A.B.C: its /24, default\n"
            "# from PORT_BASE), so that iptables and tc cut and slow links between them: run\n"
            "# it as root. Needs ip, iptables, tc and ss too"
        )
    else:
        where = "on 127.0.0.1 (ports from PORT_BASE)"
    text = f"""#!/usr/bin/env bash
# {title}
# Written by `logfork replay --export-script` on {date.today()} from the replay in
# {run_dir.name} (Kafka {release}, {schedule.cluster.mode}); it needs no logfork.
#
# Runs the same cluster as plain Java processes {where}. It runs the same steps with
# Kafka's own tools and kill(1), and checks the symptom with Kafka's DumpLogSegments.
# Needs bash, awk, java; a Kafka {release} distribution:
#     KAFKA_HOME=/path/to/kafka_2.13-{release} ./{SCRIPT}
# (or KAFKA_LIBS=a directory holding every jar). WORK=DIR keeps the nodes' files there;
# PORT_BASE=N moves the nodes' ports (default {PORT_BASE}, then every 10th).
# Exit: 1 the symptom showed, 0 it did not, 3 a wait gave up (the state was not reached),
# 2 a command failed (the script could not run: see $WORK/tools.log).
set -eEuo pipefail
trap 'echo "line $LINENO: a command failed (exit $?); see $WORK/tools.log" >&2; exit 2' ERR
HERE=$(cd "$(dirname "$0")" && pwd)
LIBS=${{KAFKA_LIBS:-${{KAFKA_HOME:?set KAFKA_HOME to a Kafka {release} distribution}}/libs}}
WORK=${{WORK:-$(mktemp -d /tmp/reproduce.XXXXXX)}}
TOPIC={topic}
PORT_BASE=${{PORT_BASE:-{PORT_BASE}}}
NETWORKED={int(networked)}
NET=${{NET:-10.$((PORT_BASE / 256 % 256)).$((PORT_BASE % 256))}}
NODES="{names}"
BROKER_NODES="{brokers}"
CONTROLLERS="{controllers}"
METADATA_NODE={controller}
pick_class() {{  # the first of these classes the jars hold (a jar lists its entries plainly)
  local c
  for c in "$@"; do
    if grep -qaF "${{c//.//}}.class" "$LIBS"/kafka*.jar; then echo "$c"; return; fi
  done
  echo "none of $* is in $LIBS" >&2; echo "${{1}}"
}}
{tool_vars}
declare -A PID NODE_OF INDEX ID_OF LISTEN
{ids}
LOG_PROPERTY={prop}
LOG_PREFIX={prefix}
LOG_CONFIG={log_name}
{settings}
format_node() {{
  case $1 in
{fmt_cases}
  esac
}}
"""
    text += LIB.read_text()
    text += f"BOOT={boot}\n"
    return text + 'log "Kafka jars: $LIBS; nodes\' files: $WORK"\n'


def _setup(
    nodes: list[Node],
    assignment: str,
    config: dict[str, object],
    transactions: bool,
    plain: bool,
    filler: list[int] | None,
) -> str:
    configs = " ".join(f"--config {k}={property_value(v)}" for k, v in config.items())
    brokers = [n for n in nodes if n.broker]
    # The controllers first: a broker gives up when no quorum registers it within
    # initial.broker.registration.timeout.ms (60 s), which a slow start can outlast.
    first = [n.name for n in nodes if n.controller_port is not None]
    order = " ".join(first + [n.name for n in nodes if n.name not in first])
    lines = [
        "make_network",
        f"for n in {order}; do",
        '  mkdir -p "$WORK/$n"',
        '  for f in "$HERE/nodes/$n"/*; do',
        '    sed -e "s#@WORK@#$WORK#g" -e "$(fill_sed)" "$f" >"$WORK/$n/$(basename "$f")"',
        "  done",
        '  format_node "$n"',
        '  start_node "$n"',
        "done",
    ]
    lines += [
        f'wait_until "broker {n.node_id} registered and unfenced" 120 is_unfenced {n.node_id}'
        for n in brokers
    ]
    lines += [
        f'tool "$TOPICS" --bootstrap-server "$BOOT" --create --topic "$TOPIC" '
        f"--replica-assignment {assignment} {configs} >/dev/null",
        'wait_until "partition 0 has a leader" 60 has_leader',
    ]
    if filler is not None:
        # The filler's own topic, on the schedule's replicas (suites.explore.live.writes).
        lines.append(
            f'tool "$TOPICS" --bootstrap-server "$BOOT" --create --topic "$TOPIC-filler" '
            f"--replica-assignment {':'.join(map(str, filler))} >/dev/null"
        )
    if plain:
        lines.append("start_writer")
    if transactions:
        lines.append("start_producer")
    lines.append("")
    return "\n".join(lines) + "\n"
