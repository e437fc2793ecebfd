"""pgoutput parsing and Debezium's type mapping and envelope (no database: the wire bytes are built here)."""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from typing import TYPE_CHECKING, Any

from eosconnect.api.data import Struct
from eosconnect.connectors.debezium.filters import TableFilter
from eosconnect.connectors.debezium.modes import DecimalHandling, TimePrecision
from eosconnect.connectors.postgres_cdc.config import CdcConfig
from eosconnect.connectors.postgres_cdc.events import UNAVAILABLE, SourceInfo, TableEvents
from eosconnect.connectors.postgres_cdc.pgoutput import (
    UNCHANGED,
    Begin,
    Column,
    Commit,
    Delete,
    Insert,
    Relation,
    Update,
    parse,
)
from eosconnect.connectors.postgres_cdc.replication import format_lsn, parse_lsn
from eosconnect.connectors.postgres_cdc.types import column_type

if TYPE_CHECKING:
    from eosconnect.connectors.postgres_cdc.task import PostgresCdcTask


def _tuple(*values: str | None) -> bytes:
    out = struct.pack("!h", len(values))
    for value in values:
        if value is None:
            out += b"n"
        elif value == "<u>":
            out += b"u"
        else:
            raw = value.encode()
            out += b"t" + struct.pack("!i", len(raw)) + raw
    return out


def test_transaction_messages_parse() -> None:
    begin = parse(b"B" + struct.pack("!QqI", 0x1_0000_0010, 1_000_000, 742))
    assert begin == Begin(0x1_0000_0010, dt.datetime(2000, 1, 1, 0, 0, 1, tzinfo=dt.UTC), 742)
    commit = parse(b"C\0" + struct.pack("!QQq", 5, 9, 0))
    assert isinstance(commit, Commit) and (commit.commit_lsn, commit.end_lsn) == (5, 9)


def test_relation_and_changes_parse() -> None:
    relation = parse(
        b"R"
        + struct.pack("!I", 16384)
        + b"public\0accounts\0d"
        + struct.pack("!h", 2)
        + b"\x01id\0"
        + struct.pack("!Ii", 23, -1)
        + b"\x00note\0"
        + struct.pack("!Ii", 25, -1)
    )
    assert relation == Relation(
        16384, "public", "accounts", "d", (Column("id", 23, -1, True), Column("note", 25, -1, False))
    )
    assert parse(b"I" + struct.pack("!I", 16384) + b"N" + _tuple("1", None)) == Insert(16384, ("1", None))
    update = parse(b"U" + struct.pack("!I", 16384) + b"K" + _tuple("1", None) + b"N" + _tuple("2", "<u>"))
    assert update == Update(16384, ("1", None), True, ("2", UNCHANGED))
    delete = parse(b"D" + struct.pack("!I", 16384) + b"O" + _tuple("2", "x"))
    assert delete == Delete(16384, ("2", "x"), False)
    assert parse(b"O" + struct.pack("!Q", 1) + b"origin\0") is None


def test_debezium_type_mapping() -> None:
    precise, adaptive = DecimalHandling.PRECISE, TimePrecision.ADAPTIVE
    numeric = column_type(1700, ((10 << 16) | 2) + 4, precise, adaptive)
    schema = numeric.builder().build()
    assert schema.name == "org.apache.kafka.connect.data.Decimal"
    assert schema.parameters == {"scale": "2", "connect.decimal.precision": "10"}
    assert numeric.convert("12.5") == decimal.Decimal("12.50")
    date = column_type(1082, -1, precise, adaptive)
    assert date.builder().build().name == "io.debezium.time.Date" and date.convert("1970-01-11") == 10
    ts = column_type(1114, -1, precise, adaptive)
    assert ts.builder().build().name == "io.debezium.time.MicroTimestamp"
    assert ts.convert("1970-01-01 00:00:01.5") == 1_500_000
    assert column_type(1114, 3, precise, adaptive).builder().build().name == "io.debezium.time.Timestamp"
    tz = column_type(1184, -1, precise, adaptive)
    assert tz.builder().build().name == "io.debezium.time.ZonedTimestamp"
    assert tz.convert("2024-01-01 12:00:00.25+02") == "2024-01-01T10:00:00.250000Z"
    assert column_type(16, -1, precise, adaptive).convert("t") is True
    assert column_type(17, -1, precise, adaptive).convert("\\x0102") == b"\x01\x02"
    assert column_type(1700, ((10 << 16) | 2) + 4, DecimalHandling.DOUBLE, adaptive).convert("1.5") == 1.5
    variable = column_type(1700, -1, precise, adaptive).convert("-1.25")
    assert isinstance(variable, Struct) and variable.get("scale") == 2
    assert int.from_bytes(variable.get("value"), "big", signed=True) == -125


