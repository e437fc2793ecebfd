"""Loading plugins by name: connectors (`connector.class`), converters' and transforms' class paths,
`plugin.path`, and the worker's config providers.

`loading` finds classes (short names, entry points, Python paths) and refuses modules that are not
plugins; `config_providers` resolves `${provider:path:key}` variables (KIP-297).
"""

from eosconnect.plugins.loading import (
    BUILTIN_CONNECTORS,
    ENTRY_POINT_GROUP,
    ConnectorType,
    available_connectors,
    connector_type,
    import_class,
    register_connector,
    resolve_connector_class,
    unregister_connector,
)

__all__ = [
    "BUILTIN_CONNECTORS",
    "ENTRY_POINT_GROUP",
    "ConnectorType",
    "available_connectors",
    "connector_type",
    "import_class",
    "register_connector",
    "resolve_connector_class",
    "unregister_connector",
]
