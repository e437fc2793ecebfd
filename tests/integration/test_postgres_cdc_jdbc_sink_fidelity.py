"""Every value of a database pipeline arrives as it left: PostgreSQL -> PostgresCdcSource -> Kafka ->
JdbcSink -> PostgreSQL, compared cell by cell.

The pipeline is the one Debezium users run: the CDC source with its default settings (and, in the
registry runs, its other interval and time modes), `ExtractNewRecordState` and a `RegexRouter` on
the sink, `insert.mode=upsert`, `pk.mode=record_key`, `delete.enabled`, `auto.create` and
`auto.evolve`; once with the JsonConverter (schemas on), once each with the Avro, JSON Schema and Protobuf
converters and the real registry. Two sinks read each topic: one into tables pre-created with the
source's own DDL, one into an empty database whose tables the sink creates. Once both caught up,
each target cell is read back cast to the source column's type and compared as text with the
source cell: a type matrix (integers to int64 beyond 2^53, numerics with and without scale, floats,
text with unicode and control characters, bytea, dates and timestamps before the epoch and far in
the future, intervals, uuid, json as written and jsonb, arrays, network types, an enum, xml, a
range; NULLs and empty values), through a snapshot, streamed inserts and updates, a delete, an
ADD COLUMN and a DROP COLUMN while streaming, and TOASTed values left unchanged by an update
under REPLICA IDENTITY FULL and DEFAULT.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from support.cdc_soak import connect
from support.fidelity import (
    ADDED,
    COLUMNS,
    PLACEHOLDER,
    TABLES,
    TOAST_CHARS,
    differences,
    eos_sink_config,
    fill_source,
    json_converters,
    prepare_target,
    source_config,
    stream_changes,
)
from support.postgres import new_database, postgres  # noqa: F401 - the fixture

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


@dataclass
class Pipeline:
    source_url: str
    targets: dict[str, str]  # "pre-created" / "auto-created" -> URL
    #: Whether intervals travel as MicroDuration (numeric, the default) or exactly (string).
    numeric_intervals: bool = True

    def connect(self, url: str) -> psycopg.Connection[Any]:
        conn = connect(url)
        conn.execute("SET TimeZone = 'UTC'")
        return conn

    def differences(self) -> list[str]:
        out: list[str] = []
        with self.connect(self.source_url) as source:
            for kind, url in self.targets.items():
                with self.connect(url) as target:
                    for table in TABLES:
                        out += [
                            f"{kind}: {p}" for p in differences(source, target, table, self.numeric_intervals)
                        ]
        return out


@pytest.fixture
def pipeline_dbs(postgres: str) -> Iterator[Pipeline]:  # noqa: F811 - the imported fixture
    source = new_database(postgres)
    pre, auto = new_database(postgres), new_database(postgres)
    fill_source(source)
    prepare_target(pre, pre_created=True)
    prepare_target(auto, pre_created=False)
    yield Pipeline(source, {"pre-created": pre, "auto-created": auto})
    with connect(source) as conn:  # a slot left behind would keep WAL forever
        conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE NOT active")


REGISTRY_CONVERTERS = {
    "avro": "io.confluent.connect.avro.AvroConverter",
    "json_schema": "io.confluent.connect.json.JsonSchemaConverter",
    "protobuf": "io.confluent.connect.protobuf.ProtobufConverter",
}


def _registry(converter: str, registry_url: str) -> dict[str, str]:
    return {
        "key.converter": REGISTRY_CONVERTERS[converter],
        "key.converter.schema.registry.url": registry_url,
        "value.converter": REGISTRY_CONVERTERS[converter],
        "value.converter.schema.registry.url": registry_url,
    }


def settle(pipeline: Pipeline, jobs: list[Any], what: str, timeout: float = 180) -> None:
    """Until both targets equal the source (or `timeout`, or a job ended: the comparison then says
    what differs)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and all(job.running() for job in jobs):
        if not pipeline.differences():
            return
        time.sleep(1)
    problems = pipeline.differences()
    ended = [(job.name, job.outcomes, job.error) for job in jobs if not job.running()]
    assert not problems and not ended, f"after {what}: jobs ended {ended}; differences:\n" + "\n".join(
        problems
    )


