"""Connector config validation for create, update and `.../config/validate` (KIP-618 pre-flight).

Sources and sinks have different framework settings and pre-flight checks (their `ConnectorKind`):
a source's exactly-once settings are checked against the worker and the connector; a sink must
name its topics (exactly one of `topics`/`topics.regex`) and must not carry source-only settings.

The result is Kafka Connect's ConfigInfos body: one entry per setting (the framework's and the
connector's), each with its errors, so a UI can show every problem next to its field at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eosconnect.api.config import ConfigDef, ConfigValue
from eosconnect.api.connector import Connector
from eosconnect.api.errors import ConfigException
from eosconnect.api.plugins import resolve_connector_class
from eosconnect.api.sink import TRANSACTION_PRODUCER_CONFIG, SinkConnector, sink_topics_errors
from eosconnect.api.source import ConnectorTransactionBoundaries, ExactlyOnceSupport, SourceConnector
from eosconnect.cluster.connector_kinds import SOURCE, ConnectorKind, kind_of
from eosconnect.cluster.names import tasks_max_errors
from eosconnect.runtime.config import SOURCE_ONLY_SETTINGS, WorkerConfig


def exactly_once_preflight(
    connector: SourceConnector, config: Mapping[str, str], worker: WorkerConfig
) -> dict[str, list[str]]:
    """spec/000 "REST API pre-flight validation", worded as the KIP words it."""
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


def preflight(connector: Connector, config: Mapping[str, str], worker: WorkerConfig) -> dict[str, list[str]]:
    if isinstance(connector, SourceConnector):
        return exactly_once_preflight(connector, config, worker)
    return sink_preflight(config, worker, connector if isinstance(connector, SinkConnector) else None)


def _value_entry(key: Any, value: ConfigValue | None, extra_errors: list[str]) -> dict[str, Any]:
    errors = [*(value.errors if value is not None else []), *extra_errors]
    return {
        "definition": {
            "name": key.name,
            "type": str(key.type),
            "required": key.required,
            "default_value": None if key.required else _text(key.default),
            "importance": str(key.importance),
            "documentation": key.documentation,
            "group": key.group,
            "width": "NONE",
            "display_name": key.display_name or key.name,
            "dependents": [],
            "order": -1,
        },
        "value": {
            "name": key.name,
            "value": _text(value.value) if value is not None else None,
            "recommended_values": list(value.recommended_values) if value is not None else [],
            "errors": errors,
            "visible": True,
        },
    }


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


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
            kind = kind_of(cls)
            connector = cls()
            connector_def = connector.config_def()
        except ConfigException as exc:
            extra["connector.class"] = [str(exc)]
        except TypeError as exc:
            extra["connector.class"] = [f"{class_name!r} is neither a source nor a sink connector: {exc}"]
    too_many = tasks_max_errors(config, worker.originals, None)
    if too_many:
        extra["tasks.max"] = too_many
    if connector is not None:
        for name, errors in preflight(connector, config, worker).items():
            extra.setdefault(name, []).extend(errors)
    framework = ConfigDef(kind.framework_config_def)
    configs: list[dict[str, Any]] = []
    for definition, prefix_def in ((framework, framework), (connector_def, connector_def)):
        checked = connector.validate(config) if definition is connector_def and connector else None
        values = {v.name: v for v in (checked if checked is not None else definition.validate(config))}
        for name, value in values.items():  # cross-setting checks on names no definition has
            if value.errors and name not in definition and name not in framework:
                extra.setdefault(name, []).extend(value.errors)
        for key in prefix_def:
            if definition is connector_def and key.name in framework:
                continue
            configs.append(_value_entry(key, values.get(key.name), extra.pop(key.name, [])))
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
    return {
        "name": class_name,
        "error_count": error_count,
        "groups": sorted(
            {c["definition"]["group"] for c in configs if c["definition"] and c["definition"]["group"]}
        ),
        "configs": configs,
    }


def config_errors(infos: Mapping[str, Any]) -> dict[str, list[str]]:
    """Just the errors of a ConfigInfos body, by setting name."""
    return {c["value"]["name"]: list(c["value"]["errors"]) for c in infos["configs"] if c["value"]["errors"]}
