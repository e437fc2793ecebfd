"""`database.allowed.hosts`: the database servers connectors may reach, a worker setting.

Validating a JDBC or CDC connector connects to the database its config names, and its tasks do so
from the executors: without a limit, anyone who may call the REST API can make the worker connect
to any `host:port` it can reach (validate as a port scanner). As `file.allowed.dirs` confines file
paths and the `Allowlist` override policy (KIP-1188) confines client settings, this confines
database hosts: a comma-separated list of `host` or `host:port` patterns (shell-style wildcards,
`*.db.internal`, `10.0.1.*:5432`); unset, any host is allowed. A connector whose
`connection.url` (JdbcSource, JdbcSink) or `database.hostname`/`database.port` (the CDC sources)
names another host is refused by validation, before anything connects. File-backed databases
(`sqlite:///...`) have no host: `file.allowed.dirs` confines them.

Validation sees only new configs: a connector stored before the setting was set or narrowed would
still connect when a worker starts it. So the runtime checks again, with the worker's current
setting, where connections are made: before a connector starts on the worker and before each task
starts on its executor (`check_database_host`); a refused one fails naming the host and the setting.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

from eosconnect.api.errors import ConfigException, ConnectException
from eosconnect.plugins.config_providers import resolve_config

__all__ = ["DATABASE_ALLOWED_HOSTS", "check_database_host", "database_host_errors"]

DATABASE_ALLOWED_HOSTS = "database.allowed.hosts"
_DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "mariadb": 3306, "mssql": 1433, "oracle": 1521}
#: By a word of the CDC connector's class name (ours and Debezium's).
_CDC_DEFAULT_PORTS = {"postgres": 5432, "mysql": 3306, "mariadb": 3306}


def _patterns(raw: Any) -> list[str] | None:
    if raw is None or not str(raw).strip():
        return None
    return [p.strip().lower() for p in str(raw).split(",") if p.strip()]


def _target(config: Mapping[str, Any]) -> tuple[str, str, int | None] | None:
    """(setting, host, port) of the database the config names; None: no host (or none named)."""
    url_text = str(config.get("connection.url") or "").strip()
    if url_text:
        from sqlalchemy.engine import make_url

        try:
            url = make_url(url_text)
        except Exception:  # the connector's own validation names a malformed URL
            return None
        if not url.host:
            return None
        port = url.port or _DEFAULT_PORTS.get(url.get_backend_name())
        return "connection.url", url.host, port
    host = str(config.get("database.hostname") or "").strip()
    if host:
        port_text = str(config.get("database.port") or "").strip()
        port = int(port_text) if port_text.isdigit() else _cdc_default_port(config)
        return "database.hostname", host, port
    return None


def _cdc_default_port(config: Mapping[str, Any]) -> int | None:
    """The port a CDC source connects to when `database.port` is unset: its database's default
    (the class names PostgreSQL, MySQL or MariaDB), else unknown - only a pattern without a port can
    then match, so an allowed `host:5432` never lets a MySQL source reach that host's 3306."""
    named = str(config.get("connector.class") or "").lower()
    return next((port for database, port in _CDC_DEFAULT_PORTS.items() if database in named), None)


def database_host_errors(config: Mapping[str, Any], worker: Mapping[str, Any]) -> dict[str, list[str]]:
    """{setting: [why]} when the database host the config names is not in the worker's
    `database.allowed.hosts`; {} when it is, when the setting is unset, or the config names none."""
    patterns = _patterns(worker.get(DATABASE_ALLOWED_HOSTS))
    if patterns is None:
        return {}
    try:
        resolved = resolve_config(config, worker)
    except ConfigException:
        return {}  # validation names the unresolvable variable, and connects to nothing
    target = _target(resolved)
    if target is None:
        return {}
    setting, host, port = target
    names = [host.lower()] + ([f"{host.lower()}:{port}"] if port is not None else [])
    if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns for name in names):
        return {}
    shown = f"{host}:{port}" if port is not None else host
    return {
        setting: [
            f"the database host {shown} is not one this worker's connectors may reach "
            f"({DATABASE_ALLOWED_HOSTS}={worker.get(DATABASE_ALLOWED_HOSTS)}); use one of those hosts, or "
            f"ask the operator to add it to {DATABASE_ALLOWED_HOSTS} on every worker"
        ]
    }


def check_database_host(config: Mapping[str, Any], worker: Mapping[str, Any]) -> None:
    """Raise `ConnectException` naming the host and `database.allowed.hosts` when `config` names a
    database host the worker's current setting does not allow (a config stored before it changed)."""
    errors = database_host_errors(config, worker)
    if errors:
        raise ConnectException("; ".join(f"{setting}: {' '.join(why)}" for setting, why in errors.items()))
