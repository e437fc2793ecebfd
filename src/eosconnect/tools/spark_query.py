"""A streaming query JdbcSource -> Spark join -> Kafka, run as its own driver process.

The demo and the tests SIGKILL this process mid-stream and start it again on the same checkpoint,
which is how a crashed Spark driver comes back. `--sink eosconnect-kafka` writes exactly once;
`--sink kafka` uses Spark's built-in Kafka sink (its jars passed with `--jars`), for comparison.

    python -m eosconnect.tools.spark_query --db /tmp/shop.db --table orders \\
        --bootstrap 127.0.0.1:9092 --topic orders-enriched --checkpoint /tmp/ckpt
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from eosconnect.runtime.host import die_with_parent

ITEMS = [(f"item-{i}", f"category-{i % 4}", 1.0 + i % 7) for i in range(10)]


def build_query(spark, args: argparse.Namespace):
    """orders (JdbcSource) joined with a static item catalogue, one JSON value per order, key = id."""
    from pyspark.sql import functions as F

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
            F.struct(
                "id", "item", "category", "amount", (F.col("amount") * F.col("unit_price")).alias("total")
            )
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
    from eosconnect.spark import register, stop_query

    conf = {"spark.sql.shuffle.partitions": "2"}
    if args.jars:
        conf["spark.jars"] = args.jars
    spark = create_spark_session(args.master, app_name="eosconnect-spark-query", conf=conf)
    register(spark)
    query = build_query(spark, args)
    ready = Path(args.ready_file) if args.ready_file else None
    idle_since, last_batch = time.monotonic(), -1
    stopping: list[int] = []
    # SIGTERM stops the query as an operator would (StreamingQuery.stop(), then the session).
    signal.signal(signal.SIGTERM, lambda signum, _frame: stopping.append(signum))
    while query.isActive and not stopping:
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
    stop_query(query)  # quietly: a batch it cancels is replayed by the next run
    spark.stop()


if __name__ == "__main__":
    main()


# ------------------------------------------------------------------------------------ launcher

#: Jars of Spark's built-in Kafka sink that pyspark does not ship (the rest is in pyspark/jars).
BUILTIN_SINK_JARS = (
    "spark-sql-kafka-0-10",
    "spark-token-provider-kafka-0-10",
    "kafka-clients",
    "commons-pool2",
)


def builtin_kafka_sink_jars() -> str:
    """`spark.jars` for Spark's own Kafka sink: spark-sql-kafka-0-10 of the installed pyspark version
    (or the newest published 4.x below it, when that version is not on Maven Central), fetched once."""
    import pyspark

    from eosconnect.devkafka.maven import fetch_artifacts, published_versions

    artifact = "spark-sql-kafka-0-10_2.13"
    versions = published_versions("org.apache.spark", artifact, f"[4.0,{pyspark.__version__}]")
    libs = fetch_artifacts(f"spark-sql-kafka-{versions[0]}", [f"org.apache.spark:{artifact}:{versions[0]}"])
    return ",".join(str(p) for p in sorted(libs.glob("*.jar")) if p.name.startswith(BUILTIN_SINK_JARS))


@dataclass
class SparkQueryProcess:
    """`python -m eosconnect.tools.spark_query ...` as a child process that dies with its parent."""

    args: list[str]
    workdir: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 900.0) -> SparkQueryProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        ready = self.workdir / "ready"
        ready.unlink(missing_ok=True)
        log = (self.workdir / "query.log").open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "eosconnect.tools.spark_query", *self.args, "--ready-file", str(ready)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        deadline = time.monotonic() + timeout
        while not ready.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"the query exited with {self.proc.returncode}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the query committed no batch within {timeout:.0f}s:\n{self.tail()}")
            time.sleep(0.5)
        return self

    def tail(self, lines: int = 30) -> str:
        text = (self.workdir / "query.log").read_text(errors="replace").splitlines()
        return "\n".join(line for line in text if not line.lstrip().startswith("at "))[-4000:]

    def kill_python_workers(self) -> list[int]:
        """SIGKILL the Python workers of Spark's executors (forked by pyspark's daemon, which the JVM
        started): the tasks running in them fail and Spark retries them. Returns their pids."""
        assert self.proc is not None
        parents: dict[int, int] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = stat.read_text().rsplit(")", 1)[1].split()
                parents[int(stat.parent.name)] = int(fields[1])

        def depth_below_driver(pid: int) -> int:  # called only while the driver process runs (proc set)
            depth = 0
            while pid in parents and pid != self.proc.pid:  # type: ignore[union-attr]
                pid, depth = parents[pid], depth + 1
            return depth if pid == self.proc.pid else -1  # type: ignore[union-attr]

        # driver -> JVM (1) -> daemon (2) -> workers (3)
        workers = [pid for pid in parents if depth_below_driver(pid) == 3]
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return workers

    def terminate(self, timeout: float = 120.0) -> int:
        """SIGTERM the driver: it stops the query (`StreamingQuery.stop()`) and its session and exits."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL the driver: its Python process and Spark's JVM (one process group)."""
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
