"""A streaming query JdbcSource -> Spark join -> Kafka, run as its own driver process.

The demo and the tests SIGKILL this process mid-stream and start it again on the same checkpoint,
which is how a crashed Spark driver comes back. `--sink eosconnect-kafka` writes exactly once;
`--sink kafka` uses Spark's built-in Kafka sink (its jars passed with `--jars`), for comparison.

    python -m eosconnect.tools.spark_query --db /tmp/shop.db --table orders \\
        --bootstrap 127.0.0.1:9092 --topic orders-enriched --checkpoint /tmp/ckpt
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ITEMS = [(f"item-{i}", f"category-{i % 4}", 1.0 + i % 7) for i in range(10)]


def build_query(spark, args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """orders (JdbcSource) joined with a static item catalogue, one JSON value per order, key = id."""
    from pyspark.sql import functions as F  # noqa: N812

    orders = (
        spark.readStream.format("eosconnect")
        .option("connector.class", "JdbcSource")
        .option("connection.url", f"sqlite:///{args.db}")
        .option("tables", args.table)
        .option("mode", "incrementing")
        .option("incrementing.column.name", "id")
        .option("topic.prefix", "")
        .option("batch.max.rows", "500")
        .option("poll.interval.ms", "200")
        .option("max.records.per.batch", str(args.max_rows))
        .load()
    )
    schema = "id LONG, item STRING, amount DOUBLE"
    rows = orders.select(F.from_json("value", schema).alias("o")).select("o.*")
    catalogue = spark.createDataFrame(ITEMS, "item_key STRING, category STRING, unit_price DOUBLE")
    # item-N: N mod 10 picks the catalogue row (a stream-static join: deterministic on replay)
    enriched = rows.withColumn("item_key", F.concat(F.lit("item-"), (F.col("id") % 10).cast("string"))).join(
        catalogue, "item_key"
    )
    out = enriched.select(
        F.col("id").cast("string").alias("key"),
        F.to_json(
            F.struct("id", "item", "category", "amount", (F.col("amount") * F.col("unit_price")).alias("total"))
        ).alias("value"),
    )
    writer = (
        out.writeStream.format(args.sink)
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.topic)
        .option("checkpointLocation", args.checkpoint)
        .trigger(processingTime=f"{args.trigger_ms} milliseconds")
    )
    if args.sink == "eosconnect-kafka":
        writer = writer.option("progress.topic", args.progress_topic)
    return writer.start()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", required=True)
    parser.add_argument("--table", default="orders")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--progress-topic", default="eosconnect-spark-progress")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--sink", default="eosconnect-kafka", choices=["eosconnect-kafka", "kafka"])
    parser.add_argument("--jars", default="", help="comma-separated jars for spark.jars")
    parser.add_argument("--master", default="local[2,4]")
    parser.add_argument("--max-rows", type=int, default=2000)
    parser.add_argument("--trigger-ms", type=int, default=500)
    parser.add_argument("--ready-file", help="written once the first batch has committed")
    parser.add_argument("--until-idle", action="store_true", help="stop once no new rows arrive for 5 s")
    args = parser.parse_args(argv)

    from eosconnect.cluster.spark import create_spark_session
    from eosconnect.spark import register

    conf = {"spark.sql.shuffle.partitions": "2"}
    if args.jars:
        conf["spark.jars"] = args.jars
    spark = create_spark_session(args.master, app_name="eosconnect-spark-query", conf=conf)
    register(spark)
    query = build_query(spark, args)
    ready = Path(args.ready_file) if args.ready_file else None
    idle_since, last_batch = time.monotonic(), -1
    while query.isActive:
        query.awaitTermination(1)
        progress = query.lastProgress
        if ready is not None and progress and not ready.exists():
            ready.write_text(str(query.id))
        if progress and progress.get("numInputRows") and progress["batchId"] != last_batch:
            idle_since, last_batch = time.monotonic(), progress["batchId"]
        idle = last_batch >= 0 and time.monotonic() - idle_since > 5
        if args.until_idle and idle and not query.status["isTriggerActive"]:
            break
    if query.exception():
        raise SystemExit(f"query failed: {query.exception()}")
    query.stop()
    spark.stop()


if __name__ == "__main__":
    main()
