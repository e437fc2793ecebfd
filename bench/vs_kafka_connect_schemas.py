"""Schema'd records, eosconnect vs Apache Kafka Connect (Java): JSON with schemas, an SMT chain, Avro.

The same machinery as bench/vs_kafka_connect.py (one broker, both workers side by side with the same
worker settings, exactly.once.source.support=enabled, interleaved rounds: Java, eos, eos, Java, ...);
every job is `org.apache.kafka.connect.file.FileStreamSourceConnector` on the same file of N lines,
`exactly.once.support=required`, poll boundaries, `batch.size=2000`, into a fresh 1-partition topic,
both sides configured with the same Kafka class names:

- `json_schemas`: `JsonConverter` with `schemas.enable=true` (keys and values): each value is the
  envelope `{"schema":{"type":"string","optional":false},"payload":"<line>"}`, as Kafka's file
  source writes it.
- `json_smt`: the same converter after the SMT chain HoistField$Value (the line into a Struct) +
  InsertField$Value (a static field and the record timestamp as a Timestamp field) +
  ReplaceField$Value (a rename) + TimestampRouter (`${topic}-${timestamp}`, `yyyy`): every value is
  a Struct envelope of 3 fields, into the routed topic.
- `avro_smt`: the same chain with Confluent's `AvroConverter` against a real schema registry
  (Apicurio, started here) on eosconnect. Confluent's Java AvroConverter is not on Maven Central, so
  the Java side runs `json_smt` for this pair: the ratio compares eosconnect's Avro with Java's
  JSON with schemas on the same job (Java's Avro would write smaller records than its JSON).

A run's time is from the POST /connectors until a read_committed consumer has seen every record
(count, duplicates and gaps are checked: a run with any fails the bench). The last line is
machine-readable, the median over rounds of the per-round eos/java records/s:
    vs_java_schemas json_schemas=R json_smt=R avro_smt=R
Goal: every R >= 1.0 on a quiet machine. `--records`/`--rounds`/`--jobs` (or
EOSCONNECT_BENCH_RECORDS/_ROUNDS) give a smaller bounded form; avro_smt is left out, saying why, where
no Java 21+ runs the registry.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from pathlib import Path

from bench.interleaved import round_arguments, side_order
from bench.vs_kafka_connect import (
    Run,
    Side,
    console,
    report,
    run_once,
    runtimes,
    write_lines,
)
from bench.workdir import new_workdir
from confluent_kafka.admin import AdminClient

from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.devkafka.java_runtime import find_java
from eosconnect.devkafka.kafka_connect import ensure_kafka_connect
from eosconnect.devkafka.registry import MIN_JAVA, LocalSchemaRegistry
from eosconnect.storage.topics import ensure_topic

ALL_JOBS = ("json_schemas", "json_smt", "avro_smt")
JSON = "org.apache.kafka.connect.json.JsonConverter"
AVRO = "io.confluent.connect.avro.AvroConverter"
#: The line's number, wherever the converter put the line ("00000042 xxx..."): JSON text or Avro bytes.
LINE_NUMBER = re.compile(rb"(\d{8}) x")

SMT_CHAIN = {
    "transforms": "hoist,insert,replace,route",
    "transforms.hoist.type": "org.apache.kafka.connect.transforms.HoistField$Value",
    "transforms.hoist.field": "line",
    "transforms.insert.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.insert.static.field": "origin",
    "transforms.insert.static.value": "bench",
    "transforms.insert.timestamp.field": "read_at",
    "transforms.replace.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
    "transforms.replace.renames": "line:text",
    "transforms.route.type": "org.apache.kafka.connect.transforms.TimestampRouter",
    "transforms.route.topic.format": "${topic}-${timestamp}",
    # The year: a run never straddles a change of the routed topic's name (a day would at midnight).
    "transforms.route.timestamp.format": "yyyy",
}


def line_number(value: bytes) -> int:
    found = LINE_NUMBER.search(value)
    if found is None:
        raise SystemExit(f"a record without a line number: {value[:200]!r}")
    return int(found.group(1))


def job_config(job: str, side: str, lines: Path, topic: str, registry_url: str | None) -> dict[str, str]:
    config = {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "tasks.max": "1",
        "file": str(lines),
        "topic": topic,
        "batch.size": "2000",
        "exactly.once.support": "required",
        "transaction.boundary": "poll",
        "key.converter": JSON,
        "key.converter.schemas.enable": "true",
        "value.converter": JSON,
        "value.converter.schemas.enable": "true",
    }
    if job != "json_schemas":
        config.update(SMT_CHAIN)
    if job == "avro_smt" and side == "eos":
        assert registry_url is not None
        config["value.converter"] = AVRO
        config["value.converter.schema.registry.url"] = registry_url
        del config["value.converter.schemas.enable"]
    return config


def run_job(
    job: str,
    round_no: int,
    sides: dict[str, Side],
    bootstrap: str,
    admin: AdminClient,
    lines: Path,
    records: int,
    registry_url: str | None,
) -> list[Run]:
    runs = []
    for side_name in side_order(round_no):
        topic = f"bench-{job.replace('_', '-')}-{side_name}-{uuid.uuid4().hex[:6]}"
        target = topic if job == "json_schemas" else f"{topic}-{dt.datetime.now(dt.UTC):%Y}"
        ensure_topic(admin, target, 1, 1, compacted=False)
        config = job_config(job, side_name, lines, topic, registry_url)
        run = run_once(sides[side_name], job, round_no, config, target, 1, records, bootstrap, line_number)
        console.print(
            f"  round {round_no} {job:12} {side_name:4}: {run.rate:8,.0f} rec/s {run.seconds:6.2f} s "
            f"first {run.first_s:5.2f} s  load {run.load:.1f}"
        )
        if not run.ok:
            raise SystemExit(
                f"{side_name} {job} round {round_no}: {run.duplicates} dups, {run.missing} missing"
            )
        runs.append(run)
    return runs


def main() -> None:
    parser = round_arguments(__doc__.splitlines()[0], 100_000, ALL_JOBS)
    parser.add_argument("--bootstrap", help="use a running broker instead of starting one")
    args = parser.parse_args()
    jobs = tuple(j for j in ALL_JOBS if j in args.jobs.split(","))
    if "avro_smt" in jobs and find_java(MIN_JAVA) is None:
        console.print(f"avro_smt left out: the schema registry needs Java {MIN_JAVA}+ (see `make registry`)")
        jobs = tuple(j for j in jobs if j != "avro_smt")
    ensure_kafka_connect()
    workdir = new_workdir("eosconnect-vs-java-schemas-")
    cluster = registry = None
    bootstrap = args.bootstrap
    try:
        if bootstrap is None:
            cluster = LocalKafkaCluster(workdir / "kafka", tie_to_parent=True)
            bootstrap = cluster.start()
        if "avro_smt" in jobs:
            registry = LocalSchemaRegistry(workdir / "registry", tie_to_parent=True)
            registry.start()
        registry_url = registry.url if registry is not None else None
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        lines = workdir / "lines.txt"
        write_lines(lines, args.records)
        runs: list[Run] = []
        with runtimes(bootstrap, workdir, "enabled") as sides:
            console.print(f"warming up both sides with {jobs[-1]} ...")
            run_job(jobs[-1], 1, sides, bootstrap, admin, lines, args.records, registry_url)
            for round_no in range(1, args.rounds + 1):
                for job in jobs:
                    runs.extend(
                        run_job(job, round_no, sides, bootstrap, admin, lines, args.records, registry_url)
                    )
        medians = report(runs, jobs, args.rounds)
        print(" ".join(["vs_java_schemas"] + [f"{job}={medians[job]:.2f}" for job in jobs if job in medians]))
    finally:
        if registry is not None:
            registry.stop()
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
