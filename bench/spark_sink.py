"""eosconnect-kafka vs Spark's built-in Kafka sink: the same stream, interleaved rounds.

One broker, one SparkSession (local[4]) with spark-sql-kafka-0-10 on `spark.jars`. The input is
N rows of 100-byte values in 4 Parquet files (4 Spark partitions); each round is one streaming query
(`trigger(availableNow=True)`, a fresh checkpoint and topic) writing all of it with one sink, timed
from `start()` to its end. Rounds alternate between the sinks so that load on the machine hits both.

Last line, machine-readable:  spark_sink_ratio=<ours/builtin rows/s> ours_rows_s=<> builtin_rows_s=<>
Target: ratio >= 0.8.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from pathlib import Path

from bench.workdir import new_workdir
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from eosconnect.cluster.spark import create_spark_session
from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.spark import register
from eosconnect.tools.spark_query import builtin_kafka_sink_jars

console = Console(stderr=True)


def make_input(spark, path: Path, rows: int) -> None:  # type: ignore[no-untyped-def]
    df = spark.range(rows).selectExpr(
        "CAST(id AS STRING) AS key", "rpad(CAST(id AS STRING), 100, 'x') AS value"
    )
    df.repartition(4).write.mode("overwrite").parquet(str(path))


def one_round(spark, sink: str, data: Path, bootstrap: str, work: Path, rows: int) -> float:  # type: ignore[no-untyped-def]
    topic = f"bench-{sink}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the future is answered
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(30)
    schema = spark.read.parquet(str(data)).schema
    stream = spark.readStream.schema(schema).parquet(str(data))
    started = time.monotonic()
    query = (
        stream.writeStream.format(sink)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", str(work / f"ckpt-{topic}"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    elapsed = time.monotonic() - started
    if query.exception():
        raise RuntimeError(f"{sink}: {query.exception()}")
    return rows / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = new_workdir("eosconnect-bench-spark-")
    with LocalKafkaCluster(work / "kafka", brokers=1, tie_to_parent=True) as cluster:
        bootstrap = cluster.bootstrap_servers
        spark = create_spark_session(
            "local[4]", "bench-spark-sink", {"spark.jars": builtin_kafka_sink_jars()}
        )
        register(spark)
        make_input(spark, work / "input", args.rows)
        results: dict[str, list[float]] = {"eosconnect-kafka": [], "kafka": []}
        for i in range(args.rounds):
            for sink in ("eosconnect-kafka", "kafka") if i % 2 == 0 else ("kafka", "eosconnect-kafka"):
                rate = one_round(spark, sink, work / "input", bootstrap, work, args.rows)
                results[sink].append(rate)
                console.print(f"round {i + 1}: {sink:17s} {rate:>12,.0f} rows/s")
        spark.stop()
    ours, builtin = statistics.median(results["eosconnect-kafka"]), statistics.median(results["kafka"])
    table = Table(title=f"{args.rows:,} rows of 100 B, 4 partitions, median of {args.rounds} rounds")
    table.add_column("sink")
    table.add_column("rows/s", justify="right")
    table.add_row("eosconnect-kafka (exactly once)", f"{ours:,.0f}")
    table.add_row("Spark kafka (at least once)", f"{builtin:,.0f}")
    Console().print(table)
    print(f"spark_sink_ratio={ours / builtin:.2f} ours_rows_s={ours:.0f} builtin_rows_s={builtin:.0f}")


if __name__ == "__main__":
    main()
