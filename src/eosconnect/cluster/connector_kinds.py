"""What differs between source and sink connectors for the worker, in one place.

The herder, the validation and the job launcher ask a connector's `ConnectorKind` instead of
testing for sinks here and there: which framework settings apply, how they are parsed, and
whether tasks go through KIP-618's exactly-once start-up protocol (fencing, transactional ids),
which sinks never do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from eosconnect.api.config import ConfigDef
from eosconnect.api.errors import ConfigException
from eosconnect.api.plugins import ConnectorType, connector_type, resolve_connector_class
from eosconnect.runtime.config import (
    SINK_CONNECTOR_CONFIG_DEF,
    SOURCE_CONNECTOR_CONFIG_DEF,
    SinkConnectorConfig,
    SourceConnectorConfig,
)

__all__ = ["SINK", "SOURCE", "ConnectorKind", "kind_of", "kind_of_config"]


@dataclass(frozen=True)
class ConnectorKind:
    type: ConnectorType
    framework_config_def: ConfigDef
    parse: Callable[[Mapping[str, str]], SourceConnectorConfig | SinkConnectorConfig]
    #: Tasks fence zombies and use transactional ids when the worker has exactly-once enabled.
    exactly_once_startup: bool

    @property
    def is_sink(self) -> bool:
        return self.type is ConnectorType.SINK


SOURCE = ConnectorKind(ConnectorType.SOURCE, SOURCE_CONNECTOR_CONFIG_DEF, SourceConnectorConfig.parse, True)
SINK = ConnectorKind(ConnectorType.SINK, SINK_CONNECTOR_CONFIG_DEF, SinkConnectorConfig.parse, False)


def kind_of(cls: type) -> ConnectorKind:
    return SINK if connector_type(cls) is ConnectorType.SINK else SOURCE


def kind_of_config(config: Mapping[str, str] | None) -> ConnectorKind:
    """The kind of a stored connector config. A class that cannot be loaded any more counts as a
    source (what every connector was before sinks existed); its start then fails visibly."""
    try:
        return kind_of(resolve_connector_class(str((config or {}).get("connector.class", ""))))
    except (ConfigException, TypeError):
        return SOURCE
