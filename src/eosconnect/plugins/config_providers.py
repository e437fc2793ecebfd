"""Config providers (KIP-297): `${provider:path:key}` variables in connector configs, resolved late.

A connector config may say `producer.override.sasl.password=${file:/etc/secrets/orders.properties:password}`
instead of the password: the config topic, `GET /connectors/<c>/config`, status traces and logs keep
the variable, and the value is looked up only where a client or task is built - on the executors for
tasks, on the worker for its own clients (zombie fencing, offsets). The worker declares the
providers as Kafka Connect does:

    config.providers=file,dir,env
    config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider
    config.providers.file.param.allowed.paths=/etc/secrets
    config.providers.dir.class=org.apache.kafka.common.config.provider.DirectoryConfigProvider
    config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider

`FileConfigProvider` reads a Java properties file (path) and returns its keys; `DirectoryConfigProvider`
returns the content of the file `key` in directory `path`; `EnvVarConfigProvider` returns environment
variables (`${env:NAME}`; `allowlist.pattern` limits which). `allowed.paths` confines the first two.
A provider class of one's own is any class with `configure(params)` and `get(path, keys) -> dict`,
named by its import path (`my_package.module.VaultProvider`).
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from eosconnect.api.config_provider import ConfigProvider
from eosconnect.api.errors import ConfigException

__all__ = [
    "DirectoryConfigProvider",
    "EnvVarConfigProvider",
    "FileConfigProvider",
    "providers_of",
    "resolve_config",
    "unresolvable_variables",
]

#: Kafka's ConfigTransformer pattern: ${provider:[path:]key}.
VARIABLE = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")
PROVIDERS_KEY = "config.providers"


class _PathConfined:
    """`allowed.paths`: a comma-separated list of directories the provider may read under."""

    allowed: tuple[Path, ...] = ()

    def configure(self, params: Mapping[str, str]) -> None:
        raw = str(params.get("allowed.paths") or "")
        self.allowed = tuple(Path(p.strip()).resolve() for p in raw.split(",") if p.strip())

    def _checked(self, path: str) -> Path:
        if "\x00" in path:
            raise ConfigException(f"config provider path {path!r} contains a NUL byte")
        resolved = Path(path).resolve()
        if self.allowed and not any(resolved.is_relative_to(d) for d in self.allowed):
            raise ConfigException(
                f"config provider path {path} is outside its allowed.paths "
                f"({', '.join(map(str, self.allowed))})"
            )
        return resolved


class FileConfigProvider(_PathConfined):
    """Kafka's FileConfigProvider: `${file:/path/to/file.properties:key}`."""

    def get(self, path: str, keys: Iterable[str]) -> dict[str, str]:
        import javaproperties

        target = self._checked(path)
        try:
            with target.open(encoding="utf-8") as f:
                props = javaproperties.load(f)
        except OSError as exc:
            raise ConfigException(f"config provider cannot read {path}: {exc.strerror}") from exc
        return {k: props[k] for k in keys if k in props}


class DirectoryConfigProvider(_PathConfined):
    """Kafka's DirectoryConfigProvider: `${dir:/path/to/dir:filename}` is the file's content."""

    def get(self, path: str, keys: Iterable[str]) -> dict[str, str]:
        directory = self._checked(path)
        found = {}
        for key in keys:
            file = directory / key
            if "/" in key or key in ("", ".", "..") or not file.is_file():
                continue
            found[key] = file.read_text(encoding="utf-8")
        return found


class EnvVarConfigProvider:
    """Kafka's EnvVarConfigProvider: `${env:NAME}` (no path); `allowlist.pattern` limits the names."""

    pattern: re.Pattern[str] = re.compile(".*")

    def configure(self, params: Mapping[str, str]) -> None:
        self.pattern = re.compile(str(params.get("allowlist.pattern") or ".*"))

    def get(self, path: str, keys: Iterable[str]) -> dict[str, str]:
        return {k: os.environ[k] for k in keys if k in os.environ and self.pattern.fullmatch(k)}


BUILTIN: dict[str, type] = {}
for _cls in (FileConfigProvider, DirectoryConfigProvider, EnvVarConfigProvider):
    BUILTIN[_cls.__name__] = _cls
    BUILTIN[f"org.apache.kafka.common.config.provider.{_cls.__name__}"] = _cls


