"""JdbcSink vs Debezium's JDBC sink connector (Java, on Apache Kafka Connect), into the same PostgreSQL.

One local broker, one PostgreSQL server (Debian's binaries, `make postgres`; started here in a
temporary directory), one topic of N schema'd records (1 partition; key a Struct {id int64},
value a Struct {id int64, name string, amount float64}, Kafka's JsonConverter with
`schemas.enable=true`, which Debezium's sink needs). Beside it an eosconnect worker and a Java
`ConnectDistributed` worker (Apache Kafka Connect 4.x, bench/vs_kafka_connect.py's `runtimes`) with
`io.debezium:debezium-connector-jdbc` from Maven Central on its plugin.path.

Jobs, each into a fresh table (created by the connector: `auto.create` / `schema.evolution=basic`):
- `insert`: plain INSERTs, no primary key (ours `insert.mode=insert pk.mode=none`, Debezium's
  `insert.mode=insert primary.key.mode=none`);
- `upsert`: insert-or-update by the key (ours `pk.mode=record_key pk.fields=id`, Debezium's
  `primary.key.mode=record_key primary.key.fields=id`), INSERT .. ON CONFLICT on both.
Both with `batch.size=3000` and one task (Debezium also gets `consumer.override.max.poll.records=
3000`, else its batches stop at 500 records); ours is exactly once (the default: rows and offsets in
one database transaction), Debezium at least once.

A run's time is from the POST /connectors until `SELECT count(*)` on the table shows all N rows;
afterwards `count(DISTINCT id)` must be N too (a run with duplicates or missing rows fails the
bench). Rounds are interleaved (odd rounds Java first, even rounds eosconnect first) after an
untimed warm-up of both sides; the result is the median over rounds of the per-round eos/java
rows/s. The last line is machine-readable:
    vs_debezium_jdbc insert=R upsert=R
Goal: every R >= 1.0. Timing is sensitive to the machine's load: every run prints it, and each
side's CPU seconds per million rows (its whole process tree: worker, JVMs, Python workers), which
the load disturbs less, and PostgreSQL's.

`--crash`: the crash comparison instead (`crash_once`). Each side in turn writes the topic in
`insert.mode=insert` into a table without a key, its worker is SIGKILLed once a third of the rows
are in, and a new worker of the same group finishes the job; the table's duplicate and missing ids
are counted (both workers with `scheduled.rebalance.max.delay.ms=10000`, so that the new worker
takes the dead one's connector over after 10 s instead of Kafka's default 5 minutes). Debezium's
sink is at least once (it commits the consumer group's offsets after the
database commit, every offset.flush.interval.ms=1000 here), so a crash repeats what it wrote since
the last offset commit; ours commits the positions in the rows' transaction: 0 and 0, or the bench
fails. The last line: `vs_debezium_jdbc_crash java_duplicates=D java_missing=M eos_duplicates=D
eos_missing=M`.
`--records`/`--rounds`/`--jobs` (or EOSCONNECT_BENCH_RECORDS/_ROUNDS) give a smaller bounded form.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from bench.interleaved import SIDES, per_round_table, round_arguments, side_order
from bench.vs_kafka_connect import (
    Side,
    console,
    cpu_seconds,
    process_tree,
    runtimes,
    start_worker,
    worker_props,
)
from bench.workdir import new_workdir
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from rich.console import Console
from rich.table import Table

from eosconnect.devkafka import KafkaSetupError, LocalKafkaCluster
from eosconnect.devkafka.kafka_connect import ensure_kafka_connect
from eosconnect.devkafka.maven import COMPLETE_MARKER, cache_lock, cache_root, mvn_error, require_mvn, run_mvn
from eosconnect.devkafka.postgres import LocalPostgres
from eosconnect.storage.topics import ensure_topic

ALL_JOBS = ("insert", "upsert")
JSON = "org.apache.kafka.connect.json.JsonConverter"
BATCH = "3000"

#: The newest debezium-connector-jdbc whose dependencies resolve on Maven Central. Its pom asks for
#: `org.hibernate:hibernate-agroal`, which Hibernate 7 publishes as `org.hibernate.orm:hibernate-agroal`
#: only, and Maven Central serves neither at 7.2.6 (the version Debezium 3.6 names): the fetch takes
#: org.hibernate.orm's hibernate-agroal and hibernate-core at one served 7.2 patch release instead.
DEBEZIUM_VERSION = os.environ.get("EOSCONNECT_DEBEZIUM_JDBC_VERSION", "3.6.0.Final")
HIBERNATE_VERSION = os.environ.get("EOSCONNECT_DEBEZIUM_HIBERNATE_VERSION", "7.2.19.Final")
POSTGRES_DRIVER = "42.7.8"
PROVIDED_BY_CONNECT = ("kafka-clients-*.jar", "connect-api-*.jar", "jackson-*.jar", "slf4j-api-*.jar")

VALUE_SCHEMA = {
    "type": "struct",
    "optional": False,
    "name": "bench.Row",
    "fields": [
        {"field": "id", "type": "int64", "optional": False},
        {"field": "name", "type": "string", "optional": True},
        {"field": "amount", "type": "double", "optional": True},
    ],
}
#: A Struct key: Debezium's sink takes record_key primary keys from Struct keys only.
KEY_SCHEMA = {
    "type": "struct",
    "optional": False,
    "name": "bench.Key",
    "fields": [{"field": "id", "type": "int64", "optional": False}],
}


# ------------------------------------------------------------------------------------- Debezium's jars
def _debezium_pom(version: str) -> str:
    def dep(group: str, artifact: str, ver: str, exclusions: str = "") -> str:
        return (
            f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{ver}</version>{exclusions}</dependency>"
        )

    exclusions = (
        "<exclusions>"
        "<exclusion><groupId>org.hibernate</groupId><artifactId>hibernate-agroal</artifactId></exclusion>"
        "<exclusion><groupId>io.strimzi</groupId><artifactId>strimzi-test-container</artifactId></exclusion>"
        "</exclusions>"
    )
    deps = [
        dep("io.debezium", "debezium-connector-jdbc", version, exclusions),
        dep("org.hibernate.orm", "hibernate-core", HIBERNATE_VERSION),
        dep("org.hibernate.orm", "hibernate-agroal", HIBERNATE_VERSION),
        dep("org.postgresql", "postgresql", POSTGRES_DRIVER),
    ]
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>eosconnect</groupId><artifactId>fetch-debezium</artifactId><version>1</version>"
        f"<dependencies>{''.join(deps)}</dependencies></project>"
    )


#: Debezium's parent pom names other repositories; only Maven Central is reachable (and needed).
CENTRAL_ONLY = (
    "<settings><mirrors><mirror><id>central-only</id><mirrorOf>*</mirrorOf>"
    "<url>https://repo.maven.apache.org/maven2</url></mirror></mirrors></settings>"
)


def ensure_debezium_jdbc(version: str = DEBEZIUM_VERSION) -> Path:
    """A Kafka Connect plugin.path holding Debezium's JDBC sink and its dependencies (cached once)."""
    name = f"debezium-connector-jdbc-{version}"
    target = cache_root() / name
    plugins = target / "plugins"
    if (target / COMPLETE_MARKER).exists():
        return plugins
    with cache_lock(name):
        if (target / COMPLETE_MARKER).exists():
            return plugins
        mvn = require_mvn()
        console.print(
            f"fetching io.debezium:debezium-connector-jdbc:{version} from Maven Central with mvn ..."
        )
        with tempfile.TemporaryDirectory(prefix="eosconnect-mvn-") as tmp:
            work = Path(tmp)
            (work / "settings.xml").write_text(CENTRAL_ONLY)
            staging = work / "libs"
            result = run_mvn(
                mvn,
                work,
                _debezium_pom(version),
                [
                    "-s",
                    str(work / "settings.xml"),
                    "dependency:copy-dependencies",
                    "-DincludeScope=runtime",
                    f"-DoutputDirectory={staging}",
                ],
            )
            if result.returncode != 0 or not staging.is_dir():
                raise KafkaSetupError(f"could not fetch Debezium's JDBC sink {version}: {mvn_error(result)}")
            # What the Connect runtime provides, as Debezium's own plugin archives leave out too: a
            # second Jackson in the plugin breaks Hibernate's ServiceLoader (BlackbirdModule "not a
            # subtype"), and Kafka's own classes must come from the runtime.
            for provided in PROVIDED_BY_CONNECT:
                for jar in staging.glob(provided):
                    jar.unlink()
            shutil.rmtree(target, ignore_errors=True)
            plugins.mkdir(parents=True)
            shutil.move(str(staging), plugins / "debezium-connector-jdbc")
        (target / COMPLETE_MARKER).write_text(version + "\n")
    return plugins


