"""Connector config validation for create, update and `.../config/validate` (KIP-618 pre-flight).

Sources and sinks have different framework settings and pre-flight checks (their `ConnectorKind`):
a source's exactly-once settings are checked against the worker and the connector; a sink must
name its topics (exactly one of `topics`/`topics.regex`) and must not carry source-only settings.

The result is Kafka Connect's ConfigInfos body: one entry per setting (the framework's and the
connector's), each with its errors, so a UI can show every problem next to its field at once.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eosconnect.api.config import ConfigDef, ConfigValue
from eosconnect.api.connector import Connector
from eosconnect.api.errors import ConfigException
from eosconnect.api.sink import TRANSACTION_PRODUCER_CONFIG, SinkConnector, sink_topics_errors
from eosconnect.api.source import ConnectorTransactionBoundaries, ExactlyOnceSupport, SourceConnector
from eosconnect.cluster.connector_kinds import SOURCE, ConnectorKind, kind_of
from eosconnect.cluster.framework_settings import (
    framework_config_def,
    framework_definitions,
    framework_errors,
)
from eosconnect.cluster.herder_api import BadRequestError, NotFoundError
from eosconnect.cluster.names import tasks_max_errors
from eosconnect.converters.resolution import resolve_converter_class
from eosconnect.plugins.config_providers import resolve_config, unresolvable_variables
from eosconnect.plugins.loading import VERSION_SETTING, resolve_connector_class
from eosconnect.policies.database_hosts import database_host_errors
from eosconnect.policies.file_access import FILE_ALLOWED_DIRS, AllowedDirs
from eosconnect.runtime.config import SOURCE_ONLY_SETTINGS
from eosconnect.transforms.chain import resolve_predicate_class, resolve_transformation_class
from eosconnect.worker_config import WorkerConfig


def exactly_once_preflight(
    connector: SourceConnector, config: Mapping[str, str], worker: WorkerConfig
) -> dict[str, list[str]]:
    """KIP-618 "REST API pre-flight validation", worded as the KIP words it."""
    errors: dict[str, list[str]] = {}
    if config.get("exactly.once.support", "requested").strip().lower() == "required":
        if not worker.exactly_once_enabled:
            errors.setdefault("exactly.once.support", []).append(
                "This worker does not have exactly-once source support enabled "
                "(exactly.once.source.support=enabled), so exactly-once delivery cannot be required; set "
                "exactly.once.support to requested or enable exactly-once support on every worker."
            )
        support = connector.exactly_once_support(dict(config))
        if support is None:
            errors.setdefault("exactly.once.support", []).append(
                "The connector does not say whether it provides exactly-once delivery guarantees with this "
                "configuration. Consult its documentation carefully before proceeding, and possibly set "
                "exactly.once.support to requested."
            )
        elif support == ExactlyOnceSupport.UNSUPPORTED:
            errors.setdefault("exactly.once.support", []).append(
                "The connector does not provide exactly-once delivery guarantees with this configuration."
            )
    if config.get("transaction.boundary", "poll").strip().lower() == "connector":
        boundaries = connector.can_define_transaction_boundaries(dict(config))
        if boundaries != ConnectorTransactionBoundaries.SUPPORTED:
            errors.setdefault("transaction.boundary", []).append(
                "The connector does not support defining its own transaction boundaries with this "
                "configuration; set transaction.boundary to poll or interval instead."
            )
    return errors


def sink_preflight(
    config: Mapping[str, str], worker: WorkerConfig, connector: SinkConnector | None = None
) -> dict[str, list[str]]:
    """A sink needs its topics, exactly-once source settings make no sense on it, and exactly-once
    delivery (KIP-656) needs the worker's fencing and transactional ids."""
    errors = sink_topics_errors(config)
    if (
        connector is not None
        and connector.exactly_once_delivery(dict(config))
        and not worker.exactly_once_enabled
    ):
        errors.setdefault(TRANSACTION_PRODUCER_CONFIG, []).append(
            f"{TRANSACTION_PRODUCER_CONFIG}=true asks for exactly-once delivery, which needs zombie fencing "
            "and transactional ids from the worker, but this worker has "
            f"exactly.once.source.support={worker.exactly_once_source_support.value}. Set "
            "exactly.once.source.support=enabled on every worker, or set "
            f"{TRANSACTION_PRODUCER_CONFIG}=false for at-least-once delivery."
        )
    for name in SOURCE_ONLY_SETTINGS:
        if config.get(name) is not None:
            errors.setdefault(name, []).append(
                f"is a source connector setting (exactly-once source support, KIP-618); sink connectors "
                f"deliver at least once and do not take it. Remove {name} from this sink's config."
            )
    return errors


