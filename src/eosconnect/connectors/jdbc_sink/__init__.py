"""`JdbcSink`: records into database tables, exactly once (see `connector` and docs/connectors.md).

Modules, each with one job: `config` (the settings, as Confluent's JDBC sink names them),
`rows` (a `SinkRecord` to a row: key columns, value columns, column types), `dialect` (SQL types,
the engine and the insert/upsert/update/delete statements per database), `offsets_table` (the
consumed positions and the fencing generation kept in the target database), `writer` (one
flush = one database transaction) and `connector` (the connector and task).
"""
