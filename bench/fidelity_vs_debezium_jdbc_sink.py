"""JdbcSink vs Debezium's JDBC sink on the same CDC topics: which values reach the target as they left.

One broker, one PostgreSQL server (Debian's binaries, `make postgres`) holding the source database
and four targets, an eosconnect worker and a Java `ConnectDistributed` worker (Apache Kafka Connect
4.x with `io.debezium:debezium-connector-jdbc` from Maven Central on its plugin.path, as in
bench/vs_debezium_jdbc_sink.py). The source database holds the fidelity test's type matrix
(tests/support/fidelity.py: 31 types x edge values, NULLs, two TOAST tables under REPLICA IDENTITY
FULL and DEFAULT); eosconnect's PostgresCdcSource writes its change events to
`<prefix>.public.<table>` with its default settings and Kafka's JsonConverter with schemas (the
fidelity test's configuration). Four sinks read the same topics:

- Debezium's JDBC sink as its users set it up: the Debezium envelope consumed natively (no
  unwrap), `insert.mode=upsert`, `primary.key.mode=record_key`, `delete.enabled=true`,
  `schema.evolution=basic`, `collection.name.format=${source.table}` (the source's table name);
- JdbcSink with ExtractNewRecordState and a RegexRouter to the table's name, `insert.mode=upsert`,
  `pk.mode=record_key`, `delete.enabled`, `auto.create`, `auto.evolve` (the fidelity test's);

each into a database whose tables the sink creates (`auto-created`) and into one with tables
pre-created from the source's own DDL (`pre-created`). Once every target caught up with the
snapshot, the changes are streamed (inserts, updates of every column, a delete, an ADD COLUMN,
updates leaving TOASTed values unchanged); once every target caught up again, each target cell is
read back cast to the source column's type and compared as text with the source's
(`fidelity.compare`, the test's comparison). A target has caught up when it equals the source,
or when it holds the source's rows and has not changed for `--quiet` seconds, or when its task
FAILED (its trace is printed), or at `--timeout`.

The report: per target kind, one line per source column (with its type): the cells equal to the
source for Debezium and for eosconnect, and the first differing value of each. The last line is
machine-readable:
    fidelity_vs_debezium cells=N eos_equal=E dbz_equal=D eos_worse=K
(cells: per sink, over both target kinds; eos_worse: cells equal in Debezium's target but not in
eosconnect's). The bench exits non-zero when eos_worse > 0 or a JdbcSink task failed.
Usage: `PYTHONPATH=.:tests .venv/bin/python bench/fidelity_vs_debezium_jdbc_sink.py`.
"""

from __future__ import annotations

import argparse
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
import psycopg
from bench.vs_debezium_jdbc_sink import ensure_debezium_jdbc
from bench.vs_kafka_connect import Side, runtimes
from bench.workdir import new_workdir
from confluent_kafka.admin import AdminClient
from rich.console import Console
from rich.table import Table

from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.devkafka.kafka_connect import ensure_kafka_connect
from eosconnect.devkafka.postgres import LocalPostgres
from eosconnect.storage.topics import ensure_topic
from support.cdc_soak import connect
from support.fidelity import (
    NO_ROW,
    NO_TABLE,
    TABLES,
    Cell,
    compare,
    eos_sink_config,
    fill_source,
    json_converters,
    prepare_target,
    source_config,
    stream_changes,
)

console = Console(width=200, stderr=True)  # tables stay whole in logs (not a terminal)
SINKS = ("dbz", "eos")
KINDS = ("auto-created", "pre-created")
NAMES = {"dbz": "Debezium", "eos": "eosconnect"}


def debezium_sink_config(name: str, pg: LocalPostgres, database: str, topics: list[str]) -> dict[str, str]:
    """Debezium's JDBC sink as its users run it behind a Debezium source: the change event read
    natively, upserts by the record key, deletes, tables created and evolved, each topic into the
    table named by the event's `source.table`."""
    return {
        "name": name,
        "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
        "tasks.max": "1",
        "topics": ",".join(topics),
        "connection.url": f"jdbc:postgresql://127.0.0.1:{pg.port}/{database}",
        "connection.username": "postgres",
        "connection.password": "",
        "insert.mode": "upsert",
        "primary.key.mode": "record_key",
        "delete.enabled": "true",
        "schema.evolution": "basic",
        "collection.name.format": "${source.table}",
        **json_converters(),
    }


