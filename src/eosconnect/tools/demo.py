"""`make demo`: the real pipeline, end to end, with the failures exactly-once must survive.

1. start a local Apache Kafka broker;
2. start a worker (`eosconnect worker`) on Spark `local[*]`-style slots with exactly-once enabled;
3. create a JdbcSource connector (2 tasks) on an SQLite database into which a generator keeps
   inserting rows (three tables);
4. SIGKILL one task's Python worker mid-stream (Spark retries the task, which fences its
   predecessor and resumes from the committed offsets);
5. reconfigure the connector from 2 to 3 tasks (a new generation, zombie fencing by the leader);
6. stop the generator, wait for the tail, and verify every table's topic with read_committed.
Exits non-zero unless every row is in Kafka exactly once.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import tempfile
import threading
import time
import uuid
from pathlib import Path

from rich.console import Console

from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.tools.verify import verify_jdbc_topic
from eosconnect.tools.verify_cli import print_report
from eosconnect.tools.worker_process import WorkerProcess, local_worker_settings

console = Console()
TABLES = ("orders", "payments", "shipments")


class RowGenerator:
    """Inserts rows into the three tables from a background thread, like an application would."""

    def __init__(self, path: Path, rate_per_s: float = 150.0) -> None:
        self.path = path
        self.rate = rate_per_s
        self.inserted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="row-generator", daemon=True)
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA journal_mode=WAL")
            for table in TABLES:
                db.execute(
                    f"CREATE TABLE IF NOT EXISTS {table} (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                    "item TEXT NOT NULL, amount REAL NOT NULL)"
                )

    def start(self) -> RowGenerator:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        db = sqlite3.connect(self.path, timeout=30)
        n = 0
        while not self._stop.is_set():
            table = TABLES[n % len(TABLES)]
            db.execute(f"INSERT INTO {table} (item, amount) VALUES (?, ?)", (f"item-{n}", n * 1.5))
            db.commit()
            n += 1
            self.inserted = n
            time.sleep(1 / self.rate)
        db.close()


def _step(text: str) -> None:
    console.print(f"[bold cyan]>>[/] {text}")


def run_demo(run_dir: Path | None = None, seconds_per_phase: float = 8.0) -> bool:
    """Run the demo of the module's docstring, step by step; True if every row arrived exactly once.

    One function on purpose: the demo is a script a reader follows top to bottom, each step
    narrated as it runs, and everything it starts is stopped in its one `finally`."""
    started = time.monotonic()
    run_dir = run_dir or Path(tempfile.mkdtemp(prefix="eosconnect-demo-"))
    suffix = uuid.uuid4().hex[:6]
    cluster = LocalKafkaCluster(run_dir / "kafka", brokers=1, tie_to_parent=True)
    with console.status("Starting a local Apache Kafka broker ..."):
        bootstrap = cluster.start()
    _step(f"Apache Kafka {cluster.version} is running at {bootstrap}")
    database = run_dir / "shop.db"
    generator = RowGenerator(database).start()
    worker = WorkerProcess(
        local_worker_settings(bootstrap, f"demo-{suffix}"),
        run_dir / "worker",
    )
    try:
        with console.status("Starting the eosconnect worker (Spark driver, herder, REST API) ..."):
            worker.start()
        _step(f"worker is up at {worker.url} (exactly.once.source.support=enabled); log: {worker.log_path}")
        config = {
            "connector.class": "JdbcSource",
            "tasks.max": "2",
            "connection.url": f"sqlite:///{database}",
            "tables": ",".join(TABLES),
            "mode": "incrementing",
            "incrementing.column.name": "id",
            "topic.prefix": f"shop-{suffix}-",
            "poll.interval.ms": "200",
            "exactly.once.support": "required",
            "transaction.boundary": "connector",
        }
        response = worker.create_connector("shop", config)
        if response.status_code != 201:
            console.print(f"[red]creating the connector failed: {response.text}[/red]")
            return False
        worker.wait_for(lambda: worker.task_states("shop") == ["RUNNING", "RUNNING"], 120, "2 RUNNING tasks")
        _step("JdbcSource 'shop' is RUNNING with 2 tasks; the generator keeps inserting rows")
        time.sleep(seconds_per_phase)

        runtimes = worker.request("GET", "/internal/tasks").json()
        victim = runtimes.get("shop-0", {}).get("pid")
        if victim:
            os.kill(int(victim), signal.SIGKILL)
            _step(f"SIGKILLed the Python worker of task shop-0 (pid {victim}) mid-stream; Spark retries it")
        worker.wait_for(
            lambda: (
                worker.request("GET", "/internal/tasks").json().get("shop-0", {}).get("pid")
                not in (None, victim)
            ),
            120,
            "the retried task to report",
        )
        time.sleep(seconds_per_phase / 2)

        response = worker.request("PUT", "/connectors/shop/config", json={**config, "tasks.max": "3"})
        _step(
            f"reconfigured the connector from 2 to 3 tasks (HTTP {response.status_code}): new generation, "
            "zombies fenced by the leader"
        )
        worker.wait_for(lambda: worker.task_states("shop") == ["RUNNING"] * 3, 120, "3 RUNNING tasks")
        time.sleep(seconds_per_phase)

        generator.stop()
        _step(f"stopped the generator after {generator.inserted} rows; waiting for the tail to be committed")
        ok = True
        for table in TABLES:
            topic = f"shop-{suffix}-{table}"
            deadline = time.monotonic() + 60
            report = verify_jdbc_topic(
                {"bootstrap.servers": bootstrap}, topic, f"sqlite:///{database}", table
            )
            while report.missing and time.monotonic() < deadline:
                time.sleep(1)
                report = verify_jdbc_topic(
                    {"bootstrap.servers": bootstrap}, topic, f"sqlite:///{database}", table
                )
            print_report(report, f"eosconnect verify: table {table} -> topic {topic} (read_committed)")
            ok = ok and report.ok
        status = worker.status("shop")
        console.print(
            f"connector state {status['connector']['state']}, tasks {[t['state'] for t in status['tasks']]}"
        )
        verdict = "[green]demo passed: every row exactly once[/]" if ok else "[red]demo FAILED[/]"
        console.print(f"{verdict} in {time.monotonic() - started:.0f}s")
        return ok
    finally:
        generator.stop()
        worker.stop()
        cluster.stop()
