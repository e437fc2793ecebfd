"""The chaos soak's change data capture: a PostgreSQL table written at a steady rate, captured by a
PostgresCdcSource with `transaction.boundary=connector`, and the referee of its topic.

`CdcWorkload` writes the table `chaos_cdc (id, version, note)` from a thread: transactions of 1-4
statements (insert, update, delete) on one connection, every insert and update stamping the row
with the next `version` of one counter, so versions rise in commit order and every change is
told apart: a create or update by (id, version), a delete by the version it removed
(`REPLICA IDENTITY FULL` puts the whole old row in `before`). It keeps every committed change, by
transaction id.

`CdcFollower` reads the topic read_committed as the soak's `SequenceFollower` reads a sequence
topic (same consumer, same stall handling) and checks each event as it is committed: no change
twice, and per key the versions in commit order. Its `highest()` is `{0: events read}`, so the
soak's progress waits work unchanged.

`verify_cdc_topic` is the final verdict, over the whole topic read again: every committed change
of the workload (and every snapshot row) exactly once, per key in commit order, the last event per
key equal to the table's row (a tombstone for a deleted row), and each database transaction one
Kafka transaction holding exactly its changes.

`connect`, `cdc_source_config` and `kafka_transactions` are shared with test_postgres_cdc.py.
"""

from __future__ import annotations

import itertools
import json
import random
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import psycopg
import sqlalchemy as sa
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition

from support.chaos import Client, SequenceFollower, client_settings, clock

__all__ = [
    "CdcFollower",
    "CdcReport",
    "CdcWorkload",
    "cdc_source_config",
    "connect",
    "kafka_transactions",
    "verify_cdc_topic",
    "wait_for_changes",
]

TABLE = "chaos_cdc"
#: Rows in the table before the connector starts: its initial snapshot.
SNAPSHOT_ROWS = 200

#: A change as the events show it: (op, id, version); a delete carries the version it removed.
Change = tuple[str, int, int]


def connect(url: str) -> psycopg.Connection[Any]:
    """An autocommit psycopg connection to the database of SQLAlchemy URL `url`."""
    parsed = sa.engine.make_url(url)
    return psycopg.connect(
        host=parsed.host or "127.0.0.1",
        port=parsed.port or 5432,
        user=parsed.username or "postgres",
        dbname=parsed.database or "",
        autocommit=True,
    )


def cdc_source_config(url: str, topic_prefix: str, table: str = TABLE) -> dict[str, str]:
    """A PostgresCdcSource of `public.<table>` in the database of `url`, on a slot of its own:
    Debezium's setting names, JSON with schemas as Debezium's users run it, one Kafka transaction
    per database transaction."""
    parsed = sa.engine.make_url(url)
    return {
        "connector.class": "PostgresCdcSource",
        "tasks.max": "1",
        "database.hostname": parsed.host or "127.0.0.1",
        "database.port": str(parsed.port or 5432),
        "database.user": parsed.username or "postgres",
        "database.dbname": parsed.database or "",
        "topic.prefix": topic_prefix,
        "slot.name": f"slot_{uuid.uuid4().hex[:8]}",
        "publication.name": "cdc_pub",
        "publication.autocreate.mode": "filtered",
        "table.include.list": f"public\\.{table}",
        "poll.interval.ms": "200",
        "transaction.boundary": "connector",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "true",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
    }