@dataclass
class Target:
    """One sink's target database and how far it is."""

    sink: str  # "dbz" / "eos"
    kind: str  # "auto-created" / "pre-created"
    url: str
    side: Side
    connector: str
    cells: list[Cell] = field(default_factory=list)
    extra_rows: int = 0
    failed: str | None = None
    #: When the comparison last changed, and what it was.
    changed_at: float = 0.0
    last: tuple[Any, ...] = ()

    @property
    def complete(self) -> bool:
        """Every source row is in the target (whatever their values), and no other."""
        return not self.extra_rows and all(c.note not in (NO_TABLE, NO_ROW) for c in self.cells)

    def refresh(self, source: psycopg.Connection[Any]) -> None:
        with connect(self.url) as target:
            target.execute("SET TimeZone = 'UTC'")
            cells: list[Cell] = []
            extra = 0
            for table in TABLES:
                found = compare(source, target, table)
                cells += found.cells
                extra += len(found.extra_rows)
        now = (tuple(cells), extra)
        if now != self.last:
            self.last, self.changed_at = now, time.monotonic()
        self.cells, self.extra_rows = cells, extra
        if self.failed is None:
            self.failed = task_trace(self.side, self.connector)


def task_trace(side: Side, connector: str) -> str | None:
    """The whole trace of the connector's FAILED task (`Side.failed` keeps only its head, and a
    Java sink's cause is at the end), or None."""
    try:
        status = httpx.get(f"{side.url}/connectors/{connector}/status", timeout=10).json()
    except (httpx.HTTPError, ValueError):
        return None
    for task in status.get("tasks", []):
        if task.get("state") == "FAILED":
            return str(task.get("trace", ""))
    return None


def causes(trace: str) -> str:
    """A trace's first line and its "Caused by" lines: what failed, without the stack."""
    lines = trace.splitlines()
    return "\n".join(lines[:1] + [line for line in lines if line.startswith("Caused by")])


def settle(source_url: str, targets: list[Target], what: str, timeout: float, quiet: float) -> None:
    """Until every target caught up (see the module's docstring) or `timeout`."""
    console.print(f"waiting for the sinks to catch up with {what} ...")
    deadline = time.monotonic() + timeout
    for target in targets:
        target.last = ()
    while True:
        with connect(source_url) as source:
            source.execute("SET TimeZone = 'UTC'")
            for target in targets:
                target.refresh(source)
        waiting = [
            t
            for t in targets
            if t.failed is None
            and not all(c.equal for c in t.cells)
            and not (t.complete and time.monotonic() - t.changed_at >= quiet)
        ]
        if not waiting:
            return
        if time.monotonic() > deadline:
            names = ", ".join(f"{NAMES[t.sink]} {t.kind}" for t in waiting)
            console.print(f"[yellow]after {timeout:.0f} s still changing or incomplete: {names}[/]")
            return
        time.sleep(2)


def _short(value: str | None, limit: int = 34) -> str:
    if value is None:
        return "NULL"
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 12]}…({len(value)} chars)"


def _first_difference(cells: list[Cell]) -> str:
    for cell in cells:
        if not cell.equal:
            shown = cell.note if cell.note and cell.target is None else _short(cell.target)
            if cell.note and cell.target is not None:
                shown += f" ({cell.note})"
            return f"id={cell.row}: {_short(cell.source)} -> {shown}"
    return ""