def test_envelope_key_and_schema_names() -> None:
    columns = [Column("id", 23, -1, True), Column("name", 25, -1, False), Column("blob", 25, -1, False)]
    table = TableEvents(
        "srv",
        "public",
        "t",
        columns,
        [False, False, True],
        ["id"],
        DecimalHandling.PRECISE,
        TimePrecision.ADAPTIVE,
    )
    assert table.topic == "srv.public.t"
    assert table.key_schema is not None and table.key_schema.name == "srv.public.t.Key"
    assert table.envelope_schema.name == "srv.public.t.Envelope"
    assert [f.name for f in table.envelope_schema.fields][:5] == [
        "before",
        "after",
        "source",
        "transaction",
        "op",
    ]
    after = table.row(("7", "ann", "x"))
    before = table.row(("7", None, None), key_only=True)
    assert before.get("name") == "" and before.get("blob") is None  # NOT NULL column gets a type default
    assert table.row(("7", "ann", UNCHANGED)).get("blob") == UNAVAILABLE
    source = SourceInfo("srv", "db", dt.datetime(2024, 1, 1, tzinfo=dt.UTC), "false", 9, 100, 90)
    value = table.envelope("u", before, after, source, dt.datetime(2024, 1, 1, tzinfo=dt.UTC))
    block = value.get("source")
    assert block.schema.name == "io.debezium.connector.postgresql.Source"
    assert (block.get("connector"), block.get("txId"), block.get("lsn")) == ("postgresql", 9, 100)
    assert block.get("sequence") == '["90","100"]' and block.get("ts_ms") == 1704067200000
    assert table.key(after) == Struct(table.key_schema).put("id", 7)


def test_table_filter_and_lsn_text() -> None:
    config = CdcConfig.parse(
        {
            "database.hostname": "h",
            "database.user": "u",
            "database.dbname": "d",
            "topic.prefix": "p",
            "table.exclude.list": "public\\.audit.*",
        }
    )
    tables: TableFilter = config.tables
    assert tables("public", "orders") and not tables("public", "audit_log")
    assert "replication='database'" in config.dsn(replication=True)
    assert parse_lsn("16/B374D848") == 0x16B374D848 and format_lsn(0x16B374D848) == "16/B374D848"


def test_column_exclude_list_keeps_the_primary_key() -> None:
    config = CdcConfig.parse(
        {
            "database.hostname": "h",
            "database.user": "u",
            "database.dbname": "d",
            "topic.prefix": "p",
            "column.exclude.list": "public\\.t\\.(secret|id)",
        }
    )
    columns = [Column("id", 23, -1, True), Column("secret", 25, -1, False), Column("name", 25, -1, False)]
    table = TableEvents(
        "p", "public", "t", columns, [False, True, True], ["id"], DecimalHandling.PRECISE,
        TimePrecision.ADAPTIVE, config.columns,
    )  # fmt: skip
    assert [f.name for f in table.value_schema.fields] == ["id", "name"]
    row = table.row(("3", "hidden", "ann"))
    assert row.to_dict() == {"id": 3, "name": "ann"}
    assert table.key(row) == Struct(table.key_schema).put("id", 3)


def _convert(type_oid: int, text: str, modifier: int = -1, type_name: str | None = None) -> object:
    kind = column_type(type_oid, modifier, DecimalHandling.PRECISE, TimePrecision.ADAPTIVE, type_name)
    return kind.convert(text)