def _validate_resolved(connector: Connector, config: Mapping[str, str], worker: Mapping[str, Any]) -> Any:
    """The connector validates the values its tasks will see (a password from a config provider
    can be tried), and the answer shows the placeholders, never a resolved value."""
    results = connector.validate(resolve_config(config, worker))
    for result in results or []:
        raw = config.get(result.name)
        if isinstance(raw, str) and "${" in raw:
            result.value = raw
    return results


def file_confinement_errors(
    connector: Connector, config: Mapping[str, str], worker: WorkerConfig
) -> dict[str, list[str]]:
    """FileStream connectors read and write any file the worker can (Kafka removed them from the
    default plugin path in 3.2 for that reason). With the worker's `file.allowed.dirs` set, their
    `file` must lie inside one of those directories (after resolving `..` and symbolic links).
    Their tasks check again when they open the file (policies/file_access.py)."""
    from eosconnect.connectors.file_stream import FileStreamSinkConnector, FileStreamSourceConnector

    # A JdbcSource was loaded with its package (and SQLAlchemy) by the plugin loader; importing the
    # package here for any other connector would load SQLAlchemy outside the loader's lock.
    jdbc = sys.modules.get("eosconnect.connectors.jdbc")
    if jdbc is not None and isinstance(connector, jdbc.JdbcSourceConnector):
        # A file-backed database is a file like any other: confined to file.allowed.dirs, checked
        # before the connector's own validation connects (which would create it, or tell whether
        # it exists, anywhere on the worker).
        database = jdbc.sqlite_file(str(config.get("connection.url") or ""))
        allowed = AllowedDirs.parse(worker.originals.get(FILE_ALLOWED_DIRS))
        if database is None or allowed is None or "\x00" in database:
            return {}
        problem = allowed.refusal(database)
        return {"connection.url": [problem]} if problem else {}
    if not isinstance(connector, FileStreamSourceConnector | FileStreamSinkConnector):
        return {}
    target = (config.get("file") or "").strip()
    if not target:
        return {}
    if "\x00" in target:  # os calls raise ValueError on it: a 500 before this check
        return {"file": ["contains a NUL byte, which no file name can; remove it"]}
    allowed = AllowedDirs.parse(worker.originals.get(FILE_ALLOWED_DIRS))
    problem = allowed.refusal(target) if allowed is not None else None
    if problem is None:
        problem = file_shape_problem(target, sink=isinstance(connector, FileStreamSinkConnector))
    return {"file": [problem]} if problem else {}


def mirror_source_preflight(
    connector: Connector, config: Mapping[str, str], worker: WorkerConfig
) -> dict[str, list[str]]:
    """MirrorSource writes offset syncs only on workers with exactly-once source support: an
    explicit `emit.offset-syncs.enabled=true` on another worker asks for what it cannot do."""
    from eosconnect.connectors.mirror_source import MirrorSourceConnector
    from eosconnect.connectors.mirror_syncs import offset_syncs_errors

    if not isinstance(connector, MirrorSourceConnector):
        return {}
    fix = "set exactly.once.source.support=enabled on every worker"
    return offset_syncs_errors(config, worker.exactly_once_enabled, fix)


#: A connector config is one config topic record: librdkafka's producer refuses a message above its
#: `message.max.bytes` (1000000 by default) and the broker one above its own (1048588 by default).
CONFIG_RECORD_LIMIT_BYTES = 1_000_000


def config_size_problem(config: Mapping[str, str]) -> str | None:
    """Why `config` cannot be stored (a 400 naming the limit, where the write failed with a 500)."""
    import json

    size = len(json.dumps({"properties": dict(config)}).encode())
    if size <= CONFIG_RECORD_LIMIT_BYTES - 4096:  # room for the record's key and framing
        return None
    return (
        f"Connector configuration is {size} bytes, but the config topic stores it as one record of at "
        f"most about {CONFIG_RECORD_LIMIT_BYTES} bytes (the Kafka producer's and broker's "
        "message.max.bytes). Move large values out of the config: into a file the connector reads, or "
        "behind a config provider variable"
    )


