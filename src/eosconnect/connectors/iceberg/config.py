"""IcebergSink's settings: Iceberg's Kafka Connect sink names, `iceberg.catalog.*` as PyIceberg's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eosconnect.api.config import NO_DEFAULT, ConfigDef, ConfigType, Importance
from eosconnect.api.errors import ConfigException
from eosconnect.connectors.lake.config import COMMIT_INTERVAL_MS, LAKE_CONFIG_DEF

__all__ = [
    "CATALOG_PREFIX",
    "CONFIG_DEF",
    "IcebergSettings",
    "catalog_properties",
    "cross_field_errors",
    "parse_settings",
]

#: Every `iceberg.catalog.<key>` setting is the PyIceberg catalog property `<key>`.
CATALOG_PREFIX = "iceberg.catalog."
#: Iceberg's name for the commit interval; when set, it wins over commit.interval.ms.
ICEBERG_COMMIT_INTERVAL = "iceberg.control.commit.interval-ms"

CONFIG_DEF = (
    ConfigDef()
    .define(
        "iceberg.tables",
        ConfigType.LIST,
        NO_DEFAULT,
        Importance.HIGH,
        "The destination tables as namespace.table, comma-separated; every record goes to each, "
        "or with iceberg.tables.route-field to the one its field names.",
        group="Tables",
    )
    .define(
        "iceberg.catalog",
        ConfigType.STRING,
        "iceberg",
        Importance.MEDIUM,
        "The catalog's name, as Iceberg's sink and Spark name it (a SQL catalog keeps it in every row).",
        group="Catalog",
    )
    .define(
        CATALOG_PREFIX + "type",
        ConfigType.STRING,
        "",
        Importance.HIGH,
        "sql (a catalog in a database: SQLite or PostgreSQL) or rest. Every other iceberg.catalog.<key> "
        "is the PyIceberg catalog property <key> (e.g. s3.endpoint, credential).",
        group="Catalog",
    )
    .define(
        CATALOG_PREFIX + "uri",
        ConfigType.STRING,
        "",
        Importance.HIGH,
        "sql: an SQLAlchemy URL (sqlite:////path/catalog.db, postgresql+psycopg://user@host/db); "
        "rest: the catalog's URL.",
        group="Catalog",
    )
    .define(
        CATALOG_PREFIX + "warehouse",
        ConfigType.STRING,
        "",
        Importance.HIGH,
        "Where new tables' files go (file:///path/warehouse, s3://bucket/path); needed by sql.",
        group="Catalog",
    )
    .define(
        "iceberg.tables.route-field",
        ConfigType.STRING,
        "",
        Importance.MEDIUM,
        "A value field naming the record's table (one of iceberg.tables).",
        group="Tables",
    )
    .define(
        "iceberg.tables.dynamic-enabled",
        ConfigType.BOOLEAN,
        False,
        Importance.LOW,
        "Route to any table the route field names. Not supported: set the tables in iceberg.tables.",
        group="Tables",
    )
    .define(
        "iceberg.tables.auto-create-enabled",
        ConfigType.BOOLEAN,
        False,
        Importance.MEDIUM,
        "Create a missing table (and namespace) from the first records' schema.",
        group="Tables",
    )
    .define(
        "iceberg.tables.evolve-schema-enabled",
        ConfigType.BOOLEAN,
        False,
        Importance.MEDIUM,
        "Add columns for new fields and widen types as Iceberg allows (int to long, float to double, "
        "a decimal's precision); without it fields the table lacks are not written.",
        group="Tables",
    )
    .define(
        "iceberg.tables.default-partition-by",
        ConfigType.LIST,
        [],
        Importance.LOW,
        "Identity partition columns of tables the sink creates.",
        group="Tables",
    )
    .define(
        "iceberg.tables.upsert-mode-enabled",
        ConfigType.BOOLEAN,
        False,
        Importance.MEDIUM,
        "Upsert by the id columns (and delete on a tombstone, a Debezium delete or the cdc field's D) "
        "instead of appending.",
        group="Tables",
    )
    .define(
        "iceberg.tables.default-id-columns",
        ConfigType.LIST,
        [],
        Importance.MEDIUM,
        "The columns identifying a row (the upsert key).",
        group="Tables",
    )
    .define(
        "iceberg.tables.cdc-field",
        ConfigType.STRING,
        "",
        Importance.LOW,
        "A value field holding the operation (I, U or D; Debezium's c, r, u, d); default: the Debezium "
        "envelope's op, or __op of a flattened record.",
        group="Tables",
    )
    .define(
        ICEBERG_COMMIT_INTERVAL,
        ConfigType.LONG,
        None,
        Importance.LOW,
        "Iceberg's name for commit.interval.ms; when set, it is the commit interval.",
        group="Commits",
    )
    .merge(LAKE_CONFIG_DEF)
)


@dataclass(frozen=True)
class IcebergSettings:
    """The parsed, cross-checked settings."""

    values: Mapping[str, Any]
    tables: tuple[str, ...]
    route_field: str
    auto_create: bool
    evolve: bool
    partition_by: tuple[str, ...]
    upsert: bool
    id_columns: tuple[str, ...]
    cdc_field: str
    catalog_name: str
    catalog: dict[str, str]


def _items(values: list[str]) -> tuple[str, ...]:
    return tuple(v.strip() for v in values if v.strip())


def catalog_properties(config: Mapping[str, str]) -> dict[str, str]:
    """The PyIceberg catalog properties: `iceberg.catalog.type=sql` is `type=sql`, and so on."""
    return {k[len(CATALOG_PREFIX) :]: str(v) for k, v in config.items() if k.startswith(CATALOG_PREFIX)}


def cross_field_errors(values: Mapping[str, Any], config: Mapping[str, str]) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    tables = _items(values["iceberg.tables"])
    bad = [t for t in tables if "." not in t]
    if not tables or bad:
        errors["iceberg.tables"] = [
            f"{bad[0] if bad else '(empty)'!r} is not namespace.table: name each table with its namespace "
            "(e.g. iceberg.tables=db.events)"
        ]
    if values["iceberg.tables.dynamic-enabled"]:
        errors["iceberg.tables.dynamic-enabled"] = [
            "dynamic routing is not supported by this sink: list the tables in iceberg.tables and route "
            "among them with iceberg.tables.route-field"
        ]
    if values["iceberg.tables.upsert-mode-enabled"] and not _items(
        values["iceberg.tables.default-id-columns"]
    ):
        errors["iceberg.tables.default-id-columns"] = [
            "iceberg.tables.upsert-mode-enabled=true needs the columns a row is matched by: set "
            "iceberg.tables.default-id-columns (e.g. id)"
        ]
    catalog = catalog_properties(config)
    kind = catalog.get("type", "")
    if kind not in ("sql", "rest"):
        errors[CATALOG_PREFIX + "type"] = [
            f"{kind or '(unset)'!r}: set iceberg.catalog.type=sql (with iceberg.catalog.uri, e.g. "
            "sqlite:////path/catalog.db, and iceberg.catalog.warehouse, e.g. file:///path/warehouse) or "
            "iceberg.catalog.type=rest (with iceberg.catalog.uri)"
        ]
    elif not catalog.get("uri"):
        errors[CATALOG_PREFIX + "uri"] = [f"iceberg.catalog.type={kind} needs iceberg.catalog.uri"]
    elif kind == "sql" and not catalog.get("warehouse"):
        errors[CATALOG_PREFIX + "warehouse"] = [
            "iceberg.catalog.type=sql needs iceberg.catalog.warehouse (e.g. file:///path/warehouse)"
        ]
    return errors


def parse_settings(config: Mapping[str, str]) -> IcebergSettings:
    values = CONFIG_DEF.parse({k: v for k, v in config.items() if k in CONFIG_DEF})
    errors = cross_field_errors(values, config)
    if errors:
        raise ConfigException(errors=errors)
    return IcebergSettings(
        values=values,
        tables=_items(values["iceberg.tables"]),
        route_field=str(values["iceberg.tables.route-field"]).strip(),
        auto_create=bool(values["iceberg.tables.auto-create-enabled"]),
        evolve=bool(values["iceberg.tables.evolve-schema-enabled"]),
        partition_by=_items(values["iceberg.tables.default-partition-by"]),
        upsert=bool(values["iceberg.tables.upsert-mode-enabled"]),
        id_columns=_items(values["iceberg.tables.default-id-columns"]),
        cdc_field=str(values["iceberg.tables.cdc-field"]).strip(),
        catalog_name=str(values["iceberg.catalog"]),
        catalog=catalog_properties(config),
    )


def lake_config(config: Mapping[str, str]) -> dict[str, str]:
    """The config with Iceberg's commit interval as `commit.interval.ms`, when it is set."""
    result = dict(config)
    if config.get(ICEBERG_COMMIT_INTERVAL):
        result[COMMIT_INTERVAL_MS] = config[ICEBERG_COMMIT_INTERVAL]
    return result