def report(targets: list[Target]) -> tuple[int, int, int, int]:
    """The per-column tables; (cells per sink, eos equal, dbz equal, eos worse)."""
    by = {(t.sink, t.kind): t for t in targets}
    totals = {"cells": 0, "eos": 0, "dbz": 0, "worse": 0}
    for kind in KINDS:
        table = Table(title=f"Tables {kind}: cells equal to the source's (cast back to its type, as text)")
        for col in (
            "column",
            "type",
            "cells",
            "Debezium =",
            "eosconnect =",
            "Debezium differs",
            "eosconnect differs",
        ):
            table.add_column(
                col, justify="right" if col in ("cells", "Debezium =", "eosconnect =") else "left"
            )
        cells = {sink: {(c.table, c.column, c.row): c for c in by[sink, kind].cells} for sink in SINKS}
        columns: dict[tuple[str, str], str] = {}
        for c in by["eos", kind].cells:
            columns.setdefault((c.table, c.column), c.kind)
        for (table_name, column), kind_name in columns.items():
            keys = sorted(k for k in cells["eos"] if k[:2] == (table_name, column))
            mine = {sink: [cells[sink][k] for k in keys if k in cells[sink]] for sink in SINKS}
            equal = {sink: sum(c.equal for c in mine[sink]) for sink in SINKS}
            worse = sum(
                1 for k in keys if k in cells["dbz"] and cells["dbz"][k].equal and not cells["eos"][k].equal
            )
            totals["cells"] += len(keys)
            totals["eos"] += equal["eos"]
            totals["dbz"] += equal["dbz"]
            totals["worse"] += worse
            mark = {sink: "" if equal[sink] == len(keys) else "[red]" for sink in SINKS}
            table.add_row(
                f"{table_name}.{column}",
                kind_name,
                str(len(keys)),
                f"{mark['dbz']}{equal['dbz']}",
                f"{mark['eos']}{equal['eos']}",
                _first_difference(mine["dbz"]),
                _first_difference(mine["eos"]),
            )
        console.print(table)
        for sink in SINKS:
            target = by[sink, kind]
            if target.extra_rows:
                console.print(f"{NAMES[sink]} {kind}: {target.extra_rows} rows the source does not have")
            if target.failed:
                console.print(f"[red]{NAMES[sink]} {kind}: task FAILED[/]")
                console.print(causes(target.failed), markup=False, highlight=False)
    return totals["cells"], totals["eos"], totals["dbz"], totals["worse"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=240, help="seconds each phase may take at most")
    parser.add_argument(
        "--quiet",
        type=float,
        default=20,
        help="seconds a complete target must stay unchanged to count as caught up",
    )
    args = parser.parse_args()
    ensure_kafka_connect()
    plugins = ensure_debezium_jdbc()
    workdir = new_workdir("eosconnect-fidelity-vs-debezium-")
    cluster = LocalKafkaCluster(workdir / "kafka", tie_to_parent=True)
    pg = LocalPostgres(base=workdir / "postgres")
    try:
        bootstrap = cluster.start()
        pg.start()
        source_url = pg.new_database()
        fill_source(source_url)
        urls = {(sink, kind): pg.new_database() for sink in SINKS for kind in KINDS}
        for (_sink, kind), url in urls.items():
            prepare_target(url, pre_created=kind == "pre-created")
        prefix = f"fid_{uuid.uuid4().hex[:8]}"
        topics = [f"{prefix}.public.{t}" for t in TABLES]
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        for topic in topics:
            ensure_topic(admin, topic, 1, 1, compacted=False)
        java_extra = {"plugin.path": str(plugins), "connector.client.config.override.policy": "All"}
        with runtimes(bootstrap, workdir, "enabled", java_extra=java_extra) as sides:
            sides["eos"].post(f"{prefix}-cdc", source_config(source_url, prefix, json_converters()))
            targets: list[Target] = []
            for (sink, kind), url in urls.items():
                name = f"{prefix}-{sink}-{kind}"
                database = url.rsplit("/", 1)[1]
                config: dict[str, str]
                if sink == "dbz":
                    config = debezium_sink_config(name, pg, database, topics)
                else:
                    config = eos_sink_config(name, url, topics, json_converters())
                sides["java" if sink == "dbz" else "eos"].post(name, config)
                targets.append(Target(sink, kind, url, sides["java" if sink == "dbz" else "eos"], name))
            settle(source_url, targets, "the snapshot", args.timeout, args.quiet)
            console.print("streaming the changes ...")
            stream_changes(source_url)
            settle(source_url, targets, "the changes", args.timeout, args.quiet)
            cells, eos_equal, dbz_equal, worse = report(targets)
            eos_failed = [t for t in targets if t.sink == "eos" and t.failed]
        figures = f"cells={cells} eos_equal={eos_equal} dbz_equal={dbz_equal} eos_worse={worse}"
        print(f"fidelity_vs_debezium {figures}")
        if worse or eos_failed:
            raise SystemExit(
                f"eosconnect: {worse} cells differ from the source where Debezium's are equal"
                + (f"; {len(eos_failed)} JdbcSink tasks FAILED" if eos_failed else "")
            )
    finally:
        pg.stop()
        cluster.stop()


if __name__ == "__main__":
    main()
