"""Buffered changes to one Arrow table per commit: the columns of every change, in order.

Changes of different shapes (a schema that gained a column, schemaless maps with other keys) share
one table whose columns are the union, first seen first; a change without a column has null there.
In merge mode only the last change per key is kept (see `changes`) and the operation travels in
`OPERATION_COLUMN`, which the sinks' MERGE reads and never writes.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from eosconnect.api.errors import DataException
from eosconnect.connectors.lake.changes import Change, Operation

__all__ = ["OPERATION_COLUMN", "latest_per_key", "to_arrow"]

#: The operation of each row of a merge batch (`upsert` or `delete`).
OPERATION_COLUMN = "__eosconnect_operation"


def latest_per_key(changes: Sequence[Change], keys: Sequence[str]) -> list[Change]:
    """The last change of each key, in the order of those last changes."""
    latest: dict[tuple[object, ...], Change] = {}
    for change in changes:
        key = tuple(change.values.get(k) for k in keys)
        latest.pop(key, None)  # re-inserted last: the dict keeps the order of the last changes
        latest[key] = change
    return list(latest.values())


def to_arrow(changes: Sequence[Change], *, with_operation: bool = False) -> pa.Table:
    """One Arrow table of these changes (see the module doc)."""
    fields: dict[str, pa.Field] = {}
    for change in changes:
        for f in change.fields:
            known = fields.get(f.name)
            if known is None:
                fields[f.name] = f
            elif known.type != f.type:
                raise DataException(
                    f"column {f.name!r} is {known.type} in one record and {f.type} in another of the same "
                    "batch: a column keeps one type (change the producer's schema compatibly)"
                )
    schema = pa.schema(list(fields.values()))
    rows = [c.values for c in changes]
    try:
        table = pa.Table.from_pylist(rows, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
        raise DataException(f"records do not fit their columns' types: {exc}") from exc
    if with_operation:
        ops = pa.array(
            ["delete" if c.operation is Operation.DELETE else "upsert" for c in changes], pa.string()
        )
        table = table.append_column(pa.field(OPERATION_COLUMN, pa.string()), ops)
    return table
