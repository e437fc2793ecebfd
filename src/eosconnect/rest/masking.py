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

import re
from collections.abc import Mapping
from typing import Any

from eosconnect.api.config import ConfigType, Password
from eosconnect.plugins.config_providers import VARIABLE

__all__ = [
    "CLIENT_PASSWORDS",
    "HIDDEN",
    "mask_config",
    "mask_info",
    "mask_status",
    "mask_trace",
    "secret_keys",
    "unmask",
]

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
    from eosconnect.plugins.loading import resolve_connector_class

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


#: `sasl.password=x`, `'sasl.password': 'x'`, `"producer.override.sasl.password": "x"`: a secret
#: setting written out with its value in an error text (a config dict or properties in a message).
_SECRET_ASSIGNMENT = re.compile(
    r"""(?P<key>['"]?[\w.-]*(?:password|secret|sasl\.jaas\.config|basic\.auth\.user\.info|ssl\.keystore\.key"""
    r"""|ssl\.key\.pem|ssl\.truststore\.certificates)['"]?\s*[:=]\s*)"""
    r"""(?P<value>\$\{[^}]*\}|'[^']*'|"[^"]*"|[^\s,;}\])]+)""",
    re.IGNORECASE,
)


def mask_trace(trace: str, config: Mapping[str, Any] | None = None) -> str:
    """A failure's trace with secrets replaced by `[hidden]`: every secret value of the connector's
    `config` (as `mask_config` would hide it) wherever it occurs, and any value written after a
    secret setting's name (`sasl.password=...`, `'connection.password': '...'`): a task's error
    can quote its own settings, resolved from a config provider, which the config does not hold."""
    for key in secret_keys(config or {}):
        value = (config or {}).get(key)
        if isinstance(value, str) and len(value) >= 4 and not _is_variable(value):
            trace = trace.replace(value, HIDDEN)

    def hide(match: re.Match[str]) -> str:
        value = match.group("value")
        quote = value[0] if value[:1] in ("'", '"') else ""
        if value.strip("'\"") in ("", HIDDEN) or _is_variable(value.strip("'\"")):
            return match.group(0)
        return f"{match.group('key')}{quote}{HIDDEN}{quote}"

    return _SECRET_ASSIGNMENT.sub(hide, trace)


def mask_status(status: Any, config: Mapping[str, Any] | None = None) -> Any:
    """A status answer (a connector's `{"connector": ..., "tasks": [...]}` or one task's entry) with
    each `trace` passed through `mask_trace`."""
    if isinstance(status, list):
        return [mask_status(item, config) for item in status]
    if not isinstance(status, dict):
        return status
    out = dict(status)
    if isinstance(out.get("trace"), str):
        out["trace"] = mask_trace(out["trace"], config)
    for key in ("connector", "tasks"):
        if key in out:
            out[key] = mask_status(out[key], config)
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
