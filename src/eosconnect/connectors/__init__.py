"""Built-in connectors, registered by short name in eosconnect.plugins.loading.BUILTIN_CONNECTORS."""