# ------------------------------------------------------------------------------------- data and configs
def fill_topic(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "compression.type": "lz4"})
    value_schema = json.dumps(VALUE_SCHEMA)
    key_schema = json.dumps(KEY_SCHEMA)
    for i in range(count):
        payload = json.dumps({"id": i, "name": f"row {i:08d}", "amount": i * 1.25})
        value = f'{{"schema":{value_schema},"payload":{payload}}}'.encode()
        key = f'{{"schema":{key_schema},"payload":{{"id":{i}}}}}'.encode()
        while True:
            try:
                producer.produce(topic, value=value, key=key, partition=0)
                break
            except BufferError:
                producer.poll(0.1)
    if producer.flush(120):
        raise SystemExit("could not fill the topic")


def sink_config(
    side: str, job: str, topic: str, table: str, pg: LocalPostgres, database: str
) -> dict[str, str]:
    converters = {
        "key.converter": JSON,
        "value.converter": JSON,
        "key.converter.schemas.enable": "true",
        "value.converter.schemas.enable": "true",
    }
    if side == "java":
        return {
            "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
            "tasks.max": "1",
            "topics": topic,
            "connection.url": f"jdbc:postgresql://127.0.0.1:{pg.port}/{database}",
            "connection.username": "postgres",
            "connection.password": "",
            "insert.mode": job,
            "primary.key.mode": "record_key" if job == "upsert" else "none",
            **({"primary.key.fields": "id"} if job == "upsert" else {}),
            "schema.evolution": "basic",
            "collection.name.format": table,
            "table.name.format": table,
            "batch.size": BATCH,
            "consumer.override.max.poll.records": BATCH,
            **converters,
        }
    return {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "tasks.max": "1",
        "topics": topic,
        "connection.url": f"{pg.url}/{database}",
        "insert.mode": job,
        "pk.mode": "record_key" if job == "upsert" else "none",
        **({"pk.fields": "id"} if job == "upsert" else {}),
        "auto.create": "true",
        "table.name.format": table,
        "batch.size": BATCH,
        **converters,
    }