class CdcWorkload:
    """Creates the table with its snapshot rows, then (`start()`) writes it until `stop()`."""

    def __init__(self, url: str, seed: int, pause_s: float = 0.1) -> None:
        self.url, self.pause_s = url, pause_s
        self.random = random.Random(seed)
        #: Committed changes by transaction id (PostgreSQL's 32-bit xid, as events carry it).
        self.transactions: dict[int, list[Change]] = {}
        self.snapshot: list[Change] = []
        self.error: BaseException | None = None
        self._rows: dict[int, int] = {}  # id -> version, as committed
        self._version = 0
        self._next_id = 1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cdc-workload", daemon=True)
        with connect(url) as conn:
            conn.execute(f"CREATE TABLE {TABLE} (id INTEGER PRIMARY KEY, version BIGINT NOT NULL, note TEXT)")
            conn.execute(f"ALTER TABLE {TABLE} REPLICA IDENTITY FULL")
            for _ in range(SNAPSHOT_ROWS):
                row_id, version = self._next_id, self._stamp()
                conn.execute(f"INSERT INTO {TABLE} VALUES (%s, %s, 'snapshot')", (row_id, version))
                self._rows[row_id] = version
                self.snapshot.append(("r", row_id, version))
                self._next_id += 1

    def _stamp(self) -> int:
        self._version += 1
        return self._version

    @property
    def changes(self) -> int:
        return sum(map(len, list(self.transactions.values())))

    def start(self) -> CdcWorkload:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop writing (after the transaction in progress); raises what stopped it early, if anything."""
        self._stop.set()
        self._thread.join(60)
        if self.error is not None:
            raise AssertionError(f"the CDC workload failed: {self.error!r}") from self.error

    def _run(self) -> None:
        try:
            with connect(self.url) as conn:
                conn.autocommit = False
                while not self._stop.is_set():
                    self._transaction(conn)
                    time.sleep(self.pause_s)
        except BaseException as exc:  # surfaced by stop()
            self.error = exc

    def _transaction(self, conn: psycopg.Connection[Any]) -> None:
        rows = dict(self._rows)
        changes: list[Change] = []
        for _ in range(self.random.randint(1, 4)):
            choice = self.random.random()
            if choice < 0.4 or len(rows) < 20:
                row_id, version = self._next_id, self._stamp()
                self._next_id += 1
                conn.execute(f"INSERT INTO {TABLE} VALUES (%s, %s, 'new')", (row_id, version))
                rows[row_id] = version
                changes.append(("c", row_id, version))
            elif choice < 0.8:
                row_id, version = self.random.choice(list(rows)), self._stamp()
                conn.execute(
                    f"UPDATE {TABLE} SET version = %s, note = 'updated' WHERE id = %s", (version, row_id)
                )
                rows[row_id] = version
                changes.append(("u", row_id, version))
            else:
                row_id = self.random.choice(list(rows))
                conn.execute(f"DELETE FROM {TABLE} WHERE id = %s", (row_id,))
                changes.append(("d", row_id, rows.pop(row_id)))
        xid = conn.execute("SELECT txid_current() % 4294967296").fetchone()[0]  # type: ignore[index]
        conn.commit()
        self._rows = rows
        self.transactions[int(xid)] = changes

    def table(self) -> dict[int, int]:
        """id -> version of every row, read from the database."""
        with connect(self.url) as conn:
            return {int(i): int(v) for i, v in conn.execute(f"SELECT id, version FROM {TABLE}")}


def change_of(value: dict[str, Any]) -> Change:
    """The change an event's envelope (payload) describes."""
    op = value["op"]
    row = value["before"] if op == "d" else value["after"]
    return op, int(row["id"]), int(row["version"])


def _payload(raw: bytes | None) -> Any:
    return None if raw is None else json.loads(raw)["payload"]


class CdcFollower(SequenceFollower):
    """`SequenceFollower` for the CDC topic: each event checked as it is committed (see the module's
    docstring); `highest()` is {0: events read}."""

    def __init__(self, client: Client, topic: str, workload: CdcWorkload) -> None:
        super().__init__(client, topic, 1)
        self.workload = workload
        self._seen: set[Change] = set()
        self._last_version: dict[int, int] = {}
        self.events = 0

    def progress(self) -> str:
        """Events read of those committed in the database so far (the lag shows)."""
        return f"{self.events} events of {len(self.workload.snapshot) + self.workload.changes} committed"

    def _note(self, message: Message) -> None:
        value = _payload(message.value())
        if value is None:  # a tombstone: checked in the final verdict, with the keys
            return
        where = f"offset {message.offset()}"
        try:
            op, row_id, version = change = change_of(value)
        except (KeyError, TypeError, ValueError) as exc:
            self.anomalies.append(f"{clock()} {where}: not an event of {TABLE} ({exc!r})")
            return
        if change in self._seen and len(self.anomalies) < 50:
            self.anomalies.append(f"{clock()} {where}: {change} a second time")
        last = self._last_version.get(row_id)
        in_order = last is None or (version == last if op == "d" else version > last)
        if not in_order and len(self.anomalies) < 50:
            self.anomalies.append(f"{clock()} {where}: {change} after version {last} of id {row_id}")
        self._seen.add(change)
        self._last_version[row_id] = version
        self.events += 1
        self._highest[0] = self.events


@dataclass
class CdcReport:
    events: int = 0
    expected: int = 0
    duplicates: list[Change] = field(default_factory=list)
    missing: list[Change] = field(default_factory=list)
    unexpected: list[Change] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # order, last row, transactions

    @property
    def ok(self) -> bool:
        return not (self.duplicates or self.missing or self.unexpected or self.problems)

    def summary(self) -> str:
        return (
            f"{self.events} events of {self.expected} expected, {len(self.duplicates)} duplicates, "
            f"{len(self.missing)} missing, {len(self.unexpected)} unexpected, "
            f"{len(self.problems)} other problems"
        )

    def anomalies(self) -> list[str]:
        return [
            *(f"duplicate {c}" for c in self.duplicates[:10]),
            *(f"missing {c}" for c in self.missing[:10]),
            *(f"unexpected {c}" for c in self.unexpected[:10]),
            *self.problems[:20],
        ]


