"""`JdbcSource`: new rows of database tables into Kafka, exactly once (SQLAlchemy 2).

One module per job: `config` (settings, modes, tables; the connection settings JdbcSink shares),
`database` (engines, reflection, validation against the database), `queries` (the statements per
mode), `schema` and `values` (columns and rows as Kafka Connect schemas and values, timestamps and
numbers in offsets), `task` and `connector`. What the connector does is described in `connector`
(and in docs/connectors.md). The names below are the package's interface; import them from here.
"""

from __future__ import annotations

# SQLAlchemy whole, now: the package is imported under the plugin loader's lock
# (eosconnect.plugins.loading), while the modules below import SQLAlchemy's parts lazily, from threads
# that may run at once (REST validations, packed tasks); a first import of a package with import
# cycles from two threads at once can fail with a partially initialized module.
import sqlalchemy  # noqa: F401

from eosconnect.connectors.jdbc.config import (
    CONFIG_DEF,
    CONNECTION_CONFIG_DEF,
    HEARTBEAT_FIELD,
    INCREMENTING_FIELD,
    TABLE_FIELD,
    TIMESTAMP_FIELD,
    Mode,
    assign_tables,
    connection_config_def,
    table_names,
    timezone_ok,
)
from eosconnect.connectors.jdbc.connector import JdbcSourceConnector
from eosconnect.connectors.jdbc.database import (
    check_config,
    connection_errors,
    connection_lost,
    create_engine_for,
    reflect_table,
    safe_url,
    sqlite_file,
)
from eosconnect.connectors.jdbc.task import JdbcSourceTask

__all__ = [
    "CONFIG_DEF",
    "CONNECTION_CONFIG_DEF",
    "HEARTBEAT_FIELD",
    "INCREMENTING_FIELD",
    "TABLE_FIELD",
    "TIMESTAMP_FIELD",
    "JdbcSourceConnector",
    "JdbcSourceTask",
    "Mode",
    "assign_tables",
    "check_config",
    "connection_config_def",
    "connection_errors",
    "connection_lost",
    "create_engine_for",
    "reflect_table",
    "safe_url",
    "sqlite_file",
    "table_names",
    "timezone_ok",
]
