"""Built-in connectors, registered by short name in eosconnect.api.plugins.BUILTIN_CONNECTORS."""
