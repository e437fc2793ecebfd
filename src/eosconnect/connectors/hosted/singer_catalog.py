"""`SingerSource`'s settings and the catalog it gives a tap: `--discover`'s, with the chosen streams
selected and their replication set.

A selected stream is replicated INCREMENTAL with its replication key: the one named in
`singer.replication.keys`, else the first of the tap's `valid-replication-keys`, else its single
key property; a stream with none of these (or one the tap forces to FULL_TABLE) is FULL_TABLE,
read whole at every sync.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.errors import ConfigException
from eosconnect.api.validators import NonEmptyString, ValidString
from eosconnect.connectors.hosted.executables import DEFAULT_VENV_DIR
from eosconnect.connectors.hosted.sync_settings import sync_settings

__all__ = ["CONFIG_DEF", "Selected", "select_streams"]

TAP = "singer.tap"
TAP_CONFIG = "singer.config"
STREAMS = "singer.streams"
TOPIC_PREFIX = "topic.prefix"
VENV_DIR = "singer.venv.dir"
REPLICATION_KEYS = "singer.replication.keys"
CATALOG_FLAG = "singer.catalog.flag"
SCHEMALESS = "singer.schemaless"
SYNC_INTERVAL = "singer.sync.interval.ms"
BATCH_SIZE = "singer.batch.size"
TASK_CATALOG = "singer.task.catalog"
TASK_INDEX = "singer.task.index"

CONFIG_DEF = (
    ConfigDef()
    .define(
        TAP,
        ConfigType.STRING,
        importance=Importance.HIGH,
        documentation=(
            "The Singer tap: a package name (`pipelinewise-tap-postgres`, run as `tap-postgres` from its "
            f"venv under `{VENV_DIR}`, the worker's environment or PATH) or the path of an executable."
        ),
        validator=NonEmptyString(),
    )
    .define(
        TAP_CONFIG,
        ConfigType.PASSWORD,
        "{}",
        Importance.HIGH,
        "The tap's config as a JSON object (given as `--config`); secrets may be config-provider variables.",
    )
    .define(
        STREAMS,
        ConfigType.LIST,
        "",
        Importance.HIGH,
        "The streams to read (`tap_stream_id`s or stream names), comma-separated; all when empty.",
    )
    .define(
        TOPIC_PREFIX,
        ConfigType.STRING,
        importance=Importance.HIGH,
        documentation="Records of stream S (its `tap_stream_id`) go to topic `<topic.prefix>.S`.",
        validator=NonEmptyString(),
    )
    .define(
        VENV_DIR,
        ConfigType.STRING,
        DEFAULT_VENV_DIR,
        Importance.LOW,
        "A directory of virtual environments, one per tap package, where a package name is looked for first.",
    )
    .define(
        REPLICATION_KEYS,
        ConfigType.LIST,
        "",
        Importance.MEDIUM,
        "`stream:column` pairs choosing a stream's replication key (INCREMENTAL) where the tap does not.",
    )
    .define(
        CATALOG_FLAG,
        ConfigType.STRING,
        "--catalog",
        Importance.LOW,
        "How the tap takes its catalog: `--catalog` (singer-sdk and most taps) or `--properties` "
        "(older taps).",
        ValidString(["--catalog", "--properties"]),
    )
).merge(
    sync_settings(
        schemaless=SCHEMALESS, sync_interval=SYNC_INTERVAL, batch_size=BATCH_SIZE, stream_schema="SCHEMA"
    )
)


class Selected:
    """One selected stream of the catalog: its id, key properties and replication key."""

    def __init__(self, entry: Mapping[str, Any]) -> None:
        self.entry = entry
        self.stream_id: str = entry.get("tap_stream_id") or entry["stream"]
        root = _root(entry)
        self.key_properties: list[str] = list(
            root.get("table-key-properties") or entry.get("key_properties") or []
        )
        self.replication_key: str | None = root.get("replication-key")
        self.incremental = root.get("replication-method") == "INCREMENTAL"


def _root(entry: Mapping[str, Any]) -> dict[str, Any]:
    for item in entry.get("metadata") or []:
        if item.get("breadcrumb") == []:
            meta: dict[str, Any] = item.setdefault("metadata", {})
            return meta
    meta = {}
    entry.setdefault("metadata", []).append({"breadcrumb": [], "metadata": meta})  # type: ignore[attr-defined]
    return meta


def _keys(pairs: Sequence[str]) -> dict[str, str]:
    keys = {}
    for pair in pairs:
        stream, sep, column = pair.rpartition(":")
        if not sep or not stream or not column:
            raise ConfigException.for_field(REPLICATION_KEYS, f"{pair!r} is not `stream:column`")
        keys[stream] = column
    return keys


def select_streams(
    catalog: Mapping[str, Any], wanted: Sequence[str], replication_keys: Sequence[str]
) -> dict[str, Any]:
    """The catalog with only the wanted streams, selected and with their replication set."""
    keys = _keys(replication_keys)
    entries = list(catalog.get("streams") or [])
    by_name: dict[str, dict[str, Any]] = {}
    for entry in entries:
        by_name[entry.get("tap_stream_id") or entry["stream"]] = entry
        by_name.setdefault(entry["stream"], entry)
    unknown = [w for w in wanted if w not in by_name]
    if unknown:
        ids = sorted(e.get("tap_stream_id") or e["stream"] for e in entries)
        raise ConfigException.for_field(
            STREAMS,
            f"the tap has no stream {', '.join(map(repr, unknown))}; its streams are {', '.join(ids)}",
        )
    chosen = [by_name[w] for w in wanted] if wanted else entries
    selected = []
    for original in chosen:
        entry = copy.deepcopy(original)
        stream_id = entry.get("tap_stream_id") or entry["stream"]
        root = _root(entry)
        root["selected"] = True
        key_props = root.get("table-key-properties") or entry.get("key_properties") or []
        key = (
            keys.get(stream_id)
            or keys.get(entry["stream"])
            or (root.get("valid-replication-keys") or [None])[0]
            or (key_props[0] if len(key_props) == 1 else None)
        )
        forced = root.get("forced-replication-method")
        if key and forced in (None, "INCREMENTAL"):
            root["replication-method"] = "INCREMENTAL"
            root["replication-key"] = key
        else:
            root["replication-method"] = forced or "FULL_TABLE"
        for item in entry.get("metadata") or []:
            if item.get("breadcrumb") and item.get("metadata", {}).get("inclusion") != "unsupported":
                item["metadata"]["selected"] = True
        selected.append(entry)
    if not selected:
        raise ConfigException.for_field(STREAMS, "the tap discovered no streams")
    return {"streams": selected}
