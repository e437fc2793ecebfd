"""Where a stored offset resumes on MariaDB, whoever wrote it.

Debezium's MySQL connector reads MariaDB as a MySQL without GTID mode: it sees no BEGIN (MariaDB
opens a transaction with its own GTID event, which that connector ignores), so an offset it stores
inside a transaction has no `event`, and its `pos` is the end of the rows event the record came
from, `row` how many of that event's rows it delivered. `resume_point` turns such an offset into
ours (the transaction's start, the rows event's index as Debezium counts, the rows delivered), so
the rest of that transaction is read, not lost; any other offset already is a transaction's start
or end. Both then resume from MariaDB's GTID position there (`BINLOG_GTID_POS`), the way MariaDB's
replicas connect.
"""

from __future__ import annotations

from typing import Any

from eosconnect.connectors.mysql_cdc.binlog import Position

__all__ = ["resume_point"]

#: The events of a transaction that the binlog reader receives and counts after its GTID event.
_COUNTED = ("Table_map", "Write_rows", "Update_rows", "Delete_rows")


def resume_point(conn: Any, position: Position, event: int | None, row: int) -> tuple[Position, int | None]:
    """The position to stream from (with its GTID position) and the `event` to skip up to there."""
    if event is None and row:
        found = _inside_transaction(conn, position)
        if found is not None:
            position, event = found
    with conn.cursor() as cur:
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (position.file, position.pos))
        gtids = cur.fetchone()
    return Position(position.file, position.pos, str(gtids[0]) if gtids and gtids[0] else None), event


def _inside_transaction(conn: Any, position: Position) -> tuple[Position, int] | None:
    """The start of the transaction whose rows event ends at `position`, and that event's index
    (the GTID event is 0; table maps and rows events count), or None if no rows event ends there."""
    with conn.cursor() as cur:
        cur.execute(f"SHOW BINLOG EVENTS IN '{position.file.replace(chr(39), '')}'")
        events = cur.fetchall()
    begin, index = None, 0
    for _log, pos, kind, _server, end, _info in events:
        if int(pos) >= position.pos:
            break
        if kind == "Gtid":
            begin, index = int(pos), 0
        elif str(kind).startswith(_COUNTED):
            index += 1
            if int(end) == position.pos and str(kind) != "Table_map" and begin is not None:
                return Position(position.file, begin, None), index
    return None