# ------------------------------------------------------------------------------------- one run
@dataclass
class Run:
    job: str
    side: str
    round: int
    seconds: float
    rows: int
    distinct: int
    load: float
    #: CPU seconds per million rows of the side's process tree (worker, JVM, Python workers), and of
    #: PostgreSQL's (postmaster and backends): less sensitive to the machine's load than wall time.
    cpu_per_million: float
    pg_cpu_per_million: float

    @property
    def rate(self) -> float:
        return self.rows / self.seconds


def _count(engine: sa.Engine, table: str, distinct: bool = False) -> int:
    what = "COUNT(DISTINCT id)" if distinct else "COUNT(*)"
    try:
        with engine.connect() as conn:
            return int(conn.exec_driver_sql(f'SELECT {what} FROM "{table}"').scalar_one())
    except sa.exc.ProgrammingError:  # not created yet
        return 0


def run_once(
    side: Side, job: str, round_no: int, topic: str, expected: int, pg: LocalPostgres, database: str
) -> Run:
    name = f"{job}-{side.name}-{uuid.uuid4().hex[:6]}"
    table = f"bench_{side.name}_{job}_{round_no}_{uuid.uuid4().hex[:4]}"
    engine = sa.create_engine(f"{pg.url}/{database}")
    pg_pid = pg.pid()
    assert pg_pid is not None
    try:
        cpu_before = cpu_seconds(process_tree(side.root_pid))
        pg_cpu_before = cpu_seconds(process_tree(pg_pid))
        started = time.monotonic()
        side.post(name, sink_config(side.name, job, topic, table, pg, database))
        deadline = started + 900
        rows = 0
        while rows < expected:
            if time.monotonic() > deadline:
                raise SystemExit(f"{side.name} {job}: {rows} of {expected} rows after 900 s")
            if trace := side.failed(name):
                raise SystemExit(f"{side.name} {job} task FAILED:\n{trace}")
            time.sleep(0.2)
            rows = _count(engine, table)
        seconds = time.monotonic() - started
        cpu = cpu_seconds(process_tree(side.root_pid)) - cpu_before
        pg_cpu = cpu_seconds(process_tree(pg_pid)) - pg_cpu_before
        side.delete(name)
        time.sleep(0.5)
        run = Run(
            job,
            side.name,
            round_no,
            seconds,
            _count(engine, table),
            _count(engine, table, distinct=True),
            os.getloadavg()[0],
            cpu / expected * 1e6,
            pg_cpu / expected * 1e6,
        )
        with engine.begin() as conn:
            conn.exec_driver_sql(f'DROP TABLE "{table}"')
        return run
    finally:
        engine.dispose()