def file_shape_problem(target: str, *, sink: bool) -> str | None:
    """What makes `target` unusable as a FileStream file, seen from the worker (tasks on executors
    of the same host or shared file system see the same): a directory, a FIFO, a device or socket
    (a read blocks, or never ends), or for a sink a parent directory that does not exist. Found
    here, the connector is refused at validation instead of its tasks failing at run time."""
    import stat

    path = Path(target)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if sink and not path.parent.is_dir():
            return f"the directory {path.parent} does not exist; create it, or pick a file in one that does"
        return None  # a source waits for its file to appear; a sink creates it
    except OSError as exc:
        return f"cannot be used: {exc.strerror}"
    if stat.S_ISDIR(mode):
        return f"{target} is a directory; name a file"
    if not stat.S_ISREG(mode):
        return f"{target} is not a regular file (a FIFO, device or socket); name a regular file"
    return None


def preflight(connector: Connector, config: Mapping[str, str], worker: WorkerConfig) -> dict[str, list[str]]:
    errors = file_confinement_errors(connector, config, worker)
    for name, problems in database_host_errors(config, worker.originals).items():
        errors.setdefault(name, []).extend(problems)
    for name, problems in mirror_source_preflight(connector, config, worker).items():
        errors.setdefault(name, []).extend(problems)
    if isinstance(connector, SourceConnector):
        checks = exactly_once_preflight(connector, config, worker)
    else:
        checks = sink_preflight(config, worker, connector if isinstance(connector, SinkConnector) else None)
    for name, problems in checks.items():
        errors.setdefault(name, []).extend(problems)
    return errors


def key_info(key: Any, group: str | None, order_in_group: int) -> dict[str, Any]:
    """Kafka Connect's ConfigKeyInfo body for one setting definition."""
    return {
        "name": key.name,
        "type": str(key.type),
        "required": key.required,
        "default_value": None if key.required else _text(key.default),
        "importance": str(key.importance),
        "documentation": key.documentation,
        "group": group,
        "order_in_group": order_in_group,
        "width": "NONE",
        "display_name": key.display_name or key.name,
        "dependents": [],
    }


def _value_entry(
    definition: dict[str, Any], value: ConfigValue | None, extra_errors: list[str]
) -> dict[str, Any]:
    errors = [*(value.errors if value is not None else []), *extra_errors]
    return {
        "definition": definition,
        "value": {
            "name": definition["name"],
            "value": _text(value.value) if value is not None else None,
            "recommended_values": [_text(v) for v in value.recommended_values] if value is not None else [],
            "errors": errors,
            "visible": True,
        },
    }


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def described_keys(definitions: list[tuple[Any, str | None]]) -> list[dict[str, Any]]:
    """ConfigKeyInfo bodies with Kafka's `order_in_group`: 1, 2, ... within each group, -1 without one."""
    counters: dict[str | None, int] = {}
    out = []
    for key, group in definitions:
        if group is None:
            order = -1
        else:
            order = counters.get(group, 0) + 1
            counters[group] = order
        out.append(key_info(key, group, order))
    return out


def connector_definitions(connector: Connector) -> ConfigDef:
    """The connector's own ConfigDef; a BadRequestError naming the class if it returns none."""
    definition = connector.config_def()
    if not isinstance(definition, ConfigDef):
        cls = type(connector)
        raise BadRequestError(
            f"{cls.__module__}.{cls.__qualname__}.config_def() must return a ConfigDef that is not None "
            f"(it returned {definition!r})"
        )
    return definition


def plugin_config_infos(plugin: str, version: str | None = None) -> list[dict[str, Any]]:
    """`GET /connector-plugins/<p>/config[?version=<range>]`, as Kafka Connect answers it: a
    connector's own settings followed by the framework's it does not redefine; a converter's,
    transformation's or predicate's own settings. NotFoundError for a name that is no plugin, or a
    connector none of whose installed versions is in `version`."""
    try:
        cls = resolve_connector_class(plugin)
    except ConfigException as exc:
        own = _other_plugin_def(plugin)
        if own is None:
            raise NotFoundError(f"Unknown plugin {plugin}. {exc}") from None
        return described_keys([(key, key.group) for key in own])
    try:
        cls = resolve_connector_class(plugin, version)
    except ConfigException as exc:
        raise NotFoundError(f"Unknown version of plugin {plugin}: {exc}") from None
    connector = cls()
    own = connector_definitions(connector)
    keys: list[tuple[Any, str | None]] = [(key, key.group) for key in own]
    keys += [(key, group) for key, group in framework_definitions(kind_of(cls)) if key.name not in own]
    return described_keys(keys)