def read_topic(client: Client, topic: str, timeout: float = 120.0) -> list[tuple[int, Any, Any]]:
    """(offset, key payload, value payload) of every committed record of a one-partition topic, read
    read_committed up to its last stable offset."""
    consumer = Consumer(
        {
            **client_settings(client),
            "group.id": f"chaos-cdc-verify-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[tuple[int, Any, Any]] = []
        position, deadline = 0, time.monotonic() + timeout
        while position < end and time.monotonic() < deadline:
            for message in consumer.consume(1000, 1.0):
                if message.error() is None:
                    out.append(
                        (int(message.offset() or 0), _payload(message.key()), _payload(message.value()))
                    )
            position = max([position] + [p.offset for p in consumer.position([TopicPartition(topic, 0)])])
        if position < end:
            raise AssertionError(f"read {topic} to offset {position} of {end} within {timeout:.0f}s")
        return out
    finally:
        consumer.close()


def kafka_transactions(events: Iterable[tuple[int, Any, Any]]) -> list[list[tuple[int, Any, Any]]]:
    """Committed records grouped into Kafka transactions: a gap in the offsets is a commit marker
    (or an aborted transaction's records), and each commit writes a marker."""
    groups: list[list[tuple[int, Any, Any]]] = []
    for event in events:
        if groups and event[0] == groups[-1][-1][0] + 1:
            groups[-1].append(event)
        else:
            groups.append([event])
    return groups


def verify_cdc_topic(client: Client, topic: str, workload: CdcWorkload) -> CdcReport:
    """The final verdict over the whole topic (see the module's docstring); call after `stop()`."""
    events = read_topic(client, topic)
    report = CdcReport()
    expected = [*workload.snapshot, *(c for changes in workload.transactions.values() for c in changes)]
    report.expected = len(expected)
    seen: dict[Change, int] = defaultdict(int)
    history: dict[int, list[tuple[int, Any]]] = defaultdict(list)  # id -> (version or None, ...)
    for offset, key, value in events:
        if value is None:
            history[int(key["id"])].append((offset, None))
            continue
        change = change_of(value)
        seen[change] += 1
        report.events += 1
        history[change[1]].append((offset, change))
    report.duplicates = sorted(c for c, n in seen.items() if n > 1)
    report.missing = sorted(set(expected) - set(seen))
    report.unexpected = sorted(set(seen) - set(expected))
    rows = workload.table()
    for row_id, items in history.items():
        changes = [c for _, c in items if c is not None]
        for before, after in itertools.pairwise(changes):
            if not (after[2] == before[2] if after[0] == "d" else after[2] > before[2]):
                report.problems.append(f"id {row_id}: {after} after {before} (not in commit order)")
        last = items[-1][1]
        if row_id in rows and (last is None or last[0] == "d" or last[2] != rows[row_id]):
            report.problems.append(f"id {row_id}: last event {last}, the row has version {rows[row_id]}")
        if row_id not in rows and last is not None:
            report.problems.append(f"id {row_id} was deleted, but its last record is {last}, not a tombstone")
    missing_rows = set(rows) - set(history)
    if missing_rows:
        report.problems.append(f"rows with no event at all: {sorted(missing_rows)[:10]}")
    report.problems += _split_transactions(events, workload.transactions)
    return report


def _split_transactions(
    events: list[tuple[int, Any, Any]], transactions: dict[int, list[Change]]
) -> list[str]:
    """Each streamed database transaction must be one Kafka transaction holding exactly its changes."""
    problems: list[str] = []
    found: dict[int, int] = {}  # xid -> Kafka transactions holding its events
    for group in kafka_transactions(events):
        streamed = [v for _, _, v in group if v is not None and v["op"] != "r"]
        xids = {int(v["source"]["txId"]) for v in streamed}
        if len(xids) > 1:
            problems.append(
                f"one Kafka transaction at offsets {group[0][0]}-{group[-1][0]} holds {sorted(xids)}"
            )
        for xid in xids:
            found[xid] = found.get(xid, 0) + 1
            changes = [change_of(v) for v in streamed if int(v["source"]["txId"]) == xid]
            if xid in transactions and changes != transactions[xid] and len(problems) < 20:
                problems.append(
                    f"database transaction {xid} is {transactions[xid]}, its Kafka transaction {changes}"
                )
    problems += [f"database transaction {x} in {n} Kafka transactions" for x, n in found.items() if n > 1][
        :20
    ]
    return problems


def wait_for_changes(
    follower: CdcFollower, count: int, timeout: float, alive: Callable[[], str | None]
) -> float:
    """Wait until the follower has read `count` events; the seconds it took."""
    return follower.wait_for_progress(
        [0], count, timeout, f"on {follower.topic}: all {count} events", alive, {0: 0}
    )
