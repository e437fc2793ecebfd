"""`make demo`: the pipeline end to end on a local broker and Spark `local[*]`.

For now this runs the walking skeleton (each Spark task writes sequence-numbered records and its
offset record in one transaction) and verifies the output with read_committed.
"""

from __future__ import annotations

import json
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from eosconnect.cluster.spark import create_spark_session
from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.runtime.skeleton import SkeletonJob, run_skeleton
from eosconnect.storage.topic_reader import read_to_end
from eosconnect.tools.verify import SequenceReport, check_sequences

console = Console()


def print_report(report: SequenceReport, title: str) -> None:
    table = Table(title=title)
    table.add_column("check")
    table.add_column("value", justify="right")
    for name, value in report.summary_rows():
        table.add_row(name, value)
    console.print(table)
    for anomaly in report.anomalies:
        console.print(f"  [red]{anomaly}[/red]")


def run_demo(tasks: int = 4, records_per_task: int = 5000, run_dir: Path | None = None) -> bool:
    started = time.monotonic()
    run_dir = run_dir or Path(tempfile.mkdtemp(prefix="eosconnect-demo-"))
    cluster = LocalKafkaCluster(run_dir / "kafka", brokers=1, tie_to_parent=True)
    with console.status("Starting a local Apache Kafka broker ..."):
        bootstrap = cluster.start()
    console.print(f"Apache Kafka {cluster.version} at {bootstrap}")
    try:
        suffix = uuid.uuid4().hex[:6]
        data, offsets = f"demo-data-{suffix}", f"demo-offsets-{suffix}"
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        for fut in admin.create_topics([NewTopic(data, tasks, 1), NewTopic(offsets, 1, 1)]).values():
            fut.result(30)
        with console.status("Starting Spark local[*] ..."):
            spark = create_spark_session("local[*]", app_name="eosconnect-demo")
        job = SkeletonJob(bootstrap, data, offsets, f"demo-{suffix}", records_per_task)
        with console.status(
            f"Running {tasks} Spark tasks, {records_per_task} records each, exactly once ..."
        ):
            reports = run_skeleton(spark, job, tasks)
        console.print(
            f"{len(reports)} Spark tasks committed (Python worker pids {sorted({r['pid'] for r in reports})})"
        )
        with console.status("Reading the output back with read_committed ..."):
            records = read_to_end({"bootstrap.servers": bootstrap}, data)
            offset_records = read_to_end({"bootstrap.servers": bootstrap}, offsets)
        observed = []
        for rec in records:
            value = json.loads(rec.value or b"{}")
            observed.append((value["task"], value["seq"]))
        report = check_sequences(observed, {t: records_per_task for t in range(tasks)})
        print_report(report, f"Verification of {data} (read_committed)")
        offsets_ok = len(offset_records) == tasks
        console.print(f"offset records committed with the data: {len(offset_records)} of {tasks}")
        spark.stop()
        ok = report.ok and offsets_ok
        verdict = "[green]demo passed[/]" if ok else "[red]demo FAILED[/]"
        console.print(f"{verdict} in {time.monotonic() - started:.1f}s")
        return ok
    finally:
        cluster.stop()
