"""`make demo-spark`: JdbcSource -> Spark join -> Kafka exactly once, through a driver crash.

1. start a local Apache Kafka broker and a generator inserting orders into an SQLite table;
2. run the streaming query of `tools/spark_query.py` (readStream `eosconnect` with JdbcSource,
   a stream-static join, writeStream `eosconnect-kafka`) as its own driver process;
3. SIGKILL the driver (Python and JVM) mid-stream, start it again on the same checkpoint;
4. stop the generator, let the query drain, and verify the topic with read_committed against the
   table (`eosconnect verify --jdbc`). Exits non-zero unless every order is there exactly once.

`kill_and_restart` is the same experiment as a function; the tests run it against Spark's built-in
Kafka sink too, to show the duplicates that sink writes after the same crash.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.tools.demo import RowGenerator
from eosconnect.tools.spark_query import SparkQueryProcess
from eosconnect.tools.verify import SequenceReport, verify_jdbc_topic
from eosconnect.tools.verify_cli import print_report

console = Console()


def kill_and_restart(
    bootstrap: str,
    run_dir: Path,
    *,
    sink: str = "eosconnect-kafka",
    jars: str = "",
    seconds: float = 6.0,
    drop_last_commit: bool = False,
    kill_workers: bool = False,
    graceful: bool = False,
    during: Callable[[], str] | None = None,
    say: Callable[[str], None] = lambda text: None,
) -> tuple[str, SequenceReport]:
    """Run the query, SIGKILL its driver mid-stream, restart it from the checkpoint, drain, verify.
    Returns the topic and the read_committed report against the table.

    `drop_last_commit` also deletes the newest entry of the checkpoint's commit log after the kill:
    the crash then lands, every time, in the window where a batch is written to Kafka but not yet
    recorded as done, so Spark replays that batch. `kill_workers` first SIGKILLs the executors'
    Python workers mid-stream (their tasks are retried). `graceful` stops the driver with SIGTERM
    (the query is stopped, then the session) instead of SIGKILL. `during` is another fault, run
    mid-stream before the driver goes (e.g. a broker restart); it returns what it did."""
    suffix = uuid.uuid4().hex[:6]
    topic = f"orders-enriched-{suffix}"
    run_dir.mkdir(parents=True, exist_ok=True)
    database = run_dir / "shop.db"
    generator = RowGenerator(database, rate_per_s=120).start()
    args = [
        "--db", str(database), "--table", "orders", "--bootstrap", bootstrap, "--topic", topic,
        "--checkpoint", str(run_dir / "checkpoint"), "--sink", sink,
        "--progress-topic", f"progress-{suffix}", "--max-rows", "300",
    ]  # fmt: skip
    if jars:
        args += ["--jars", jars]
    query = SparkQueryProcess(args, run_dir / "run1")
    try:
        query.start()
        say(f"the query ({sink}) committed its first batch; the generator keeps inserting orders")
        if kill_workers:
            time.sleep(seconds / 2)
            killed = query.kill_python_workers()
            say(f"SIGKILLed the executors' Python workers {killed} mid-batch; Spark retries their tasks")
        if during is not None:
            time.sleep(seconds / 2)
            say(during())
        time.sleep(seconds)
        if drop_last_commit and not just_committed(run_dir / "checkpoint"):
            say("no moment between two batches came within 30 s: killing inside a batch")
        pid = query.proc.pid if query.proc else "?"
        if graceful:
            code = query.terminate()
            say(f"stopped the query and its driver (pid {pid}, SIGTERM, exit code {code}) mid-stream")
        else:
            query.kill()
            say(f"SIGKILLed the Spark driver (pid {pid}) mid-stream")
        if drop_last_commit:
            say(replay_last_batch(run_dir / "checkpoint"))
        query = SparkQueryProcess([*args, "--until-idle"], run_dir / "run2")
        query.start()
        say("restarted the query from its checkpoint")
        time.sleep(seconds / 2)
        generator.stop()
        say(f"stopped the generator after {generator.inserted} rows; the query drains and stops")
        query.wait(600)
    finally:
        generator.stop()
        query.stop()
    report = verify_jdbc_topic({"bootstrap.servers": bootstrap}, topic, f"sqlite:///{database}", "orders")
    return topic, report


def _batch_ids(checkpoint: Path, log: str) -> list[int]:
    return sorted(int(p.name) for p in (checkpoint / log).glob("[0-9]*"))


def just_committed(checkpoint: Path, timeout_s: float = 30.0) -> bool:
    """Wait until Spark has just recorded a batch as done and not yet planned the next one (the
    source's planning leaves a short window), so that the kill lands between batches and the
    replayed batch is one wholly written to Kafka. False if no such moment came in time."""
    deadline = time.monotonic() + timeout_s
    seen = _batch_ids(checkpoint, "commits")
    while time.monotonic() < deadline:
        committed = _batch_ids(checkpoint, "commits")
        if committed != seen and committed[-1:] == _batch_ids(checkpoint, "offsets")[-1:]:
            return True
        seen = committed
        time.sleep(0.005)
    return False


def replay_last_batch(checkpoint: Path) -> str:
    """Put a killed query's checkpoint in the window "batch written to Kafka, not recorded as done",
    in a state Spark itself can leave: it records batch N's commit before it plans batch N+1, so the
    commit log is never two behind the offset log. If the newest planned batch is committed, its
    commit entry goes (Spark replays that whole, written batch); if it is not, the crash already fell
    in that window and nothing is removed. Removing an older entry would make a state Spark never
    writes (commits two behind), in which it replays only the newest batch."""

    planned, committed = _batch_ids(checkpoint, "offsets"), _batch_ids(checkpoint, "commits")
    if planned and committed and committed[-1] == planned[-1]:
        commits = checkpoint / "commits"
        (commits / str(planned[-1])).unlink()
        # Its checksum goes too: Spark never leaves one without its entry, and a stale `.N.crc` makes
        # the rewrite of entry N fail as "Multiple streaming queries are concurrently using" it.
        (commits / f".{planned[-1]}.crc").unlink(missing_ok=True)
        return f"removed commit log entry {planned[-1]}: Spark replays that batch, already in Kafka"
    newest = planned[-1] if planned else None
    return f"the crash fell inside batch {newest} (planned, not recorded as done): Spark replays it"


def run_spark_demo(run_dir: Path | None = None, seconds: float = 6.0) -> bool:
    started = time.monotonic()
    run_dir = run_dir or Path(tempfile.mkdtemp(prefix="eosconnect-demo-spark-"))
    cluster = LocalKafkaCluster(run_dir / "kafka", brokers=1, tie_to_parent=True)
    with console.status("Starting a local Apache Kafka broker ..."):
        bootstrap = cluster.start()
    console.print(f"[bold cyan]>>[/] Apache Kafka {cluster.version} is running at {bootstrap}")
    try:
        topic, report = kill_and_restart(
            bootstrap, run_dir, seconds=seconds, say=lambda t: console.print(f"[bold cyan]>>[/] {t}")
        )
        print_report(report, f"eosconnect verify: table orders -> topic {topic} (read_committed)")
        verdict = "[green]demo passed: every order exactly once[/]" if report.ok else "[red]demo FAILED[/]"
        console.print(f"{verdict} in {time.monotonic() - started:.0f}s (logs in {run_dir})")
        return report.ok
    finally:
        cluster.stop()