def providers_of(worker: Mapping[str, Any]) -> dict[str, ConfigProvider]:
    """The providers the worker's `config.providers` declares, configured with their `param.*`."""
    names = [n.strip() for n in str(worker.get(PROVIDERS_KEY) or "").split(",") if n.strip()]
    providers: dict[str, ConfigProvider] = {}
    for name in names:
        class_key = f"{PROVIDERS_KEY}.{name}.class"
        class_name = str(worker.get(class_key) or "").strip()
        if not class_name:
            raise ConfigException(f"config provider {name!r} has no class: set {class_key}")
        cls = BUILTIN.get(class_name) or _load(class_name, class_key)
        provider = cls()
        prefix = f"{PROVIDERS_KEY}.{name}.param."
        provider.configure({k[len(prefix) :]: str(v) for k, v in worker.items() if k.startswith(prefix)})
        providers[name] = provider
    return providers


def _load(class_name: str, setting: str) -> type:
    module, _, attr = class_name.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigException(f"{setting}={class_name} cannot be loaded: {exc}") from exc


def _lookups(config: Mapping[str, Any]) -> dict[tuple[str, str], set[str]]:
    wanted: dict[tuple[str, str], set[str]] = {}
    for value in config.values():
        if isinstance(value, str) and "${" in value:
            for m in VARIABLE.finditer(value):
                wanted.setdefault((m.group(1), m.group(3) or ""), set()).add(m.group(4))
    return wanted


def _values(
    config: Mapping[str, Any], worker: Mapping[str, Any]
) -> tuple[dict[tuple[str, str, str], str], dict[str, str]]:
    """Found values by (provider, path, key), and why each unresolved variable is not."""
    wanted = _lookups(config)
    if not wanted:
        return {}, {}
    providers = providers_of(worker)
    found: dict[tuple[str, str, str], str] = {}
    problems: dict[str, str] = {}
    for (name, path), keys in wanted.items():
        provider = providers.get(name)
        if provider is None:
            for key in keys:
                problems[_spell(name, path, key)] = (
                    f"no config provider {name!r} (the worker's config.providers is "
                    f"{worker.get(PROVIDERS_KEY) or 'not set'})"
                )
            continue
        try:
            got = provider.get(path, sorted(keys))
        except ConfigException as exc:
            for key in keys:
                problems[_spell(name, path, key)] = str(exc)
            continue
        for key in keys:
            if key in got:
                found[(name, path, key)] = got[key]
            else:
                problems[_spell(name, path, key)] = (
                    f"provider {name!r} has no {key!r} at {path or '(no path)'}"
                )
    return found, problems


def _spell(name: str, path: str, key: str) -> str:
    return f"${{{name}:{path}:{key}}}" if path else f"${{{name}:{key}}}"


def unresolvable_variables(config: Mapping[str, Any], worker: Mapping[str, Any]) -> dict[str, list[str]]:
    """For validation: each setting whose variables cannot be resolved, with why (by variable)."""
    try:
        _found, problems = _values(config, worker)
    except ConfigException as exc:
        return {PROVIDERS_KEY: [str(exc)]}
    errors: dict[str, list[str]] = {}
    for setting, value in config.items():
        if isinstance(value, str) and "${" in value:
            for m in VARIABLE.finditer(value):
                spelled = _spell(m.group(1), m.group(3) or "", m.group(4))
                if spelled in problems:
                    errors.setdefault(setting, []).append(
                        f"{spelled} cannot be resolved: {problems[spelled]}"
                    )
    return errors


def resolve_config(config: Mapping[str, Any], worker: Mapping[str, Any]) -> dict[str, Any]:
    """`config` with its variables replaced by their values; ConfigException (naming the setting
    and variable, never a value) if one cannot be resolved. Call it where the value is used, and
    keep the result out of anything stored, logged or answered."""
    found, problems = _values(config, worker)
    if problems:
        errors = unresolvable_variables(config, worker)
        raise ConfigException(
            "config provider variables cannot be resolved: "
            + "; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items()),
            errors=errors,
        )
    if not found:
        return dict(config)

    def substitute(m: re.Match[str]) -> str:
        return found[(m.group(1), m.group(3) or "", m.group(4))]

    return {
        k: VARIABLE.sub(substitute, v) if isinstance(v, str) and "${" in v else v for k, v in config.items()
    }