def report(runs: list[Run], jobs: tuple[str, ...], rounds: int) -> dict[str, float]:
    out = Console()
    table, medians = per_round_table(
        "Per round: rows/s from POST until every row is in PostgreSQL (eos/java)",
        runs,
        jobs,
        rounds,
        java="debezium",
        unit="rows/s",
    )
    out.print(table)
    summary = Table(title="Medians per job and side")
    for col in ("job", "side", "rows/s", "CPU s / M rows", "PostgreSQL CPU s / M rows"):
        summary.add_column(col, justify="right")
    for job in jobs:
        for side in SIDES:
            mine = [run for run in runs if run.job == job and run.side == side]
            if mine:
                summary.add_row(
                    job,
                    side,
                    f"{statistics.median(r.rate for r in mine):,.0f}",
                    f"{statistics.median(r.cpu_per_million for r in mine):.1f}",
                    f"{statistics.median(r.pg_cpu_per_million for r in mine):.1f}",
                )
    out.print(summary)
    return medians


# ------------------------------------------------------------------------------------- the crash test
@dataclass
class CrashRun:
    side: str
    expected: int
    killed_at: int
    rows: int
    distinct: int

    @property
    def duplicates(self) -> int:
        return self.rows - self.distinct

    @property
    def missing(self) -> int:
        return self.expected - self.distinct


def _wait_rows(engine: sa.Engine, table: str, wanted: int, side: str, what: str, timeout: float = 600) -> int:
    deadline = time.monotonic() + timeout
    while (rows := _count(engine, table, distinct=True)) < wanted:
        if time.monotonic() > deadline:
            raise SystemExit(f"{side}: {rows} of {wanted} distinct rows after {timeout:.0f} s ({what})")
        time.sleep(0.1)
    return rows