def test_arrays_interval_hstore_and_zoned_as_debezium_writes_them() -> None:
    """Values read from real Debezium 3.7 events (tests/integration/test_postgres_cdc_debezium.py)."""
    ints = column_type(1007, -1, DecimalHandling.PRECISE, TimePrecision.ADAPTIVE).builder().build()
    assert ints.type.name == "ARRAY" and ints.value_schema is not None and ints.value_schema.optional
    assert _convert(1007, "{1,NULL,-1}") == [1, None, -1] and _convert(1007, "{}") == []
    assert _convert(1009, '{a,NULL,"with,comma","q\\"x"}') == ["a", None, "with,comma", 'q"x']
    assert _convert(1186, "1 year 2 mons 3 days 04:05:06.789") == 37091106789000
    assert _convert(1186, "-1 days +00:00:01") == -86399000000 and _convert(1186, "36:00:00") == 129600000000
    # java.util.HashMap's iteration order, not hstore's (length, then bytes) order
    assert _convert(1, '"a"=>"1", "b"=>"2", "c"=>"3", "dd"=>"x y", "key10"=>NULL', type_name="hstore") == (
        '{"dd":"x y","a":"1","b":"2","c":"3","key10":null}'
    )
    assert _convert(1184, "2000-01-01 00:00:00+00") == "2000-01-01T00:00:00.000000Z"
    assert _convert(1184, "2024-03-01 10:00:00.25+01", modifier=3) == "2024-03-01T09:00:00.250Z"
    # UTC texts (the session's time zone) are re-punctuated, others parsed: both write Java's form
    assert _convert(1184, "2024-03-01 09:00:00.25+00", modifier=3) == "2024-03-01T09:00:00.250Z"
    assert _convert(1184, "2024-03-01 09:00:00.123456+00", modifier=0) == "2024-03-01T09:00:00Z"
    assert _convert(1184, "0044-03-15 12:00:00.5+00") == "0044-03-15T12:00:00.500000Z"
    assert _convert(1184, "0044-03-15 13:00:00.5+01") == "0044-03-15T12:00:00.500000Z"
    variable = _convert(1700, "-1.000100")
    assert isinstance(variable, Struct) and variable.get("scale") == 4
    assert _convert(1700, "1500.00").get("scale") == 0  # type: ignore[attr-defined]


def test_debeziums_stored_offset_skips_what_debezium_delivered() -> None:
    """Debezium's offset {lsn_commit, lsn_proc}: whole transactions ending by lsn_commit are skipped;
    in the first one after it, the events at or before lsn_proc; later ones are kept whole."""
    import threading

    from eosconnect.api.records import SourcePartition, SourceRecord
    from eosconnect.connectors.postgres_cdc.offsets import is_debezium_offset
    from eosconnect.connectors.postgres_cdc.task import PostgresCdcTask

    assert is_debezium_offset({"lsn_proc": 5, "lsn_commit": 4, "lsn": 5, "txId": 1, "ts_usec": 1})
    assert not is_debezium_offset({"lsn": 5, "txId": 1, "event": 0, "lsn_commit": 4})
    task = PostgresCdcTask()
    _no_signals(task)
    task._lock, task._flush_to, task._skips, task.prefix = threading.Lock(), 0, (0, 0), "p"
    task._debezium_resume = (200, 260, 1)
    now = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    partition = SourcePartition({"server": "p"})

    def records(n: int) -> list[SourceRecord]:
        return [SourceRecord(partition, {"event": i}, "t", value=i) for i in range(n)]

    first = Begin(190, now, 1)
    done = task._after_debezium(records(2), [(150, 1), (160, 1)], Commit(190, 200, now))
    task._skipped(records(2), done, first, Commit(190, 200, now), "Debezium delivered")
    assert done == [] and task._flush_to == 200
    partial = task._after_debezium(records(3), [(250, 1), (260, 1), (270, 1)], Commit(290, 300, now))
    assert [r.value for r in partial] == [2] and task._debezium_resume is None
    # A COPY: five rows share LSN 260; Debezium had done three of them (lsn_events_processed=3)
    task._debezium_resume = (200, 260, 3)
    copied = task._after_debezium(records(5), [(260, i) for i in range(1, 6)], Commit(290, 300, now))
    assert [r.value for r in copied] == [3, 4]


