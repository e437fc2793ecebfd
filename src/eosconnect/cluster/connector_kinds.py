"""What differs between source and sink connectors for the worker, in one place.

The herder, the validation and the job launcher ask a connector's `ConnectorKind` instead of
testing for sinks here and there: which framework settings apply, how they are parsed, and
whether tasks go through KIP-618's exactly-once start-up protocol (fencing, transactional ids):
sources always do when the worker enables it; a sink only when its connector delivers exactly
once with the given config (`SinkConnector.exactly_once_delivery`, KIP-656's mirror sink).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from eosconnect.api.config import ConfigDef
from eosconnect.api.errors import ConfigException
from eosconnect.api.records import TopicPartition
from eosconnect.api.sink import SinkConnector
from eosconnect.plugins.loading import (
    ConnectorType,
    connector_class_of,
    connector_type,
)
from eosconnect.runtime.config import (
    SINK_CONNECTOR_CONFIG_DEF,
    SOURCE_CONNECTOR_CONFIG_DEF,
    SinkConnectorConfig,
    SourceConnectorConfig,
)
from eosconnect.storage.clients import admin_principal_producer_config, client_config

__all__ = [
    "SINK",
    "SOURCE",
    "ConnectorKind",
    "fencing_producer_config",
    "kind_of",
    "kind_of_config",
    "uses_exactly_once_startup",
]


@dataclass(frozen=True)
class ConnectorKind:
    type: ConnectorType
    framework_config_def: ConfigDef
    parse: Callable[[Mapping[str, str]], SourceConnectorConfig | SinkConnectorConfig]

    @property
    def is_sink(self) -> bool:
        return self.type is ConnectorType.SINK


SOURCE = ConnectorKind(ConnectorType.SOURCE, SOURCE_CONNECTOR_CONFIG_DEF, SourceConnectorConfig.parse)
SINK = ConnectorKind(ConnectorType.SINK, SINK_CONNECTOR_CONFIG_DEF, SinkConnectorConfig.parse)


def kind_of(cls: type) -> ConnectorKind:
    return SINK if connector_type(cls) is ConnectorType.SINK else SOURCE


def kind_of_config(config: Mapping[str, str] | None) -> ConnectorKind:
    """The kind of a stored connector config. A class that cannot be loaded counts as a source
    (the kind a config without any other sign is taken for); its start then fails visibly."""
    try:
        return kind_of(connector_class_of(config or {}))
    except (ConfigException, TypeError):
        return SOURCE


def _sink_connector(config: Mapping[str, str] | None) -> SinkConnector | None:
    try:
        cls = connector_class_of(config or {})
    except (ConfigException, TypeError):
        return None
    return cast(SinkConnector, cls()) if kind_of(cls).is_sink else None


def uses_exactly_once_startup(config: Mapping[str, str] | None) -> bool:
    """Whether this connector config's tasks go through the exactly-once start-up (given a worker
    with exactly-once enabled): every source, and sinks that deliver exactly once with it."""
    if not kind_of_config(config).is_sink:
        return True
    connector = _sink_connector(config)
    return connector is not None and connector.exactly_once_delivery(dict(config or {}))


def fencing_producer_config(worker_props: Mapping[str, str], config: Mapping[str, str]) -> dict[str, Any]:
    """The producer settings zombie fencing uses for this connector.

    A source connector's zombies are fenced by its *admin* principal, as KIP-618 says (Kafka
    Connect calls `Admin.fenceProducers` with the connector's admin client): librdkafka has no such
    call, so a producer initialises each transactional id, but it connects as the admin client
    would (`admin.override.*` over the worker's `admin.*` over its top-level settings), and so needs
    exactly the admin principal's Write and Describe on the tasks' TransactionalIds. A sink that
    delivers exactly once fences with its transactional producers' cluster and principal (a mirror
    sink's target cluster, say).
    """
    connector = _sink_connector(config)
    if connector is not None:
        target = connector.transaction_target_config(config, worker_props)
        return target if target is not None else dict(client_config("producer", worker_props, config))
    return admin_principal_producer_config(worker_props, config)


def alter_sink_connector_offsets(
    config: Mapping[str, str], offsets: Mapping[TopicPartition, int] | None
) -> bool:
    """Give a sink connector its KIP-875 say on altered (or, with None, reset) offsets."""
    connector = _sink_connector(config)
    return connector is not None and connector.alter_offsets(dict(config), offsets)
