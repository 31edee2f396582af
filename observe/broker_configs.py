"""A broker's dynamic configs in its own view (DescribeConfigs, KIP-133; dynamic broker
configs, KIP-226).

An AlterConfigs answer only says the change was stored: in ZooKeeper mode a broker applies
it when the config-change notification reaches it, in KRaft when it replays the record. A
throttle is in force only once the broker itself describes it.
"""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka.admin import ConfigResource, ConfigSource

from basics.errors import NotReached
from fixtures.cluster import Cluster
from fixtures.waiting import STEADY, WaitTimeout, wait_until

# What a broker answers for a dynamic config whose type its release does not know: 1.1 defines
# the throttle rates only as dynamic configs, and describes a config of no known type as
# sensitive, with no value.
HIDDEN = "(set, value hidden)"


def dynamic_values(cluster: Cluster, broker: int, names: Mapping[str, object]) -> dict:
    """The broker's own dynamic value of each name (None: it sets none; HIDDEN: it sets one
    it does not show). librdkafka sends a broker resource's DescribeConfigs to that
    broker."""
    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker))
    entries = cluster.admin().describe_configs([resource])[resource].result(timeout=30)
    dynamic = {
        name: HIDDEN if entry.value is None else entry.value
        for name, entry in entries.items()
        if ConfigSource(entry.source) == ConfigSource.DYNAMIC_BROKER_CONFIG
    }
    return {name: dynamic.get(name) for name in names}


def await_dynamic(
    cluster: Cluster, broker: int, wanted: Mapping[str, str | None], what: str
) -> None:
    """Until broker `broker` describes each config as `wanted` (None: not set dynamically);
    NotReached, with what it described last, when it never does."""
    try:
        wait_until(
            lambda: dynamic_values(cluster, broker, wanted),
            lambda seen: all(seen[n] in (v, HIDDEN if v else None) for n, v in wanted.items()),
            what=f"broker {broker} applying {what}",
            timeout=30.0,
            interval=STEADY,
            max_interval=STEADY,
        )
    except WaitTimeout as exc:
        raise NotReached(f"broker {broker} applying {what}", exc.last) from None