def test_primary_key_change_headers_and_debeziums_offset_keys() -> None:
    """An UPDATE of the key: a delete (with `__debezium.newkey`), its tombstone (same headers) and a
    create (with `__debezium.oldkey`), as Debezium's RelationalChangeRecordEmitter; every record's
    offset carries Debezium's `lsn_proc`, `lsn_events_processed` and `messageType` beside ours."""
    import threading
    from collections import deque

    from eosconnect.api.records import SourcePartition
    from eosconnect.connectors.debezium.headers import NEWKEY, OLDKEY
    from eosconnect.connectors.postgres_cdc.task import PostgresCdcTask

    table = TableEvents(
        "srv", "public", "t", [Column("id", 23, -1, True), Column("name", 25, -1, False)], [False, True],
        ["id"], DecimalHandling.PRECISE, TimePrecision.ADAPTIVE,
    )  # fmt: skip
    task = PostgresCdcTask()
    _no_signals(task)
    task.prefix, task.db, task.tombstones = "srv", "db", True
    task.context_headers = ()
    task.partition = SourcePartition({"server": "srv"})
    task._lock, task._flush_to, task._ready = threading.Lock(), 0, deque()
    task._last_commit_lsn, task._debezium_resume, task._resume = 90, None, None
    task._relations = {1: table}
    now = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    task._handle(Begin(300, now, 7), 100)
    task._handle(Update(1, ("2",), True, ("20", "bob")), 110)  # REPLICA IDENTITY DEFAULT: the old key
    task._handle(Insert(1, ("5", "x")), 120)  # a COPY: two rows at one LSN
    task._handle(Insert(1, ("6", "y")), 120)
    task._handle(Commit(300, 310, now), 300)
    records = list(task._ready)
    assert [r.value.get("op") if r.value else None for r in records] == ["d", None, "c", "c", "c"]
    assert records[0].headers == ((NEWKEY, '{"id":20}'),) and records[1].headers == records[0].headers
    assert records[2].headers == ((OLDKEY, '{"id":2}'),) and records[3].headers == ()
    assert [(r.source_offset["lsn_proc"], r.source_offset["lsn_events_processed"]) for r in records] == [
        (110, 1), (110, 1), (110, 1), (120, 1), (120, 2),
    ]  # fmt: skip
    assert records[-1].source_offset["lsn_end"] == 310 and records[0].source_offset["lsn_commit"] == 90
    # Debezium's messageType, the pgoutput message of each change: without it Debezium, resuming from
    # our offset on a slot that sends this transaction again, replays it from its BEGIN
    assert [r.source_offset["messageType"] for r in records] == ["UPDATE"] * 3 + ["INSERT"] * 2


def _task_holding_transactions(count: int, rows: int) -> PostgresCdcTask:
    """A PostgresCdcTask (no database) that has read `count` transactions of `rows` inserts each,
    ids 10 * transaction + row, and holds their events ready; max.batch.size 8."""
    import threading
    from collections import deque

    from eosconnect.api.records import SourcePartition
    from eosconnect.connectors.postgres_cdc.task import PostgresCdcTask

    table = TableEvents(
        "srv", "public", "t", [Column("id", 23, -1, True)], [False], ["id"], DecimalHandling.PRECISE,
        TimePrecision.ADAPTIVE,
    )  # fmt: skip
    task = PostgresCdcTask()
    _no_signals(task)
    task.prefix, task.db, task.tombstones, task.context_headers = "srv", "db", True, ()
    task.partition = SourcePartition({"server": "srv"})
    task._lock, task._flush_to, task._ready = threading.Lock(), 0, deque()
    task._last_commit_lsn, task._debezium_resume, task._resume = None, None, None
    task._relations, task.batch_size = {1: table}, 8
    task.group_size = 1
    now = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    for txn in range(count):
        base = 1000 * (txn + 1)
        task._handle(Begin(base + 90, now, txn), base)
        for row in range(rows):
            task._handle(Insert(1, (str(10 * txn + row),)), base + row + 1)
        task._handle(Commit(base + 90, base + 95, now), base + 90)
    return task


