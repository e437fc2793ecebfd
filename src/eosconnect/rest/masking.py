"""Secrets in connector configs shown as `[hidden]` in REST answers, as Kafka masks PASSWORD settings.

A setting is a secret when the connector's ConfigDef types it PASSWORD (`connection.password`), or
when it is one of the client settings Kafka types `Password` (`sasl.password`, `sasl.jaas.config`,
`ssl.key.password`, ...) under any prefix (`producer.override.`, `target.cluster.`,
`source.cluster.`, `consumer.`, ...), or whose name ends in `password` (for a class that cannot be
loaded). A value that is only a config provider variable
(`${file:/etc/secrets/db.properties:password}`, KIP-297) is no secret and stays readable: that is
what providers are for.

The config topic keeps the values as given; only what the REST API answers is masked. A config
sent back with `[hidden]` for a secret the connector already has keeps the stored value (`unmask`),
so a GET-edit-PUT round trip does not overwrite the password with the mask.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eosconnect.api.config import ConfigType, Password
from eosconnect.api.config_providers import VARIABLE

__all__ = ["CLIENT_PASSWORDS", "HIDDEN", "mask_config", "mask_info", "secret_keys", "unmask"]

HIDDEN = Password.HIDDEN
#: Kafka's client settings of type Password, and librdkafka's own secrets of the same kind.
CLIENT_PASSWORDS = frozenset(
    {
        "sasl.password",
        "sasl.jaas.config",
        "sasl.oauthbearer.client.secret",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "ssl.keystore.key",
        "ssl.truststore.certificates",
        "ssl.key.pem",
        "basic.auth.user.info",
    }
)


def _connector_passwords(config: Mapping[str, Any]) -> set[str]:
    from eosconnect.api.plugins import resolve_connector_class

    try:
        definition = resolve_connector_class(str(config.get("connector.class") or ""))().config_def()
    except Exception:  # an unknown class: the client settings are still masked
        return set()
    return {name for name, key in definition.keys.items() if key.type is ConfigType.PASSWORD}


def secret_keys(config: Mapping[str, Any]) -> set[str]:
    """The keys of `config` whose values are secrets (see the module documentation)."""
    typed = _connector_passwords(config)
    return {
        key
        for key in config
        if key in typed
        or key.endswith("password")  # a class that cannot be loaded still has its secrets masked
        or any(key == s or key.endswith(f".{s}") for s in CLIENT_PASSWORDS)
    }


def _is_variable(value: Any) -> bool:
    return isinstance(value, str) and VARIABLE.fullmatch(value.strip()) is not None


def mask_config(config: Mapping[str, Any], secrets: set[str] | None = None) -> dict[str, Any]:
    """`config` with each secret value replaced by `[hidden]` (variables and empty values kept)."""
    keys = secret_keys(config) if secrets is None else secrets
    return {
        k: HIDDEN if k in keys and v not in (None, "") and not _is_variable(v) else v
        for k, v in config.items()
    }


def mask_info(info: Any, connector_config: Mapping[str, Any] | None = None) -> Any:
    """A REST answer holding configs (connector info `{"config": ...}`, task infos `[{"config":
    ...}]`, a map of expansions), masked where it holds them; the connector's own config tells
    which keys its class types PASSWORD when a task config does not name the class."""
    if isinstance(info, list):
        return [mask_info(item, connector_config) for item in info]
    if not isinstance(info, dict):
        return info
    out = dict(info)
    if isinstance(out.get("config"), dict):
        config = out["config"]
        keys = secret_keys({**(connector_config or {}), **config}) & set(config)
        out["config"] = mask_config(config, keys)
    if isinstance(out.get("info"), dict):
        out["info"] = mask_info(out["info"], connector_config)
    return out


def unmask(new: Mapping[str, Any], stored: Mapping[str, Any] | None) -> dict[str, Any]:
    """`new` with each `[hidden]` secret the stored config has replaced by the stored value."""
    result = dict(new)
    if not stored:
        return result
    for key in secret_keys(result):
        if result.get(key) == HIDDEN and key in stored:
            result[key] = stored[key]
    return result
