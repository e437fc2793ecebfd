"""Clients of the eosconnect REST API: `ConnectClient` (httpx) and the `connectors` / `plugins` CLI."""

from eosconnect.clients.rest import ConnectClient, ConnectError

__all__ = ["ConnectClient", "ConnectError"]
