"""Options and input schema of the `eosconnect-kafka` sink, checked on the driver before any write.

Everything a user can get wrong is found here, before a Kafka transaction is opened: an unknown
option, a producer setting librdkafka refuses, a missing `value` column, a column of the wrong type.
Each error names the option or column and says what to write instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from eosconnect.api.errors import ConfigException
from eosconnect.storage.clients import TOP_LEVEL_EXACT, TOP_LEVEL_PREFIXES, ClientConfig, forced

__all__ = [
    "DEFAULT_PROGRESS_TOPIC",
    "DEFAULT_TRANSACTIONAL_ID_PREFIX",
    "KAFKA_PREFIX",
    "SinkOptions",
    "check_sink_schema",
    "parse_sink_options",
]

KAFKA_PREFIX = "kafka."
DEFAULT_PROGRESS_TOPIC = "eosconnect-spark-progress"
DEFAULT_TRANSACTIONAL_ID_PREFIX = "eosconnect-spark"

#: The sink's own options (Spark lower-cases option names) and what they mean, for error messages.
OWN_OPTIONS: dict[str, str] = {
    "topic": "the topic rows without a `topic` column value go to",
    "progress.topic": f"compacted topic of the commit markers (default {DEFAULT_PROGRESS_TOPIC})",
    "progress.topic.partitions": "partitions of the progress topic when it is created (default 4)",
    "progress.topic.replication.factor": "its replication factor (default -1: the broker default)",
    "transactional.id.prefix": (
        f"prefix of the producers' transactional ids (default {DEFAULT_TRANSACTIONAL_ID_PREFIX})"
    ),
    "job.id": "batch writes: the job's stable name; a re-run with the same job.id skips committed partitions",
    "replay.check": "true (default): fail when a replayed partition differs from the committed one",
    "broker.wait.ms": (
        "how long planning a write waits for a broker before failing it (default 60000, as Kafka's "
        "max.block.ms): a broker restart shorter than this is ridden out"
    ),
    "kafka.*": "any librdkafka producer setting, kafka.bootstrap.servers is required",
}
#: Options Spark itself passes along with the user's.
SPARK_OPTIONS = frozenset({"path", "checkpointlocation", "queryname"})
#: Producer settings the sink owns (KIP-618's rule: a user value is ignored with a warning).
FORCED_WHY = {
    "transactional.id": "each (query, Spark partition) has its own transactional id",
    "enable.idempotence": "transactions need idempotence",
}
_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


@dataclass(frozen=True)
class SinkOptions:
    """The parsed options; picklable, shipped to the executors inside the writer."""

    producer: dict[str, Any]
    topic: str | None
    progress_topic: str
    progress_partitions: int
    progress_replication: int
    transactional_id_prefix: str
    job_id: str | None
    replay_check: bool
    origin: dict[str, str] = field(default_factory=dict)
    broker_wait_ms: int = 60_000

    @property
    def connection(self) -> dict[str, Any]:
        """Only where the cluster is and how to log in: what the progress reader and admin need."""
        return {
            k: v for k, v in self.producer.items() if k in TOP_LEVEL_EXACT or k.startswith(TOP_LEVEL_PREFIXES)
        }

    @property
    def bootstrap_servers(self) -> str:
        return str(self.producer["bootstrap.servers"])


def _int_option(
    options: Mapping[str, str],
    name: str,
    default: int,
    low: int,
    errors: dict,
    *,
    broker_default: bool = True,
) -> int:
    """An integer option of at least `low`; -1 (the broker's default) too when `broker_default`."""
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        errors[name] = [f"must be an integer, got {raw!r}"]
        return default
    if value < low and not (broker_default and value == -1):
        also = " (or -1 for the broker default)" if broker_default else ""
        errors[name] = [f"must be at least {low}{also}, got {value}"]
    return value


def parse_sink_options(options: Mapping[str, str], *, batch: bool = False) -> SinkOptions:
    """Parse and check the options; one `ConfigException` naming every bad option."""
    opts = {str(k).lower(): v for k, v in options.items()}
    errors: dict[str, list[str]] = {}
    producer: dict[str, Any] = {"acks": "all", "partitioner": "murmur2_random"}
    origin: dict[str, str] = {}
    for key, value in opts.items():
        if key.startswith(KAFKA_PREFIX) and len(key) > len(KAFKA_PREFIX):
            producer[key[len(KAFKA_PREFIX) :]] = value
            origin[key[len(KAFKA_PREFIX) :]] = key
        elif key not in OWN_OPTIONS and key not in SPARK_OPTIONS:
            known = ", ".join(sorted(OWN_OPTIONS))
            errors[key] = [f"is not an option of eosconnect-kafka (options: {known}); remove it"]
    if not str(producer.get("bootstrap.servers") or "").strip():
        errors["kafka.bootstrap.servers"] = [
            'is required: .option("kafka.bootstrap.servers", "host1:9092,host2:9092")'
        ]
    topic = opts.get("topic")
    if topic is not None and not _TOPIC_NAME.match(str(topic)):
        errors["topic"] = [f"{topic!r} is not a valid Kafka topic name (letters, digits, '.', '_', '-')"]
    progress_topic = str(opts.get("progress.topic") or DEFAULT_PROGRESS_TOPIC)
    if not _TOPIC_NAME.match(progress_topic):
        errors["progress.topic"] = [f"{progress_topic!r} is not a valid Kafka topic name"]
    partitions = _int_option(opts, "progress.topic.partitions", 4, 1, errors)
    replication = _int_option(opts, "progress.topic.replication.factor", -1, 1, errors)
    broker_wait_ms = _int_option(opts, "broker.wait.ms", 60_000, 1, errors, broker_default=False)
    prefix = str(opts.get("transactional.id.prefix") or DEFAULT_TRANSACTIONAL_ID_PREFIX)
    job_id = opts.get("job.id")
    if batch and not str(job_id or "").strip():
        errors["job.id"] = [
            "is required for a batch write: name the job (e.g. .option('job.id', 'orders-2024-06-01')) so "
            "that a re-run of the same job is recognised and its committed partitions are skipped"
        ]
    replay_check = str(opts.get("replay.check", "true")).strip().lower()
    if replay_check not in ("true", "false"):
        errors["replay.check"] = [f"must be true or false, got {opts.get('replay.check')!r}"]
    config = ClientConfig("producer", producer, origin)
    for key, why in FORCED_WHY.items():
        forced(config, key, "checked" if key == "transactional.id" else True, why)
    config.pop("transactional.id")  # set per partition on the executors
    if not errors:
        from eosconnect.storage.clients import ClientConfigError, validate_client_config

        try:
            validate_client_config("producer", {**config, "transactional.id": "probe"}, origin)
        except ClientConfigError as exc:
            errors.update(exc.errors)
    if errors:
        raise ConfigException(errors=errors)
    return SinkOptions(
        producer=dict(config),
        topic=str(topic) if topic is not None else None,
        progress_topic=progress_topic,
        progress_partitions=partitions,
        progress_replication=replication,
        transactional_id_prefix=prefix,
        job_id=str(job_id) if job_id is not None else None,
        replay_check=replay_check == "true",
        origin=origin,
        broker_wait_ms=broker_wait_ms,
    )


def _type_name(data_type: Any) -> str:
    return str(data_type.simpleString())


def check_sink_schema(schema: Any, options: SinkOptions) -> tuple[str, ...]:
    """The columns of Spark's Kafka sink, with their types checked; returns the column names in
    order. Raises `ConfigException` keyed by column name."""
    from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

    fields = {f.name.lower(): f for f in schema.fields}
    errors: dict[str, list[str]] = {}
    if "value" not in fields:
        columns = ", ".join(f.name for f in schema.fields) or "none"
        errors["value"] = [
            f"the DataFrame has no `value` column (its columns: {columns}). Select one, e.g. "
            "df.selectExpr('CAST(id AS STRING) AS key', 'to_json(struct(*)) AS value')"
        ]
    for name in ("key", "value"):
        col = fields.get(name)
        if col is not None and not isinstance(col.dataType, StringType | BinaryType):
            errors[name] = [
                f"column `{name}` is {_type_name(col.dataType)}; it must be string or binary: "
                f"CAST({name} AS STRING), or to_json(...) for a struct"
            ]
    topic = fields.get("topic")
    if topic is not None and not isinstance(topic.dataType, StringType):
        errors["topic"] = [f"column `topic` is {_type_name(topic.dataType)}; it must be a string"]
    if topic is None and options.topic is None:
        errors["topic"] = [
            "no topic: set .option('topic', 'name') or give the DataFrame a string `topic` column"
        ]
    partition = fields.get("partition")
    if partition is not None and not isinstance(partition.dataType, IntegerType):
        errors["partition"] = [f"column `partition` is {_type_name(partition.dataType)}; it must be an int"]
    headers = fields.get("headers")
    if headers is not None:
        dtype = headers.dataType
        ok = (
            isinstance(dtype, ArrayType)
            and isinstance(dtype.elementType, StructType)
            and [f.name for f in dtype.elementType.fields] == ["key", "value"]
            and isinstance(dtype.elementType.fields[0].dataType, StringType)
            and isinstance(dtype.elementType.fields[1].dataType, BinaryType | StringType)
        )
        if not ok:
            errors["headers"] = [
                f"column `headers` is {_type_name(dtype)}; it must be array<struct<key:string,value:binary>>"
            ]
    if errors:
        raise ConfigException(errors=errors)
    return tuple(f.name.lower() for f in schema.fields)
