"""Where a connector's offsets live (KIP-618 "Per-connector offsets topics"), and how to reach them.

A connector has up to two offsets topics: the worker's global one and, when configured (or implied
by a producer pointed at another cluster), a separate one on the cluster the connector writes to.
`offsets_topic_for` decides, and the placement carries the client settings for both.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import AdminClient

from eosconnect.storage.clients import ClientConfig, ClientKind, client_config

__all__ = ["DEFAULT_OFFSETS_TOPIC", "OffsetsTopicPlacement", "offsets_topic_for", "same_bootstrap"]

log = logging.getLogger(__name__)

#: Kafka Connect's default name of the worker's global offsets topic.
DEFAULT_OFFSETS_TOPIC = "connect-offsets"
DEFAULT_BOOTSTRAP = "localhost:9092"


def _servers(value: Any) -> frozenset[str]:
    hosts = set()
    for raw in str(value or "").split(","):
        host = raw.strip().lower()
        if "://" in host:
            host = host.split("://", 1)[1]
        if host:
            hosts.add(host)
    return frozenset(hosts)


def same_bootstrap(a: Any, b: Any) -> bool:
    """Whether two `bootstrap.servers` lists plausibly reach the same cluster (they share a host:port).

    Kafka Connect compares cluster ids, which needs a round trip to both clusters; pass
    `same_cluster=` to `offsets_topic_for` to do that instead.
    """
    return bool(_servers(a) & _servers(b))


#: Settings that say which cluster a client reaches and as whom; they follow the connector's producer.
_CONNECTION_PREFIXES = ("sasl.", "ssl.")
_CONNECTION_KEYS = frozenset({"bootstrap.servers", "security.protocol"})


def _follow_producer_cluster(
    kind: ClientKind, worker: Mapping[str, Any], connector: Mapping[str, Any], producer: ClientConfig
) -> ClientConfig:
    """A `kind` config that reaches the cluster the connector's producer writes to.

    The connector's own `<kind>.override.*` connection settings win; otherwise the producer's
    connection settings are used, since the offsets topic lives where the producer writes.
    """
    config = client_config(kind, worker, connector)
    own = f"{kind}.override."
    for key, value in producer.items():
        if key in _CONNECTION_KEYS or key.startswith(_CONNECTION_PREFIXES):
            if key != "bootstrap.servers" and config.origin.get(key, "").startswith(own):
                continue
            config[key] = value
            config.origin[key] = producer.origin.get(key, key)
    return config


@dataclass(frozen=True)
class OffsetsTopicPlacement:
    """Where a connector's offsets live, and the client settings to reach them.

    `topic` is the topic the connector's tasks write offsets to; with `separate` it is a
    per-connector topic on the connector's cluster (`explicit`: named by `offsets.storage.topic`,
    else implied by a producer targeting another cluster), otherwise the worker's global topic.
    """

    topic: str
    separate: bool
    explicit: bool
    #: Consumer settings for reading `topic` (the connector's cluster and principal).
    consumer_config: dict[str, Any] = field(repr=False)
    #: Admin settings for creating `topic` (connector `admin.override.*` > worker `admin.*` > ...).
    admin_config: dict[str, Any] = field(repr=False)
    global_topic: str = DEFAULT_OFFSETS_TOPIC
    #: The worker's own consumer settings, for reading the global topic.
    global_consumer_config: dict[str, Any] = field(default_factory=dict, repr=False)
    #: The worker's own producer settings, for copying offsets to the global topic.
    global_producer_config: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def client(self) -> dict[str, Any]:
        """The client settings for the cluster that hosts `topic` (same as `consumer_config`)."""
        return self.consumer_config

    def admin(self) -> AdminClient:
        """An admin client for the cluster that hosts `topic` (to create it if `separate`)."""
        return AdminClient(self.admin_config)


def offsets_topic_for(
    connector_name: str,
    connector_config: Mapping[str, Any],
    worker_config: Mapping[str, Any],
    *,
    same_cluster: Callable[[Any, Any], bool] = same_bootstrap,
) -> OffsetsTopicPlacement:
    """Decide where `connector_name` keeps its offsets (KIP-618 "Per-connector offsets topics").

    - `offsets.storage.topic` in the connector config: that topic on the connector's cluster
      (explicit); if it names the global topic on the worker's own cluster, it is the global topic.
    - else, with `exactly.once.source.support=enabled` and `producer.override.bootstrap.servers`
      reaching another cluster: a topic named like the worker's `offset.storage.topic` there
      (implicit), since a transactional producer can only write offsets to its own cluster.
    - else the worker's global `offset.storage.topic`.
    With exactly-once enabled, the consumers' `isolation.level` is forced to read_committed.
    """
    global_topic = str(worker_config.get("offset.storage.topic") or DEFAULT_OFFSETS_TOPIC)
    eos = str(worker_config.get("exactly.once.source.support") or "disabled").strip().lower() == "enabled"
    producer = client_config("producer", worker_config, connector_config)
    worker_servers = worker_config.get("bootstrap.servers") or DEFAULT_BOOTSTRAP
    producer.setdefault("bootstrap.servers", worker_servers)
    same = same_cluster(worker_servers, producer["bootstrap.servers"])
    explicit_topic = str(connector_config.get("offsets.storage.topic") or "").strip()

    if explicit_topic:
        topic, explicit, separate = explicit_topic, True, not (explicit_topic == global_topic and same)
    elif eos and not same:
        topic, explicit, separate = global_topic, False, True
    else:
        topic, explicit, separate = global_topic, False, False

    why = "offsets are read with read_committed when exactly.once.source.support=enabled"
    global_consumer = client_config("consumer", worker_config)
    global_consumer.setdefault("bootstrap.servers", worker_servers)
    if eos:
        global_consumer.force("isolation.level", "read_committed", why)
    if separate:
        consumer = _follow_producer_cluster("consumer", worker_config, connector_config, producer)
        admin = _follow_producer_cluster("admin", worker_config, connector_config, producer)
        if eos:
            consumer.force("isolation.level", "read_committed", why)
    else:
        consumer = ClientConfig("consumer", global_consumer, global_consumer.origin)
        admin = client_config("admin", worker_config)
        admin.setdefault("bootstrap.servers", worker_servers)
    global_producer = client_config("producer", worker_config)
    global_producer.setdefault("bootstrap.servers", worker_servers)
    placement = OffsetsTopicPlacement(
        topic=topic,
        separate=separate,
        explicit=explicit,
        consumer_config=consumer,
        admin_config=admin,
        global_topic=global_topic,
        global_consumer_config=global_consumer,
        global_producer_config=global_producer,
    )
    log.debug("offsets of connector %r: %s", connector_name, placement)
    return placement