def keep_nulls_out_of_arrays(url: str) -> None:
    """Protobuf's repeated fields cannot hold a NULL element (the converter refuses such a record,
    as Confluent's does) and cannot tell a NULL array from an empty one (both read back empty): for
    the Protobuf run the source's arrays are never NULL and keep no NULL element, by a trigger."""
    with connect(url) as conn:
        conn.execute(
            "CREATE FUNCTION no_null_elements() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "NEW.c_int_arr := coalesce(array_remove(NEW.c_int_arr, NULL), '{}'); "
            "NEW.c_text_arr := coalesce(array_remove(NEW.c_text_arr, NULL), '{}'); RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER no_null_elements BEFORE INSERT OR UPDATE ON matrix "
            "FOR EACH ROW EXECUTE FUNCTION no_null_elements()"
        )
        conn.execute("UPDATE matrix SET c_int_arr = c_int_arr")


@pytest.mark.parametrize("converter", ["json", "avro", "json_schema", "protobuf"])
def test_every_cell_arrives_as_it_left(
    converter: str,
    request: pytest.FixtureRequest,
    pipeline_dbs: Pipeline,
    run_job: Callable[..., Any],
    worker_props: Callable[..., dict[str, str]],
    create_topic: Callable[..., str],
    read_committed: Callable[..., list[Any]],
) -> None:
    if converter != "json":
        converters = _registry(converter, request.getfixturevalue("schema_registry").url)
        # The source's other modes: intervals exact, times in microseconds whatever their precision
        modes = {"interval.handling.mode": "string", "time.precision.mode": "adaptive_time_microseconds"}
    else:
        converters, modes = json_converters(), {}
    if converter == "protobuf":
        keep_nulls_out_of_arrays(pipeline_dbs.source_url)
    pipeline_dbs.numeric_intervals = "interval.handling.mode" not in modes
    # A prefix Avro takes as a namespace (letters, digits and underscores): hyphens are not valid
    # in Avro names, with Confluent's converter as with ours.
    prefix = f"fid_{converter}_{uuid.uuid4().hex[:8]}"
    topics = [create_topic(f"{prefix}.public.{t}") for t in TABLES]
    source = {**source_config(pipeline_dbs.source_url, prefix, converters), **modes}
    jobs = [run_job(source, worker_props("enabled"))]
    for kind, url in pipeline_dbs.targets.items():
        config = eos_sink_config(f"{prefix}-{kind}", url, topics, converters)
        jobs.append(run_job(config, worker_props("disabled")))

    settle(pipeline_dbs, jobs, "the snapshot")
    stream_changes(pipeline_dbs.source_url)
    settle(pipeline_dbs, jobs, "the changes")
    problems = pipeline_dbs.differences()
    for job in jobs:
        assert [o["state"] for o in job.stop()] == ["STOPPED"], job.outcomes
    assert not problems, "\n".join(problems)
    with pipeline_dbs.connect(pipeline_dbs.source_url) as conn:
        rows = conn.execute("SELECT count(*) FROM matrix").fetchone()[0]  # type: ignore[index]
    cells = rows * (len(COLUMNS) + 1 + len(ADDED)) + 2 * 2 * 3
    if converter == "json":  # what the events carry for the unchanged TOASTed values
        for topic, full in ((topics[1], True), (topics[2], False)):
            updates = [
                json.loads(r.value)["payload"]["after"]
                for r in read_committed(topic)
                if r.value and json.loads(r.value)["payload"]["op"] == "u"
            ]
            assert len(updates) == 2
            for after in updates:
                toasted = (after["notes"], after["doc"])
                if full:  # REPLICA IDENTITY FULL: taken from the old row, as Debezium does
                    assert len(after["notes"]) == TOAST_CHARS and json.loads(after["doc"])["blob"]
                else:
                    assert toasted == (PLACEHOLDER, PLACEHOLDER)
    assert cells >= 40 * 4, f"the matrix compares {cells} cells per target"
