"""pgoutput's logical replication messages (protocol version 1), parsed from their binary form.

PostgreSQL's built-in `pgoutput` plugin sends one message per XLogData frame: a transaction is
`Begin`, then `Relation` (before the first change of a table in this session, and again after its
columns changed), `Insert`/`Update`/`Delete`/`Truncate`, then `Commit`. Column values come as
text (the type's output function), which `types` converts. Reference: PostgreSQL's
"Logical Replication Message Formats".
"""

from __future__ import annotations

import datetime as dt
import struct
from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "Begin",
    "Column",
    "Commit",
    "Delete",
    "Insert",
    "Message",
    "Relation",
    "Truncate",
    "TupleValue",
    "TypeInfo",
    "Unchanged",
    "Update",
    "parse",
    "pg_timestamp",
]

PG_EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


class Unchanged:
    """A TOASTed value the update did not change: pgoutput does not send it ('u')."""

    _instance: Unchanged | None = None

    def __new__(cls) -> Unchanged:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = Unchanged()
#: A column's value: its text, None for SQL NULL, or UNCHANGED (an unchanged TOASTed value).
TupleValue = str | None | Unchanged


def pg_timestamp(micros: int) -> dt.datetime:
    """PostgreSQL's wire timestamps: microseconds since 2000-01-01 UTC."""
    return PG_EPOCH + dt.timedelta(microseconds=micros)


@dataclass(frozen=True)
class Begin:
    final_lsn: int  # the LSN of the transaction's commit record
    commit_time: dt.datetime
    xid: int


@dataclass(frozen=True)
class Commit:
    commit_lsn: int
    end_lsn: int
    commit_time: dt.datetime


@dataclass(frozen=True)
class Column:
    name: str
    type_oid: int
    type_modifier: int
    key: bool  # part of the replica identity


@dataclass(frozen=True)
class Relation:
    oid: int
    namespace: str
    name: str
    replica_identity: str  # d(efault), n(othing), f(ull), i(ndex)
    columns: tuple[Column, ...]


@dataclass(frozen=True)
class TypeInfo:
    oid: int
    namespace: str
    name: str


class Insert(NamedTuple):  # a tuple: one is made per change
    relation_oid: int
    new: tuple[TupleValue, ...]


class Update(NamedTuple):  # a tuple: one is made per change
    relation_oid: int
    old: tuple[TupleValue, ...] | None  # the old key ('K') or whole old row ('O'), if sent
    old_is_key: bool
    new: tuple[TupleValue, ...]


class Delete(NamedTuple):  # a tuple: one is made per change
    relation_oid: int
    old: tuple[TupleValue, ...]
    old_is_key: bool


@dataclass(frozen=True)
class Truncate:
    relation_oids: tuple[int, ...]
    cascade: bool
    restart_identity: bool


Message = Begin | Commit | Relation | TypeInfo | Insert | Update | Delete | Truncate | None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> tuple[int, ...]:
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return values

    def int8(self) -> int:
        return self.take("!b")[0]

    def byte(self) -> str:
        value = chr(self.data[self.pos])
        self.pos += 1
        return value

    def int16(self) -> int:
        return self.take("!h")[0]

    def int32(self) -> int:
        return self.take("!i")[0]

    def uint32(self) -> int:
        return self.take("!I")[0]

    def int64(self) -> int:
        return self.take("!q")[0]

    def uint64(self) -> int:
        return self.take("!Q")[0]

    def string(self) -> str:
        end = self.data.index(b"\0", self.pos)
        value = self.data[self.pos : end].decode()
        self.pos = end + 1
        return value

    def tuple_data(self) -> tuple[TupleValue, ...]:
        values, self.pos = _tuple_data(self.data, self.pos)
        return values


def _tuple_data(data: bytes, pos: int) -> tuple[tuple[TupleValue, ...], int]:
    """TupleData at `pos`: per column a kind byte, then the value's length and bytes for `t` and `b`;
    returns the values and the position after them. One call per row change: buffer and position
    stay in locals."""
    count = _INT16(data, pos)[0]
    pos += 2
    values: list[TupleValue] = []
    append = values.append
    for _ in range(count):
        kind = data[pos]
        pos += 1
        if kind in (_TEXT, _BINARY):
            length = _INT32(data, pos)[0]
            pos += 4
            raw = data[pos : pos + length]
            pos += length
            append(raw.decode() if kind == _TEXT else raw.hex())
        elif kind == _NULL:
            append(None)
        elif kind == _UNCHANGED_TOAST:
            append(UNCHANGED)
        else:
            raise ValueError(f"pgoutput: unknown tuple column kind {chr(kind)!r}")
    return tuple(values), pos


_INT16 = struct.Struct("!h").unpack_from
_INT32 = struct.Struct("!i").unpack_from
_UINT32 = struct.Struct("!I").unpack_from
_INSERT, _NEW = b"I"[0], b"N"[0]
_TEXT, _BINARY, _NULL, _UNCHANGED_TOAST = b"t"[0], b"b"[0], b"n"[0], b"u"[0]


def parse(data: bytes) -> Message:
    """One pgoutput message; None for kinds that carry nothing for change events (Origin, Message)."""
    data = bytes(data)
    if data[0] == _INSERT and data[5] == _NEW:  # the commonest message, without a reader object
        return Insert(_UINT32(data, 1)[0], _tuple_data(data, 6)[0])
    r = _Reader(data)
    kind = r.byte()
    if kind == "B":
        final_lsn, ts, xid = r.uint64(), r.int64(), r.uint32()
        return Begin(final_lsn, pg_timestamp(ts), xid)
    if kind == "C":
        r.int8()  # flags, unused
        commit_lsn, end_lsn, ts = r.uint64(), r.uint64(), r.int64()
        return Commit(commit_lsn, end_lsn, pg_timestamp(ts))
    if kind == "R":
        oid, namespace, name = r.uint32(), r.string(), r.string()
        identity = r.byte()
        columns = []
        for _ in range(r.int16()):
            flags, col_name, type_oid, modifier = r.int8(), r.string(), r.uint32(), r.int32()
            columns.append(Column(col_name, type_oid, modifier, bool(flags & 1)))
        return Relation(oid, namespace or "pg_catalog", name, identity, tuple(columns))
    if kind == "Y":
        return TypeInfo(r.uint32(), r.string(), r.string())
    if kind == "I":
        oid = r.uint32()
        r.byte()  # 'N'
        return Insert(oid, r.tuple_data())
    if kind == "U":
        oid = r.uint32()
        marker = r.byte()
        old: tuple[TupleValue, ...] | None = None
        old_is_key = False
        if marker in ("K", "O"):
            old, old_is_key = r.tuple_data(), marker == "K"
            marker = r.byte()
        if marker != "N":
            raise ValueError(f"pgoutput: Update without a new tuple (marker {marker!r})")
        return Update(oid, old, old_is_key, r.tuple_data())
    if kind == "D":
        oid = r.uint32()
        marker = r.byte()
        return Delete(oid, r.tuple_data(), marker == "K")
    if kind == "T":
        count, options = r.int32(), r.int8()
        oids = tuple(r.uint32() for _ in range(count))
        return Truncate(oids, bool(options & 1), bool(options & 2))
    if kind in ("O", "M"):
        return None
    raise ValueError(f"pgoutput: unknown message kind {kind!r}")
