"""DeltaSink's settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from eosconnect.api.config import NO_DEFAULT, ConfigDef, ConfigType, Importance
from eosconnect.api.errors import ConfigException
from eosconnect.api.validators import ValidString
from eosconnect.connectors.lake.config import LAKE_CONFIG_DEF

__all__ = ["CONFIG_DEF", "DeltaMode", "DeltaSettings", "cross_field_errors", "parse_settings"]


class DeltaMode(StrEnum):
    APPEND = "append"
    MERGE = "merge"


CONFIG_DEF = (
    ConfigDef()
    .define(
        "delta.table.path",
        ConfigType.STRING,
        NO_DEFAULT,
        Importance.HIGH,
        "The Delta table: a local path or an object-store URI (s3://, gs://, az://); "
        "created on the first commit if missing.",
        group="Table",
    )
    .define(
        "delta.mode",
        ConfigType.STRING,
        "append",
        Importance.HIGH,
        "append: every record is a new row; merge: upsert by delta.merge.keys, deleting on a "
        "tombstone, a Debezium delete or __op=d.",
        ValidString.in_(*(m.value for m in DeltaMode)),
        group="Table",
    )
    .define(
        "delta.merge.keys",
        ConfigType.LIST,
        [],
        Importance.HIGH,
        "The columns identifying a row in merge mode (e.g. id).",
        group="Table",
    )
    .define(
        "delta.partition.by",
        ConfigType.LIST,
        [],
        Importance.MEDIUM,
        "Partition columns of a table the sink creates.",
        group="Table",
    )
    .define(
        "delta.storage.options",
        ConfigType.LIST,
        [],
        Importance.LOW,
        "Object-store settings as key=value items (delta-rs storage options, e.g. AWS_REGION=eu-west-1).",
        group="Table",
    )
    .merge(LAKE_CONFIG_DEF)
)


@dataclass(frozen=True)
class DeltaSettings:
    """The parsed, cross-checked settings."""

    values: Mapping[str, Any]
    path: str
    mode: DeltaMode
    merge_keys: tuple[str, ...]
    partition_by: tuple[str, ...]
    storage_options: dict[str, str]


def _items(values: list[str]) -> tuple[str, ...]:
    return tuple(v.strip() for v in values if v.strip())


def cross_field_errors(values: Mapping[str, Any]) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if values["delta.mode"] == DeltaMode.MERGE and not _items(values["delta.merge.keys"]):
        errors["delta.merge.keys"] = [
            "delta.mode=merge needs the key columns a row is matched by: set delta.merge.keys (e.g. id)"
        ]
    bad = [o for o in _items(values["delta.storage.options"]) if "=" not in o]
    if bad:
        errors["delta.storage.options"] = [f"{bad[0]!r} is not key=value"]
    return errors


def parse_settings(config: Mapping[str, str]) -> DeltaSettings:
    values = CONFIG_DEF.parse({k: v for k, v in config.items() if k in CONFIG_DEF})
    errors = cross_field_errors(values)
    if errors:
        raise ConfigException(errors=errors)
    options = dict(o.split("=", 1) for o in _items(values["delta.storage.options"]))
    return DeltaSettings(
        values=values,
        path=str(values["delta.table.path"]),
        mode=DeltaMode(values["delta.mode"]),
        merge_keys=_items(values["delta.merge.keys"]),
        partition_by=_items(values["delta.partition.by"]),
        storage_options={k.strip(): v.strip() for k, v in options.items()},
    )
