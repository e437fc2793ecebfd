"""JdbcSource's queries: the next rows of a table after its position, per mode (SQLAlchemy Core,
so every dialect gets its own SQL).

Rows are selected with `SELECT *`, as Confluent's JDBC source does, not as the columns reflected
when the task started: a column added since is read, a dropped one does not fail the query, and
the cursor description of each result (`Shape`) tells the task that the table changed.
"""

from __future__ import annotations

from typing import Any

from eosconnect.connectors.jdbc.config import Mode
from eosconnect.connectors.jdbc.values import TsKind

__all__ = ["Shape", "fetch", "next_rows", "whole_timestamps"]

#: A result's columns as the cursor describes them (name, type code, sizes...): it changes when a
#: column is added, dropped or retyped, and costs nothing to read.
Shape = tuple[tuple[Any, ...], ...]


def fetch(conn: Any, stmt: Any) -> tuple[Shape, list[dict[str, Any]]]:
    """Run `stmt`: the result's shape and its rows as the driver returned them, by column name."""
    result = conn.execute(stmt)
    shape: Shape = tuple(tuple(column) for column in result.cursor.description or ())
    names = [column[0] for column in shape]
    return shape, [dict(zip(names, row, strict=True)) for row in result]


def next_rows(
    table: Any,
    mode: Mode,
    *,
    inc_column: str,
    ts_column: str,
    ts_kind: TsKind | None,
    incrementing: Any,
    timestamp: Any,
    bound: Any,
) -> tuple[Any, Any]:
    """The statement for the rows after the position (`incrementing`, `timestamp`) up to the read
    `bound` (timestamp modes), in offset order, without a limit; and the timestamp column
    expression it compares (None in incrementing mode), for `whole_timestamps`."""
    from sqlalchemy import String, and_, literal_column, or_, select, type_coerce

    ts: Any = None
    if mode.uses_timestamp:
        ts = table.columns[ts_column]
        if ts_kind is TsKind.TEXT:
            ts = type_coerce(ts, String)
    inc: Any = table.columns[inc_column] if inc_column else None
    stmt: Any = select(literal_column("*")).select_from(table)
    if mode is Mode.INCREMENTING:
        if incrementing is not None:
            stmt = stmt.where(inc > incrementing)
        stmt = stmt.order_by(inc)
    else:
        stmt = stmt.where(ts <= bound)
        if timestamp is not None:
            if mode is Mode.TIMESTAMP_INCREMENTING and incrementing is not None:
                stmt = stmt.where(or_(ts > timestamp, and_(ts == timestamp, inc > incrementing)))
            else:  # timestamp mode, or every row with this timestamp was read (a heartbeat)
                stmt = stmt.where(ts > timestamp)
        stmt = stmt.order_by(ts, inc) if mode is Mode.TIMESTAMP_INCREMENTING else stmt.order_by(ts)
    return stmt, ts


def whole_timestamps(
    conn: Any, stmt: Any, ts: Any, ts_column: str, rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Timestamp mode: never end a batch among rows sharing a timestamp (they could not be told
    apart on resume). Drop the trailing group; if the whole batch is one timestamp, read it all."""
    last = rows[-1][ts_column]
    kept = [r for r in rows if r[ts_column] != last]
    if kept:
        return kept
    return fetch(conn, stmt.where(ts == last))[1]
