"""The pure parts of an incremental snapshot: its progress (kept in the source offset) and the
window of one chunk (DBLog's deduplication: a streamed change of a row wins over the chunk's copy).

**Offset keys**, under Debezium's names: `incremental_snapshot_correlation_id` (the snapshot's id),
`incremental_snapshot_collections` (the tables still to read, the current one first, each with its
additional condition, as Debezium's JSON list), `incremental_snapshot_primary_key` (the last key
read of the current table) and `incremental_snapshot_maximum_key` (its largest key when its
reading began). Debezium stores the two keys as serialized Java arrays in hex; these store them as
JSON lists of the key columns' PostgreSQL texts, which read back into the same SQL comparison.
`incremental_snapshot_paused` is true while a pause-snapshot signal holds it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from eosconnect.api.errors import ConnectException
from eosconnect.api.records import Primitive

__all__ = ["KEYS", "ChunkWindow", "IncrementalState", "key_identity"]

CORRELATION = "incremental_snapshot_correlation_id"
COLLECTIONS = "incremental_snapshot_collections"
PRIMARY_KEY = "incremental_snapshot_primary_key"
MAXIMUM_KEY = "incremental_snapshot_maximum_key"
PAUSED = "incremental_snapshot_paused"
KEYS = (CORRELATION, COLLECTIONS, PRIMARY_KEY, MAXIMUM_KEY, PAUSED)
_ID = "incremental_snapshot_collections_id"
_CONDITION = "incremental_snapshot_collections_additional_condition"
_SURROGATE = "incremental_snapshot_collections_surrogate_key"


@dataclass(frozen=True)
class IncrementalState:
    """Where an incremental snapshot is: the tables left (`<schema>.<table>`, the current first),
    each one's additional condition, and the current table's last key read and maximum key (texts
    of the key columns; None before its first chunk)."""

    correlation_id: str
    tables: tuple[str, ...]
    conditions: Mapping[str, str] = field(default_factory=dict)
    last_key: tuple[str, ...] | None = None
    max_key: tuple[str, ...] | None = None
    paused: bool = False

    @property
    def current(self) -> str | None:
        return self.tables[0] if self.tables else None

    def adding(self, tables: Iterable[str], conditions: Mapping[str, str]) -> IncrementalState:
        """The state with more tables queued (one already queued is not read twice)."""
        more = tuple(t for t in dict.fromkeys(tables) if t not in self.tables)
        return replace(self, tables=self.tables + more, conditions={**self.conditions, **conditions})

    def after_chunk(self, last_key: tuple[str, ...] | None, table_done: bool) -> IncrementalState:
        """The state once a chunk ending at `last_key` is in Kafka (the next table's when done)."""
        if table_done:
            rest = self.tables[1:]
            kept = {t: c for t, c in self.conditions.items() if t in rest}
            return replace(self, tables=rest, conditions=kept, last_key=None, max_key=None)
        return replace(self, last_key=last_key)

    def without(self, tables: Iterable[str]) -> IncrementalState:
        """stop-snapshot of some tables: they are dropped (the current one from where it is)."""
        gone = set(tables)
        rest = tuple(t for t in self.tables if t not in gone)
        if rest and rest[0] == self.current:
            return replace(self, tables=rest)
        return replace(self, tables=rest, last_key=None, max_key=None)

    def offset(self) -> dict[str, Primitive]:
        """The offset keys that carry this state (added to every record's offset while it runs)."""
        collections = [{_ID: t, _CONDITION: self.conditions.get(t), _SURROGATE: None} for t in self.tables]
        out: dict[str, Primitive] = {
            CORRELATION: self.correlation_id,
            COLLECTIONS: json.dumps(collections),
            PRIMARY_KEY: None if self.last_key is None else json.dumps(list(self.last_key)),
            MAXIMUM_KEY: None if self.max_key is None else json.dumps(list(self.max_key)),
        }
        if self.paused:
            out[PAUSED] = True
        return out

    @classmethod
    def of(cls, offset: Mapping[str, Primitive]) -> IncrementalState | None:
        """The state a stored offset holds, None when no incremental snapshot was running."""
        raw = offset.get(COLLECTIONS)
        if not raw:
            return None
        try:
            collections = json.loads(str(raw))
            tables = tuple(str(c[_ID]) for c in collections)
            conditions = {str(c[_ID]): str(c[_CONDITION]) for c in collections if c.get(_CONDITION)}
            last, maximum = (_key(offset.get(k)) for k in (PRIMARY_KEY, MAXIMUM_KEY))
        except (ValueError, TypeError, KeyError) as exc:
            raise ConnectException(
                f"PostgresCdcSource: the stored offset's incremental snapshot keys cannot be read ({exc}): "
                f"{ {k: offset.get(k) for k in KEYS} }. Alter the offset (PATCH /connectors/<name>/offsets) "
                f"without the {COLLECTIONS} key to drop the snapshot, or reset the offsets."
            ) from exc
        if not tables:
            return None
        correlation = str(offset.get(CORRELATION) or "")
        return cls(correlation, tables, conditions, last, maximum, offset.get(PAUSED) is True)


def _key(value: Primitive) -> tuple[str, ...] | None:
    if value is None or value == "":
        return None
    parsed = json.loads(str(value))
    if not isinstance(parsed, list):
        raise ValueError(f"a key is a JSON list, not {value!r}")
    return tuple(None if v is None else str(v) for v in parsed)  # type: ignore[misc]


def key_identity(values: Iterable[Any]) -> tuple[Any, ...]:
    """A hashable identity of a key's converted values (lists, e.g. of an array key, as tuples)."""
    return tuple(tuple(v) if isinstance(v, list) else v for v in values)


class ChunkWindow:
    """One chunk between its low and high watermark. The rows were read right after the low
    watermark was written; once the stream reaches that watermark (`opened`), every streamed change
    of the chunk's table removes its key from the chunk: the stream carries that row's newer value.
    At the high watermark what is left is emitted (DBLog)."""

    def __init__(
        self,
        chunk_id: str,
        table: str,
        rows: Mapping[tuple[Any, ...], Any],
        last_key: tuple[str, ...] | None,
        table_done: bool,
    ) -> None:
        self.chunk_id = chunk_id
        self.table = table
        self.rows: dict[tuple[Any, ...], Any] = dict(rows)
        self.read = len(self.rows)
        self.last_key = last_key  # the last key read (texts), where the next chunk starts
        self.table_done = table_done
        self.opened = False

    def streamed(self, table: str, key: tuple[Any, ...]) -> None:
        if self.opened and table == self.table:
            self.rows.pop(key, None)