def _other_plugin_def(plugin: str) -> ConfigDef | None:
    """The ConfigDef of a converter, transformation or predicate named `plugin`, if it is one."""
    for resolve in (resolve_converter_class, resolve_transformation_class, resolve_predicate_class):
        try:
            definition = resolve(plugin)().config_def()
        except (ConfigException, TypeError):
            continue
        return definition if isinstance(definition, ConfigDef) else ConfigDef()
    return None


def validate_connector_config(config: Mapping[str, str], worker: WorkerConfig) -> dict[str, Any]:
    """ConfigInfos for `config`: framework settings, connector settings and pre-flight checks."""
    class_name = config.get("connector.class", "")
    extra: dict[str, list[str]] = {}
    connector_def = ConfigDef()
    connector: Connector | None = None
    kind: ConnectorKind = SOURCE
    if class_name:
        try:
            cls = resolve_connector_class(class_name)
            with contextlib.suppress(ConfigException):  # a range nothing is in: framework_errors says so
                cls = resolve_connector_class(class_name, config.get(VERSION_SETTING))
            kind = kind_of(cls)
            connector = cls()
        except ConfigException as exc:
            extra["connector.class"] = [str(exc)]
        except TypeError as exc:
            extra["connector.class"] = [f"{class_name!r} is neither a source nor a sink connector: {exc}"]
    if connector is not None:
        connector_def = connector_definitions(connector)
    too_many = tasks_max_errors(config, worker.originals, None)
    if too_many:
        extra["tasks.max"] = too_many
    for name, errors in framework_errors(config, kind).items():
        extra.setdefault(name, []).extend(errors)
    unresolved = unresolvable_variables(config, worker.originals)
    for name, errors in unresolved.items():
        extra.setdefault(name, []).extend(errors)
    if connector is not None:
        for name, errors in preflight(connector, config, worker).items():
            extra.setdefault(name, []).extend(errors)
    framework = framework_config_def(kind)
    framework_values = {v.name: v for v in framework.validate(config)}
    # A config refused for what it names (a file, a database file outside file.allowed.dirs) is
    # not handed to the connector's own validation, which would open it.
    opens_refused = any(extra.get(k) for k in ("file", "connection.url", "database.hostname"))
    checked = (
        _validate_resolved(connector, config, worker.originals)
        if connector is not None and not opens_refused and not unresolved
        else None
    )
    connector_values = {
        v.name: v for v in (checked if checked is not None else connector_def.validate(config))
    }
    for values, definition in ((framework_values, framework), (connector_values, connector_def)):
        for name, value in values.items():  # cross-setting checks on names no definition has
            if value.errors and name not in definition and name not in framework:
                extra.setdefault(name, []).extend(value.errors)
    definitions: list[tuple[Any, str | None]] = list(framework_definitions(kind))
    definitions += [(key, key.group) for key in connector_def if key.name not in framework]
    configs: list[dict[str, Any]] = []
    for info in described_keys(definitions):
        name = info["name"]
        value = framework_values.get(name) if name in framework else connector_values.get(name)
        configs.append(_value_entry(info, value, extra.pop(name, [])))
    for name, errors in extra.items():  # errors for settings no definition describes
        configs.append(
            {
                "definition": None,
                "value": {
                    "name": name,
                    "value": config.get(name),
                    "recommended_values": [],
                    "errors": errors,
                    "visible": True,
                },
            }
        )
    error_count = sum(len(c["value"]["errors"]) for c in configs)
    groups = list(
        dict.fromkeys(info["group"] for info in (c["definition"] for c in configs) if info and info["group"])
    )
    return {"name": class_name, "error_count": error_count, "groups": groups, "configs": configs}


def config_errors(infos: Mapping[str, Any]) -> dict[str, list[str]]:
    """Just the errors of a ConfigInfos body, by setting name."""
    return {c["value"]["name"]: list(c["value"]["errors"]) for c in infos["configs"] if c["value"]["errors"]}
