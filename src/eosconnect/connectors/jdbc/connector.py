"""`JdbcSource`: new rows of database tables into Kafka, exactly once (SQLAlchemy 2).

Modelled on Confluent's JDBC source connector, with SQLAlchemy URLs instead of JDBC ones: SQLite is
built in (`sqlite:////abs/path/db.sqlite`), PostgreSQL works through psycopg
(`postgresql+psycopg://user@host:5432/db`), and any other SQLAlchemy dialect should too.

**Tables and partitions.** Each table in `tables` (or `table.whitelist`) is one source partition
`{"table": <name as configured>}` and goes to the topic `<topic.prefix><name>`. Tables are dealt to
the tasks round robin (table i to task i mod n, n = min(tasks.max, number of tables)). A task polls
its tables in turn, each at most every `poll.interval.ms`, or again at once while a poll returns a
full `batch.max.rows` batch. Records have the incrementing id as key (null without an incrementing
column) and the row as a `Struct` as value, with a schema from the table (column types mapped as
Confluent's JDBC source maps them, `numeric.mapping` included; see `jdbc/schema.py`). With
`JsonConverter` (`schemas.enable=true` by default) the topic carries the schema for any schema-aware
sink; with `value.converter.schemas.enable=false` the value is a JSON object whose dates and
timestamps are Kafka's numbers and whose decimals are Kafka's base64 bytes
(`numeric.mapping=best_fit` gives plain numbers).

**Modes and offsets.**

* `incrementing`: rows with `incrementing.column.name` greater than the last one read, in id order.
  Offset `{"incrementing": <last id>}`. Only new rows are seen, not updates.
* `timestamp+incrementing`: rows ordered by (timestamp, id) after the last (timestamp, id) read,
  Confluent's tie-break: rows sharing a timestamp are never lost when a batch ends among them.
  Offset `{"timestamp": <ts>, "incrementing": <id>}`. Updated rows are read again when their
  timestamp column moves forward.
* `timestamp`: rows with a timestamp after the last one read. Offset `{"timestamp": <ts>}`. A batch
  never ends in the middle of rows sharing a timestamp (it is shortened or extended), since nothing
  could tell them apart on resume.

In both timestamp modes a poll only reads rows up to *now - `timestamp.delay.interval.ms`* (clock
in `db.timezone` for columns without a time zone). A row's timestamp is usually set when its
transaction starts (`now()`, `CURRENT_TIMESTAMP`) but it becomes visible only at commit: without
the delay, a slow transaction could commit a row with the same or an older timestamp than rows
already read, and it would be skipped. Set the delay above your longest write transaction.
Timestamps are stored in offsets as ISO-8601 strings (numbers for numeric columns, taken as epoch
milliseconds; SQLite's text timestamps verbatim: write them as `YYYY-MM-DD HH:MM:SS[.ffffff]`,
which is what SQLite's CURRENT_TIMESTAMP and SQLAlchemy write, because SQLite compares them as text).

**Schema changes.** Rows are read with `SELECT *`, as Confluent's JDBC source reads them, and
each poll compares its result's columns (the cursor description: names, types) with those the
table's schema was built for. When they differ (a column added, dropped or retyped while the task
runs) the table is reflected again and the rows of that poll and every later one carry the new
schema and values: no row is read with the old schema after the change, none is skipped. Where the
description says nothing of a type (SQLite), the first value the old type cannot hold makes the
task look at the table again. A value that its column's declared type truly cannot hold (SQLite
keeps any value in any column) fails the task naming the table, the column, the value's type and
the fix. The incrementing and timestamp columns must outlive a change: dropping one fails the task
naming it, and a retyped timestamp column asks for the table's offsets to be reset. With a
registry converter each new schema is a new version of the topic's subject, registered when the
subject's compatibility rule allows it (docs/schema-registry.md).

**Exactly once.** Re-reading from a committed offset returns the same rows, so exactly-once
support is SUPPORTED. With `transaction.boundary=connector` each table poll is one transaction:
the task asks for a commit after the last record of every poll. The usual caveat of
incrementing mode applies: a row whose id was allocated before an already-read row's but committed
after it is not seen (use `timestamp+incrementing` with a delay if writers commit out of order).

**Heartbeats (KIP-910).** While a table has no new rows, its offset is still committed every
`heartbeat.interval.ms` through `update_offsets`, as KIP-910 describes for a CDC source's quiet
tables. In the timestamp modes it advances to the point up to which the table was last read
complete: `{"timestamp": <read bound>, "incrementing": null}` (null: every row with that timestamp
was read). In incrementing mode the last id read is committed again: an id position cannot move
without rows, and jumping to the current MAX(id) would skip rows inserted since the last poll.
Both carry `"heartbeat": <epoch ms>`, when the table was last found complete (ignored on resume).
Heartbeats ride on the commits of the busy tables; with `transaction.boundary=interval` they also
go out while every table is idle. Details in `JdbcSourceTask.update_offsets`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

from eosconnect.api.config import ConfigDef, ConfigValue
from eosconnect.api.source import (
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    ReplaySupport,
    SourceConnector,
    SourceTask,
)
from eosconnect.connectors.jdbc.config import (
    CONFIG_DEF,
    TASK_TABLES_KEY,
    VERSION,
    assign_tables,
    cross_field_errors,
    table_names,
)
from eosconnect.connectors.jdbc.database import check_config, database_errors, safe_url
from eosconnect.connectors.jdbc.task import JdbcSourceTask

__all__ = ["JdbcSourceConnector"]

log = logging.getLogger(__name__)


class JdbcSourceConnector(SourceConnector):
    """Copies new rows of database tables into one topic per table."""

    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def validate(self, config: Mapping[str, str]) -> list[ConfigValue]:
        def checks(props: Mapping[str, str]) -> dict[str, list[str]]:
            values = CONFIG_DEF.parse(props)
            return cross_field_errors(values) or database_errors(values)

        return CONFIG_DEF.validate_then(config, checks)

    def start(self, config: dict[str, str]) -> None:
        self._values = check_config(config)
        self._config = dict(config)
        log.info(
            "JdbcSource: %d table(s) from %s in mode %s",
            len(table_names(self._values)),
            safe_url(self._values),
            self._values["mode"],
        )

    def task_class(self) -> type[SourceTask]:
        return JdbcSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [
            {**self._config, TASK_TABLES_KEY: json.dumps(tables)}
            for tables in assign_tables(table_names(self._values), max_tasks)
        ]

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED

    def replay_support(self, config: Mapping[str, str]) -> ReplaySupport:
        """Rows after an offset come back in (timestamp, id) order, and a batch never ends
        among rows sharing an offset; see the module docstring for the caveat of incrementing mode."""
        return ReplaySupport.SUPPORTED

    def can_define_transaction_boundaries(self, config: Mapping[str, str]) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED
