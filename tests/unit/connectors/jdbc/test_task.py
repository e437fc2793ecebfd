"""JdbcSource on SQLite without Kafka or Spark: modes, tie-breaks, late commits, heartbeats, config."""

from __future__ import annotations

import datetime as dt
import decimal
import time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa

from eosconnect.api import (
    INT64_SCHEMA,
    ConfigException,
    ConnectException,
    ConnectorTransactionBoundaries,
    Date,
    Decimal,
    ExactlyOnceSupport,
    InMemoryOffsetStorageReader,
    RequestedTransactionContext,
    SourcePartition,
    SourceRecord,
    SourceTaskContext,
    Time,
    Timestamp,
)
from eosconnect.connectors.jdbc import (
    JdbcSourceConnector,
    JdbcSourceTask,
    assign_tables,
)
from eosconnect.connectors.jdbc.schema import NumericMapping, row_schema
from eosconnect.plugins import resolve_connector_class


@pytest.fixture
def db(tmp_path: Path) -> tuple[str, sa.Engine]:
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for table in ("orders", "quiet"):
            conn.exec_driver_sql(
                f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, updated_at DATETIME NOT NULL, item TEXT)"
            )
    yield url, engine
    engine.dispose()


def ts(seconds_ago: float = 0.0) -> str:
    moment = dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(seconds=seconds_ago)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


def insert(engine: sa.Engine, table: str, rows: list[tuple[int, str]]) -> None:
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"INSERT INTO {table} (id, updated_at, item) VALUES (?, ?, ?)",
            [(i, stamp, f"item-{i}") for i, stamp in rows],
        )


def config(url: str, mode: str = "incrementing", **extra: str) -> dict[str, str]:
    return {
        "connection.url": url,
        "tables": "orders",
        "mode": mode,
        "incrementing.column.name": "id",
        "timestamp.column.name": "updated_at" if mode != "incrementing" else "",
        "topic.prefix": "shop-",
        "poll.interval.ms": "1",
        **{k.replace("_", "."): v for k, v in extra.items()},
    }


def start(
    cfg: dict[str, str],
    offsets: dict[str, dict[str, Any]] | None = None,
    txn: RequestedTransactionContext | None = None,
) -> JdbcSourceTask:
    connector = JdbcSourceConnector()
    connector.start(cfg)
    (task_config,) = connector.task_configs(1)
    reader = InMemoryOffsetStorageReader([({"table": t}, o) for t, o in (offsets or {}).items()])
    task = JdbcSourceTask()
    task.initialize(SourceTaskContext(offset_storage_reader=reader, transaction_context=txn))
    task.start(task_config)
    return task


def drain(task: JdbcSourceTask, polls: int = 6) -> list[SourceRecord]:
    out: list[SourceRecord] = []
    for _ in range(polls):
        out.extend(task.poll() or [])
        time.sleep(0.005)
    for record in out:
        task.commit_record(record, None)
    return out


def ids(records: list[SourceRecord]) -> list[int]:
    return [r.key for r in records]


def test_incrementing_mode_records_offsets_and_resume(db) -> None:
    url, engine = db
    insert(engine, "orders", [(i, ts()) for i in (1, 2, 3)])
    task = start(config(url, batch_max_rows="2"))
    records = drain(task)
    assert ids(records) == [1, 2, 3]
    first = records[0]
    assert first.topic == "shop-orders" and dict(first.source_partition) == {"table": "orders"}
    assert dict(first.source_offset) == {"incrementing": 1}
    assert first.value.get("item") == "item-1" and first.value.get("id") == 1
    assert first.value_schema.name == "orders" and first.key_schema == INT64_SCHEMA
    task.stop()

    insert(engine, "orders", [(4, ts()), (5, ts())])
    resumed = start(config(url), offsets={"orders": {"incrementing": 3}})
    assert ids(drain(resumed)) == [4, 5]


def test_timestamp_incrementing_tie_break_across_batches(db) -> None:
    url, engine = db
    same = ts(10)
    insert(engine, "orders", [(i, same) for i in range(1, 8)])
    task = start(config(url, "timestamp+incrementing", batch_max_rows="3"))
    records = drain(task, polls=8)
    assert ids(records) == list(range(1, 8)), "rows sharing a timestamp are all read, once"
    assert dict(records[2].source_offset) == {"timestamp": same, "incrementing": 3}
    task.stop()
    resumed = start(
        config(url, "timestamp+incrementing"), offsets={"orders": {"timestamp": same, "incrementing": 5}}
    )
    assert ids(drain(resumed)) == [6, 7]


def test_timestamp_mode_never_splits_a_timestamp(db) -> None:
    url, engine = db
    early, late = ts(20), ts(10)
    insert(engine, "orders", [(1, early), (2, early), (3, late), (4, late), (5, late)])
    task = start(config(url, "timestamp", batch_max_rows="3"))
    first = task.poll()
    assert ids(first) == [1, 2], "the batch ends before the group it would split"
    second = task.poll()
    assert ids(second) == [3, 4, 5], "a batch made of one timestamp is read whole"
    assert dict(second[-1].source_offset) == {"timestamp": late}


def test_delay_keeps_late_commits_with_the_same_timestamp(db) -> None:
    """A row stamped at T but committed after another row stamped T was read would be lost by a
    poll that reads up to 'now'; the delay leaves recent timestamps for later."""
    url, engine = db
    task = start(config(url, "timestamp+incrementing", timestamp_delay_interval_ms="1500"))
    stamp = ts()
    insert(engine, "orders", [(2, stamp)])
    assert drain(task, polls=2) == [], "rows younger than the delay are not read yet"
    insert(engine, "orders", [(1, stamp)])  # same timestamp, smaller id, committed later
    time.sleep(1.6)
    assert ids(drain(task)) == [1, 2]

    # Without the delay the same sequence loses the late row: what the delay is for.
    with engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM orders")
    insert(engine, "orders", [(12, ts())])
    eager = start(config(url, "timestamp+incrementing", timestamp_delay_interval_ms="0"))
    assert ids(drain(eager)) == [12]
    insert(engine, "orders", [(11, eager.tables["orders"].timestamp)])
    assert drain(eager) == []


def test_connector_boundaries_one_transaction_per_table_poll(db) -> None:
    url, engine = db
    insert(engine, "orders", [(i, ts()) for i in range(1, 6)])
    txn = RequestedTransactionContext()
    task = start(config(url, batch_max_rows="2"), txn=txn)
    batch = task.poll()
    assert batch is not None and len(batch) == 2
    assert not txn.should_commit_on(batch[0])
    assert txn.should_commit_on(batch[1])


def test_heartbeat_incrementing_recommits_the_last_id(db) -> None:
    url, engine = db
    insert(engine, "orders", [(1, ts()), (2, ts())])
    insert(engine, "quiet", [(7, ts())])
    task = start(config(url, tables="orders,quiet", heartbeat_interval_ms="1"))
    records = drain(task)
    assert sorted(ids(records)) == [1, 2, 7]
    time.sleep(0.01)
    busy = SourcePartition({"table": "orders"})
    result = task.update_offsets({busy: records[1].source_offset})
    assert result is not None
    assert result[busy] == {"incrementing": 2}, "partitions with records are left as they are"
    quiet = dict(result[SourcePartition({"table": "quiet"})])
    assert quiet["incrementing"] == 7 and quiet["heartbeat"] > 0
    assert task.update_offsets({}) is None, "at most one heartbeat per heartbeat.interval.ms"


def test_heartbeat_timestamp_mode_advances_to_the_read_bound(db) -> None:
    url, engine = db
    old = ts(60)
    insert(engine, "quiet", [(1, old)])
    task = start(
        config(
            url,
            "timestamp+incrementing",
            tables="quiet",
            heartbeat_interval_ms="1",
            timestamp_delay_interval_ms="0",
        )
    )
    assert ids(drain(task)) == [1]
    time.sleep(0.01)
    result = task.update_offsets({})
    assert result is not None
    offset = dict(result[SourcePartition({"table": "quiet"})])
    assert offset["incrementing"] is None and str(offset["timestamp"]) > old
    task.stop()

    # Resuming from the heartbeat reads the rows after the bound, and only those.
    insert(engine, "quiet", [(2, ts(30)), (3, ts())])
    resumed = start(config(url, "timestamp+incrementing", tables="quiet"), offsets={"quiet": offset})
    time.sleep(1.3)
    assert ids(drain(resumed)) == [3]


def test_no_heartbeat_while_records_are_uncommitted(db) -> None:
    url, engine = db
    insert(engine, "quiet", [(1, ts())])
    task = start(config(url, tables="quiet", heartbeat_interval_ms="1"))
    pending = []
    for _ in range(3):
        pending.extend(task.poll() or [])
    time.sleep(0.01)
    assert task.update_offsets({}) is None, "at-least-once: record 1 is not acknowledged yet"
    task.commit_record(pending[0], None)
    assert task.update_offsets({}) is not None


def test_heartbeat_disabled() -> None:
    task = JdbcSourceTask()
    task.heartbeat_interval_s = 0
    assert task.update_offsets({}) is None


def test_tasks_get_tables_round_robin(db) -> None:
    assert assign_tables(["a", "b", "c", "d", "e"], 2) == [["a", "c", "e"], ["b", "d"]]
    assert assign_tables(["a"], 4) == [["a"]]
    url, _ = db
    connector = JdbcSourceConnector()
    connector.start(config(url, tables="orders", table_whitelist="quiet"))
    assert [c["task.tables"] for c in connector.task_configs(5)] == ['["orders"]', '["quiet"]']
    assert connector.exactly_once_support({}) is ExactlyOnceSupport.SUPPORTED
    assert connector.can_define_transaction_boundaries({}) is ConnectorTransactionBoundaries.SUPPORTED
    assert resolve_connector_class("JdbcSource") is JdbcSourceConnector


def test_config_errors_are_field_level(db) -> None:
    url, _ = db
    with pytest.raises(ConfigException) as info:
        JdbcSourceConnector().start({"connection.url": url, "mode": "sometimes", "batch.max.rows": "0"})
    assert set(info.value.errors) == {"mode", "topic.prefix", "batch.max.rows"}

    with pytest.raises(ConfigException) as info:
        JdbcSourceConnector().start(
            {"connection.url": url, "mode": "timestamp+incrementing", "topic.prefix": ""}
        )
    assert set(info.value.errors) == {"tables", "incrementing.column.name", "timestamp.column.name"}

    results = JdbcSourceConnector().validate(
        config(url, "timestamp+incrementing", tables="orders,missing", timestamp_column_name="nope")
    )
    errors = {r.name: r.errors for r in results if r.errors}
    assert "table 'missing' does not exist" in errors["tables"][0]
    assert "has no column 'nope'" in errors["timestamp.column.name"][0]

    results = JdbcSourceConnector().validate(config(url, incrementing_column_name="item"))
    assert "not an integer column" in next(r for r in results if r.errors).errors[0]


def test_unreachable_database_is_reported_on_the_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'no' / 'such' / 'dir.db'}"
    results = JdbcSourceConnector().validate(config(url))
    errors = {r.name: r.errors for r in results if r.errors}
    assert list(errors) == ["connection.url"] and "does not exist" in errors["connection.url"][0]


def test_validation_creates_no_sqlite_file(tmp_path: Path) -> None:
    """Validating used to connect, and so create the database file a URL names (anywhere)."""
    target = tmp_path / "new.db"
    results = JdbcSourceConnector().validate(config(f"sqlite:///{target}"))
    assert any("does not exist" in e for r in results for e in r.errors)
    assert not target.exists()


def test_sqlite_database_outside_file_allowed_dirs_is_refused_unopened(tmp_path: Path) -> None:
    from eosconnect.cluster.validation import config_errors, validate_connector_config
    from eosconnect.worker_config import WorkerConfig

    inside = tmp_path / "allowed"
    inside.mkdir()
    outside = tmp_path / "elsewhere.db"
    outside.write_bytes(b"")  # exists: a connect would have told so, and opened it
    worker = WorkerConfig.parse(
        {
            "bootstrap.servers": "localhost:9092",
            "group.id": "g",
            "offset.storage.topic": "o",
            "file.allowed.dirs": str(inside),
        }
    )
    named = {"name": "j", "connector.class": "JdbcSource", **config(f"sqlite:///{outside}")}
    errors = config_errors(validate_connector_config(named, worker))
    assert "file.allowed.dirs" in errors["connection.url"][0]
    assert errors.keys() == {"connection.url"}  # the connector's own checks (which connect) did not run


@pytest.mark.parametrize("scheme", ["postgresql+psycopg", "mysql+pymysql"])
def test_validation_gives_up_on_a_silent_port_quickly(monkeypatch: pytest.MonkeyPatch, scheme: str) -> None:
    """A URL at a port that accepts connections but never speaks took the driver's default timeout
    (130 s in the probe; PyMySQL waited for ever for the greeting): validation bounds it and says so."""
    import socket
    import time

    from eosconnect.connectors import jdbc

    monkeypatch.setattr(jdbc.database, "VALIDATION_CONNECT_TIMEOUT_S", 2)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        began = time.monotonic()
        results = JdbcSourceConnector().validate(config(f"{scheme}://u:p@127.0.0.1:{port}/db"))
        took = time.monotonic() - began
    errors = {r.name: r.errors for r in results if r.errors}
    assert list(errors) == ["connection.url"], errors
    assert "no answer within the 2 s connect timeout of validation" in errors["connection.url"][0], errors
    assert took < 15, took


def test_password_is_hidden_in_errors() -> None:
    cfg = config("postgresql+psycopg://app:s3cret@127.0.0.1:1/shop", connection_password="other")
    results = JdbcSourceConnector().validate(cfg)
    errors = " ".join(e for r in results for e in r.errors)
    assert "cannot connect to postgresql+psycopg://app:***@127.0.0.1:1/shop" in errors
    assert "s3cret" not in errors and "other" not in errors


def test_rows_become_structs_with_the_tables_schema() -> None:
    metadata = sa.MetaData()
    table = sa.Table(
        "t",
        metadata,
        sa.Column("id", sa.BigInteger, nullable=False),
        sa.Column("small", sa.SmallInteger),
        sa.Column("flag", sa.Boolean),
        sa.Column("price", sa.Numeric(10, 2)),
        sa.Column("count", sa.Numeric(9, 0)),
        sa.Column("wide", sa.Numeric(30, 4)),
        sa.Column("free", sa.Numeric()),
        sa.Column("ratio", sa.REAL),
        sa.Column("day", sa.Date),
        sa.Column("at", sa.DateTime),
        sa.Column("tod", sa.Time),
        sa.Column("raw", sa.LargeBinary),
        sa.Column("doc", sa.JSON),
    )
    columns = list(table.columns)

    def schema_types(mapping: str) -> dict[str, Any]:
        rows = row_schema(
            "t", columns, dialect="postgresql", numeric_mapping=NumericMapping(mapping), zone=dt.UTC
        )
        return {f.name: (f.schema.type.name, f.schema.name, f.schema.optional) for f in rows.schema.fields}

    none = schema_types("none")
    assert none["id"] == ("INT64", None, False) and none["small"] == ("INT16", None, True)
    assert none["price"] == ("BYTES", Decimal.LOGICAL_NAME, True) and none["count"][1] == Decimal.LOGICAL_NAME
    assert none["free"] == ("STRING", None, True)  # no declared scale: its exact text
    assert none["ratio"][0] == "FLOAT32" and none["day"][1] == Date.LOGICAL_NAME
    assert none["at"][1] == Timestamp.LOGICAL_NAME and none["tod"][1] == Time.LOGICAL_NAME
    assert none["raw"][0] == "BYTES" and none["doc"][0] == "STRING"
    assert schema_types("precision_only")["count"][0] == "INT32"
    assert schema_types("precision_only")["price"][1] == Decimal.LOGICAL_NAME
    best = schema_types("best_fit")
    assert best["price"][0] == "FLOAT64" and best["count"][0] == "INT32" and best["free"][0] == "FLOAT64"
    assert best["wide"][1] == Decimal.LOGICAL_NAME  # p > 18: best_fit keeps the Decimal ...
    eager = schema_types("best_fit_eager_double")  # ... best_fit_eager_double does not (Confluent's)
    assert eager["wide"][0] == eager["price"][0] == "FLOAT64" and eager["count"][0] == "INT32"
    assert none["wide"][1] == Decimal.LOGICAL_NAME

    paris = ZoneInfo("Europe/Paris")
    rows = row_schema("t", columns, dialect="postgresql", numeric_mapping=NumericMapping.NONE, zone=paris)
    struct = rows.struct(
        {
            "id": 1,
            "small": None,
            "flag": True,
            "price": decimal.Decimal("1.5"),
            "count": decimal.Decimal("7"),
            "wide": decimal.Decimal("12345678901234567890123.5"),
            "free": decimal.Decimal("3.14159"),
            "ratio": 0.5,
            "day": dt.date(2024, 1, 2),
            "at": dt.datetime(2024, 1, 2, 13, 0),
            "tod": dt.time(8, 30),
            "raw": b"\x00",
            "doc": {"a": [1]},
        }
    )
    struct.validate()
    assert struct.get("price") == decimal.Decimal("1.50") and struct.get("price").as_tuple().exponent == -2
    assert struct.get("at") == dt.datetime(2024, 1, 2, 12, 0, tzinfo=dt.UTC)  # read in db.timezone
    assert struct.get("free") == "3.14159" and struct.get("doc") == '{"a":[1]}'
    assert str(struct.get("wide")) == "12345678901234567890123.5000"


