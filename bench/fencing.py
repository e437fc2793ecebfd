"""Zombie fencing and start-up latency.

(1) Time to fence N previous tasks' transactional ids (N = 1, 8, 64) the way the leader does it
    (`fence_transactional_ids`: one `init_transactions()` per id, in parallel), against ids that
    each have an open transaction with records in it, as real zombies would.
(2) Time from `POST /connectors` to all tasks RUNNING (1, 4, 16 tasks) on a real worker with
    local Spark and exactly-once enabled (fencing request, config-topic reads, producer set-up).

Last line, machine-readable:  fence64_s=<seconds> start16_s=<seconds>
Targets: fencing 64 tasks <= 2 s, 16 tasks RUNNING <= 15 s.
"""

from __future__ import annotations

import argparse
import time
import uuid

from bench.workdir import new_workdir
from confluent_kafka import Producer
from rich.console import Console
from rich.table import Table

from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.storage.transactional_ids import fence_transactional_ids
from eosconnect.tools.worker_process import WorkerProcess

console = Console(stderr=True)


def open_zombies(bootstrap: str, ids: list[str], topic: str) -> list[Producer]:
    zombies = []
    for tid in ids:
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "log_level": 0})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic, b"zombie")
        producer.flush(10)
        zombies.append(producer)
    return zombies


def time_fencing(bootstrap: str, n: int) -> float:
    prefix = f"bench-fence-{uuid.uuid4().hex[:6]}"
    ids = [f"{prefix}-{i}" for i in range(n)]
    zombies = open_zombies(bootstrap, ids, f"{prefix}-data")
    started = time.perf_counter()
    fence_transactional_ids({"bootstrap.servers": bootstrap, "log_level": 0}, ids)
    elapsed = time.perf_counter() - started
    del zombies
    return elapsed


def time_start(worker: WorkerProcess, tasks: int) -> float:
    name = f"start{tasks}-{uuid.uuid4().hex[:4]}"
    config = {
        "connector.class": "SequenceSource",
        "tasks.max": str(tasks),
        "topic": f"bench-{name}",
        "rate.per.task": "10",
    }
    started = time.perf_counter()
    response = worker.create_connector(name, config)
    if response.status_code != 201:
        raise SystemExit(f"could not create {name}: {response.text}")
    worker.wait_for(lambda: worker.task_states(name) == ["RUNNING"] * tasks, 300, f"{tasks} tasks RUNNING")
    elapsed = time.perf_counter() - started
    worker.request("DELETE", f"/connectors/{name}")
    time.sleep(3)  # let the deleted connector's tasks stop and free their slots
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    run_dir = new_workdir("eosconnect-bench-fencing-")
    cluster = LocalKafkaCluster(run_dir / "kafka", tie_to_parent=True)
    bootstrap = cluster.start()
    worker = None
    try:
        fence = {n: time_fencing(bootstrap, n) for n in (1, 8, 64)}
        suffix = uuid.uuid4().hex[:6]
        worker = WorkerProcess(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-{suffix}",
                "config.storage.topic": f"bench-configs-{suffix}",
                "offset.storage.topic": f"bench-offsets-{suffix}",
                "status.storage.topic": f"bench-status-{suffix}",
                "config.storage.replication.factor": "1",
                "offset.storage.replication.factor": "1",
                "status.storage.replication.factor": "1",
                "exactly.once.source.support": "enabled",
                "listeners": "http://127.0.0.1:0",
                "spark.master": "local[24,4]",
            },
            run_dir / "worker",
        ).start()
        start = {n: time_start(worker, n) for n in (1, 4, 16)}
        table = Table(title="Zombie fencing and start-up (seconds)")
        table.add_column("what")
        table.add_column("N", justify="right")
        table.add_column("seconds", justify="right")
        for n, s in fence.items():
            table.add_row("fence N open transactional ids", str(n), f"{s:.2f}")
        for n, s in start.items():
            table.add_row("POST /connectors -> N tasks RUNNING", str(n), f"{s:.2f}")
        Console().print(table)
        print(f"fence64_s={fence[64]:.2f} start16_s={start[16]:.2f}")
    finally:
        if worker is not None:
            worker.stop()
        cluster.stop()


if __name__ == "__main__":
    main()
