"""`AirbyteSource`'s settings, the source's `spec` checked against `airbyte.config`, and the
configured catalog built from `discover`.

Each selected stream is read incrementally when the source supports it, with the cursor and
primary key the catalog declares (the source's own when it defines them, else its defaults);
a stream that only supports full refresh is read whole at every sync.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.errors import ConfigException
from eosconnect.api.validators import NonEmptyString
from eosconnect.connectors.hosted.airbyte_protocol import stream_key
from eosconnect.connectors.hosted.executables import DEFAULT_VENV_DIR
from eosconnect.connectors.hosted.sync_settings import sync_settings

__all__ = [
    "CONFIG_DEF",
    "SOURCE",
    "SOURCE_CONFIG",
    "STREAMS",
    "TASK_CATALOG",
    "TOPIC_PREFIX",
    "VENV_DIR",
    "configured_catalog",
    "full_refresh_streams",
    "source_config",
    "spec_errors",
]

SOURCE = "airbyte.source"
SOURCE_CONFIG = "airbyte.config"
STREAMS = "airbyte.streams"
TOPIC_PREFIX = "topic.prefix"
VENV_DIR = "airbyte.venv.dir"
SCHEMALESS = "airbyte.schemaless"
SYNC_INTERVAL = "airbyte.sync.interval.ms"
BATCH_SIZE = "airbyte.batch.size"
#: A task's share of the configured catalog, as JSON (set by the connector, not by users).
TASK_CATALOG = "airbyte.task.catalog"
TASK_INDEX = "airbyte.task.index"

CONFIG_DEF = (
    ConfigDef()
    .define(
        SOURCE,
        ConfigType.STRING,
        importance=Importance.HIGH,
        documentation=(
            "The Airbyte source: a package name (`airbyte-source-faker`, run as `source-faker` from its "
            f"venv under `{VENV_DIR}`, the worker's environment or PATH) or the path of an executable."
        ),
        validator=NonEmptyString(),
    )
    .define(
        SOURCE_CONFIG,
        ConfigType.PASSWORD,
        "{}",
        Importance.HIGH,
        "The source's own config as a JSON object (what its `spec` describes); secrets may be "
        "config-provider variables (`${file:/path:key}`), resolved where the source runs.",
    )
    .define(
        STREAMS,
        ConfigType.LIST,
        "",
        Importance.HIGH,
        "The streams to read, comma-separated (as `discover` names them, `<namespace>.<name>` for a "
        "stream with a namespace); all streams when empty.",
    )
    .define(
        TOPIC_PREFIX,
        ConfigType.STRING,
        importance=Importance.HIGH,
        documentation="Records of stream S go to topic `<topic.prefix>.S`.",
        validator=NonEmptyString(),
    )
    .define(
        VENV_DIR,
        ConfigType.STRING,
        DEFAULT_VENV_DIR,
        Importance.LOW,
        "A directory of virtual environments, one per source package (`<dir>/<package>/bin/...`), where "
        "a package name is looked for first: sources pin dependencies that clash with the worker's.",
    )
).merge(
    sync_settings(
        schemaless=SCHEMALESS, sync_interval=SYNC_INTERVAL, batch_size=BATCH_SIZE, stream_schema="JSON Schema"
    )
)


def source_config(raw: Any) -> dict[str, Any]:
    """`airbyte.config` as a JSON object; a `ConfigException` on the setting otherwise."""
    text = str(raw.value if hasattr(raw, "value") else raw or "{}")
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConfigException.for_field(SOURCE_CONFIG, f"is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ConfigException.for_field(SOURCE_CONFIG, "must be a JSON object")
    return value


def spec_errors(spec: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, list[str]]:
    """`config` checked against the spec's `connectionSpecification`, each error under
    `airbyte.config.<field path>` (the source's own field names)."""
    import jsonschema

    schema = (spec.get("spec") or {}).get("connectionSpecification") or {}
    errors: dict[str, list[str]] = {}
    validator = jsonschema.Draft7Validator(schema)
    for error in sorted(validator.iter_errors(dict(config)), key=lambda e: list(e.path)):
        path = [str(p) for p in error.path]
        if error.validator == "required" and isinstance(error.instance, dict):
            missing = [r for r in error.validator_value if r not in error.instance]
            for name in missing:
                errors.setdefault(".".join([SOURCE_CONFIG, *path, name]), []).append(
                    f"the source requires {name!r} in {SOURCE_CONFIG}"
                )
            continue
        name = ".".join([SOURCE_CONFIG, *path])
        errors.setdefault(name, []).append(error.message[:300])
    return errors


def _incremental(stream: Mapping[str, Any]) -> bool:
    return "incremental" in (stream.get("supported_sync_modes") or [])


def _selected(catalog: Mapping[str, Any], wanted: Sequence[str]) -> list[dict[str, Any]]:
    streams = {
        stream_key(s["name"], s.get("namespace")): s for s in catalog.get("catalog", {}).get("streams", [])
    }
    if not wanted:
        return [streams[k] for k in sorted(streams)]
    unknown = [w for w in wanted if w not in streams]
    if unknown:
        raise ConfigException.for_field(
            STREAMS,
            f"the source has no stream {', '.join(map(repr, unknown))}; "
            f"its streams are {', '.join(sorted(streams))}",
        )
    return [streams[w] for w in wanted]


def full_refresh_streams(catalog: Mapping[str, Any], wanted: Sequence[str]) -> list[str]:
    return [
        stream_key(s["name"], s.get("namespace")) for s in _selected(catalog, wanted) if not _incremental(s)
    ]


def configured_catalog(catalog: Mapping[str, Any], wanted: Sequence[str]) -> list[dict[str, Any]]:
    """The configured streams of the selection, in the protocol's `ConfiguredAirbyteStream` shape."""
    configured = []
    for stream in _selected(catalog, wanted):
        entry: dict[str, Any] = {"stream": stream}
        if _incremental(stream):
            entry["sync_mode"] = "incremental"
            entry["destination_sync_mode"] = "append"
            cursor = stream.get("default_cursor_field") or []
            if cursor:
                entry["cursor_field"] = cursor
        else:
            entry["sync_mode"] = "full_refresh"
            entry["destination_sync_mode"] = "overwrite"
        key = stream.get("source_defined_primary_key") or []
        if key:
            entry["primary_key"] = key
        configured.append(entry)
    return configured


def split_streams(configured: list[dict[str, Any]], tasks: int) -> list[list[dict[str, Any]]]:
    """The streams dealt round-robin over at most `tasks` tasks (no task without a stream)."""
    count = max(1, min(tasks, len(configured)))
    return [configured[i::count] for i in range(count)]