# ------------------------------------------------------------------------------ schema changes


def fields(record: SourceRecord) -> dict[str, Any]:
    return {f.name: record.value.get(f.name) for f in record.value_schema.fields}


def field_types(record: SourceRecord) -> dict[str, str]:
    return {f.name: f.schema.type.name for f in record.value_schema.fields}


def test_added_dropped_and_retyped_columns_are_followed_while_running(db) -> None:
    url, engine = db
    insert(engine, "orders", [(1, ts())])
    task = start(config(url))
    (first,) = drain(task, polls=2)
    assert field_types(first) == {"id": "INT64", "updated_at": "INT64", "item": "STRING"}

    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE orders ADD COLUMN color TEXT")
        conn.exec_driver_sql("INSERT INTO orders VALUES (2, '2024-01-01 00:00:00', 'item-2', 'red')")
    (added,) = drain(task, polls=2)
    assert fields(added) == {
        "id": 2,
        "updated_at": dt.datetime(2024, 1, 1, tzinfo=ZoneInfo("UTC")),
        "item": "item-2",
        "color": "red",
    }
    assert added.value_schema.field("color").schema.optional

    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE orders DROP COLUMN item")
        conn.exec_driver_sql("INSERT INTO orders VALUES (3, '2024-01-02 00:00:00', 'blue')")
    (dropped,) = drain(task, polls=2)
    assert fields(dropped) == {
        "id": 3,
        "updated_at": dt.datetime(2024, 1, 2, tzinfo=ZoneInfo("UTC")),
        "color": "blue",
    }

    # SQLite retypes a column by rebuilding its table: the result's shape is the same, the
    # first value the old type cannot hold makes the task look at the table again.
    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE orders RENAME TO old_orders")
        conn.exec_driver_sql(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, updated_at TEXT NOT NULL, color TEXT)"
        )
        conn.exec_driver_sql("INSERT INTO orders SELECT * FROM old_orders")
        conn.exec_driver_sql("INSERT INTO orders VALUES (4, 'soon', 'green'), (5, 'later', NULL)")
    retyped = drain(task, polls=2)
    assert [fields(r) for r in retyped] == [
        {"id": 4, "updated_at": "soon", "color": "green"},
        {"id": 5, "updated_at": "later", "color": None},
    ]
    assert field_types(retyped[0])["updated_at"] == "STRING"
    assert dict(retyped[-1].source_offset) == {"incrementing": 5}
    task.stop()


def test_a_value_its_column_cannot_hold_names_table_column_and_type(db) -> None:
    url, engine = db
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE products (id INTEGER PRIMARY KEY, weight INTEGER)")
        conn.exec_driver_sql("INSERT INTO products VALUES (1, 'heavy')")
    task = start(config(url, tables="products"))
    with pytest.raises(ConnectException) as failure:
        task.poll()
    message = str(failure.value)
    assert "column 'weight' of table 'products' holds a str value ('heavy')" in message
    assert "declared type INTEGER" in message and "change the column to a type that holds them" in message
    task.stop()


def test_a_dropped_incrementing_column_is_named(db) -> None:
    url, engine = db
    insert(engine, "orders", [(1, ts())])
    task = start(config(url, mode="timestamp+incrementing", timestamp_delay_interval_ms="0"))
    drain(task, polls=2)
    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE orders RENAME COLUMN id TO order_id")
    with pytest.raises(ConnectException, match="table 'orders' has no column 'id' any more"):
        drain(task, polls=2)
    task.stop()