def _ids(batch: list) -> list[int]:
    return [r.key.get("id") for r in batch]


def test_with_connector_boundaries_a_batch_ends_where_a_database_transaction_does() -> None:
    """max.batch.size 8: transactions of 3 rows; a batch ends at the first transaction end once it
    holds 2 records (a quarter), so each Kafka commit comes last in its batch; without connector
    boundaries batches are cut by size alone."""
    task, ids = _task_holding_transactions(4, 3), _ids
    assert ids(task._take_batch(at_transaction_end=True)) == [0, 1, 2]
    assert ids(task._take_batch(at_transaction_end=False)) == [10, 11, 12, 20, 21, 22, 30, 31]
    assert ids(task._take_batch(at_transaction_end=True)) == [32]  # what is left: the end of one


def test_debeziums_context_headers() -> None:
    import uuid

    from eosconnect.connectors.debezium.headers import context_headers

    headers = dict(context_headers("srv", "postgresql"))
    run_id = uuid.UUID(headers.pop("__debezium.context.runId"))
    assert run_id.version == 7 and run_id.variant == uuid.RFC_4122
    assert headers == {
        "__debezium.context.connectorLogicalName": "srv",
        "__debezium.context.taskId": "0",
        "__debezium.context.connectorName": "postgresql",
    }


def test_kafka_transactions_end_at_every_database_transaction_end_or_every_nth() -> None:
    """database.transactions.per.kafka.transaction: 1 ends a Kafka transaction at each database
    transaction's end; 3 at every third and at the batch's last (a poll does not wait to fill a
    group); a database transaction is never split either way."""
    task = _task_holding_transactions(8, 1)
    batch = task._take_batch(at_transaction_end=False)  # all 8 single-row transactions
    assert _ids(task._kafka_commit_points(batch)) == [0, 10, 20, 30, 40, 50, 60, 70]
    task.group_size = 3
    assert _ids(task._kafka_commit_points(batch)) == [20, 50, 70]
    task = _task_holding_transactions(3, 3)
    task.group_size = 2
    batch = task._take_batch(at_transaction_end=False)  # 8 of 9 rows: the third transaction cut
    assert _ids(task._kafka_commit_points(batch)) == [12]  # the first two together; the third goes on


def _no_signals(task: Any) -> None:
    """The state start() gives a task without signals or an incremental snapshot."""
    from eosconnect.connectors.postgres_cdc.incremental import IncrementalSnapshot

    task.incremental = IncrementalSnapshot("srv", lambda: None, None, 1, {}, lambda c, m: None, None)  # type: ignore[arg-type, return-value]
    task._txn_signals, task._signal_oids, task._captured_offset, task.signal_table = [], set(), "", None


def test_an_incremental_chunk_is_never_split_across_batches() -> None:
    """A chunk (the rows emitted at its high watermark) longer than max.batch.size is one batch,
    so one Kafka transaction with its offset even with transaction.boundary=poll."""
    task = _task_holding_transactions(1, 3)
    from eosconnect.api.data import SchemaBuilder, Struct
    from eosconnect.api.records import SourceRecord
    from eosconnect.connectors.postgres_cdc.events import SOURCE_SCHEMA

    schema = SchemaBuilder.struct().field("source", SOURCE_SCHEMA).build()
    source = Struct(SOURCE_SCHEMA)
    for name, value in (("version", "v"), ("connector", "postgresql"), ("name", "srv"), ("ts_ms", 0)):
        source.put(name, value)
    source.put("snapshot", "incremental").put("db", "db").put("schema", "public").put("table", "t")
    chunk = [
        SourceRecord(
            {"server": "srv"}, {"lsn": 5000, "event": i}, "t", value=Struct(schema).put("source", source)
        )
        for i in range(12)
    ]
    chunk[-1] = SourceRecord(
        {"server": "srv"}, {"lsn": 5000, "event": 11, "lsn_end": 5001}, "t", value=chunk[-1].value
    )
    task._ready.clear()
    task._ready.extend(chunk)
    batch = task._take_batch(at_transaction_end=False)
    assert len(batch) == 12 and "lsn_end" in (batch[-1].source_offset or {})