def crash_once(
    name: str,
    props: dict[str, str],
    workdir: Path,
    topic: str,
    expected: int,
    pg: LocalPostgres,
    database: str,
) -> CrashRun:
    """`insert.mode=insert` into a table without a key; once a third of the rows are in, the side's
    worker is SIGKILLed (eosconnect's with its Spark JVM, Java's JVM), and a new worker of the same
    group (same config, offsets and status topics) takes the connector over. Once every id is in the
    table and the count stands still for 5 s, the duplicates and missing rows are counted."""
    table = f"crash_{name}_{uuid.uuid4().hex[:6]}"
    engine = sa.create_engine(f"{pg.url}/{database}")
    side, process = start_worker(name, props, workdir / f"{name}-crash-1")
    try:
        side.post(f"crash-{name}", sink_config(name, "insert", topic, table, pg, database))
        _wait_rows(engine, table, expected // 3, name, "before the kill")
        process.kill()
        killed_at = _count(engine, table)
        console.print(
            f"{name}: worker SIGKILLed at {killed_at:,} rows; starting a new worker of its group ..."
        )
        side, process = start_worker(name, props, workdir / f"{name}-crash-2")
        _wait_rows(engine, table, expected, name, "after the restart")
        rows, still = _count(engine, table), time.monotonic()
        while time.monotonic() - still < 5:  # anything written twice lands by now
            time.sleep(0.5)
            if (now := _count(engine, table)) != rows:
                rows, still = now, time.monotonic()
        run = CrashRun(name, expected, killed_at, rows, _count(engine, table, distinct=True))
        side.delete(f"crash-{name}")
        return run
    finally:
        process.stop()
        engine.dispose()


def crash_report(runs: list[CrashRun]) -> None:
    table = Table(title="SIGKILL of the worker mid-stream (insert.mode=insert, no key), then a new worker")
    for col in ("side", "rows at the kill", "rows", "distinct ids", "duplicates", "missing"):
        table.add_column(col, justify="right")
    for run in runs:
        side = "debezium" if run.side == "java" else run.side
        table.add_row(
            side,
            f"{run.killed_at:,}",
            f"{run.rows:,}",
            f"{run.distinct:,}",
            f"{run.duplicates:,}",
            f"{run.missing:,}",
        )
    Console().print(table)


def main() -> None:
    parser = round_arguments(__doc__.splitlines()[0], 50_000, ALL_JOBS)
    parser.add_argument(
        "--crash",
        action="store_true",
        help="instead of the throughput rounds: SIGKILL each side's worker mid-stream (insert mode, no key), "
        "restart it, and count the duplicate and missing rows each leaves",
    )
    args = parser.parse_args()
    jobs = tuple(j for j in ALL_JOBS if j in args.jobs.split(","))
    ensure_kafka_connect()
    plugins = ensure_debezium_jdbc()
    workdir = new_workdir("eosconnect-vs-debezium-jdbc-")
    cluster = LocalKafkaCluster(workdir / "kafka", tie_to_parent=True)
    pg = LocalPostgres()
    try:
        bootstrap = cluster.start()
        pg.start()
        database = pg.new_database().rsplit("/", 1)[1]
        topic = f"bench-jdbc-{uuid.uuid4().hex[:6]}"
        ensure_topic(
            AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}), topic, 1, 1, compacted=False
        )
        console.print(f"writing {args.records:,} schema'd records to {topic} ...")
        fill_topic(bootstrap, topic, args.records)
        java_extra = {"plugin.path": str(plugins), "connector.client.config.override.policy": "All"}
        if args.crash:
            props = worker_props(bootstrap, "enabled", java_extra)
            for side_props in props.values():  # a new worker takes a dead one's work after 10 s
                side_props["scheduled.rebalance.max.delay.ms"] = "10000"
            crashes = [
                crash_once(side, props[side], workdir, topic, args.records, pg, database) for side in SIDES
            ]
            crash_report(crashes)
            print(
                " ".join(
                    ["vs_debezium_jdbc_crash"]
                    + [f"{c.side}_duplicates={c.duplicates} {c.side}_missing={c.missing}" for c in crashes]
                )
            )
            eos = crashes[-1]
            if eos.duplicates or eos.missing:
                raise SystemExit(
                    f"eosconnect left {eos.duplicates} duplicates and {eos.missing} missing rows"
                )
            return
        runs: list[Run] = []
        with runtimes(bootstrap, workdir, "enabled", java_extra=java_extra) as sides:
            console.print("warming up both sides (insert) ...")
            for side in SIDES:
                run_once(sides[side], "insert", 0, topic, args.records, pg, database)
            for round_no in range(1, args.rounds + 1):
                for job in jobs:
                    for side in side_order(round_no):
                        run = run_once(sides[side], job, round_no, topic, args.records, pg, database)
                        console.print(
                            f"round {round_no} {job} {side}: {run.rate:,.0f} rows/s "
                            f"({run.rows} rows, {run.distinct} distinct, cpu {run.cpu_per_million:.1f} s/M, "
                            f"postgres cpu {run.pg_cpu_per_million:.1f} s/M, load {run.load:.1f})"
                        )
                        if run.rows != args.records or run.distinct != args.records:
                            raise SystemExit(
                                f"{side} {job} round {round_no}: {run.rows} rows, {run.distinct} distinct "
                                f"ids for {args.records} records"
                            )
                        runs.append(run)
        medians = report(runs, jobs, args.rounds)
        print(
            " ".join(["vs_debezium_jdbc"] + [f"{job}={medians[job]:.2f}" for job in jobs if job in medians])
        )
    finally:
        pg.stop()
        cluster.stop()


if __name__ == "__main__":
    main()
