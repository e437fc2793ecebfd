"""The `ConfigProvider` interface (KIP-297): where `${provider:path:key}` variables in configs are
looked up. The worker's providers (`config.providers=...`) and the built-in file, directory and
environment providers are in `eosconnect.plugins.config_providers`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

__all__ = ["ConfigProvider"]


class ConfigProvider(Protocol):
    """A provider named by `config.providers.<name>.class`: configured once with its
    `config.providers.<name>.param.*` settings, then asked for the keys a config's variables name."""

    def configure(self, params: Mapping[str, str]) -> None: ...

    def get(self, path: str, keys: Iterable[str]) -> dict[str, str]:
        """The values of `keys` found at `path`; keys it does not have are left out."""
        ...
