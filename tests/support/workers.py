"""Worker and broker set-up shared by the test modules that drive a real `eosconnect worker`.

`worker_settings` is the one place that knows what a test worker needs (its own group and internal
topics on a single-replica broker, a short graceful shutdown, a small Spark); `private_kafka` is a
single broker of a test's own, for tests that stop or kill it; the REST helpers wait for states
the way every worker test does.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from confluent_kafka.admin import AdminClient, NewTopic

from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.tools.worker_process import WorkerProcess

__all__ = [
    "LONG_TESTS",
    "TASKS_PER_SLOT",
    "connector_path",
    "create_topics",
    "delete_connector",
    "packing_settings",
    "private_kafka",
    "sequence_config",
    "wait_running",
    "worker_settings",
]

#: Set by `make test-long`: tests run their long form (longer outages, more rounds).
LONG_TESTS = os.environ.get("EOSCONNECT_LONG_TESTS") == "1"

#: EOSCONNECT_TEST_TASKS_PER_SLOT=N runs every worker the tests start with `eosconnect.tasks.per.slot=N`
#: (task groups, docs/architecture.md), unless a test sets the setting itself: any suite can then be
#: run with packing on. Unset: the worker's own default.
TASKS_PER_SLOT = os.environ.get("EOSCONNECT_TEST_TASKS_PER_SLOT", "").strip()


def packing_settings() -> dict[str, str]:
    """The session's `eosconnect.tasks.per.slot` for a test worker (empty: the worker's default)."""
    return {"eosconnect.tasks.per.slot": TASKS_PER_SLOT} if TASKS_PER_SLOT else {}


def worker_settings(bootstrap: str, prefix: str | None = None, **overrides: str) -> dict[str, str]:
    """A test worker's properties: group `<prefix>-group` and internal topics `<prefix>-configs`,
    `-offsets`, `-status` (one partition, one replica), exactly-once source support enabled.
    `overrides` use the property names (pass them as `**{"spark.master": ...}`)."""
    prefix = prefix or f"worker-{uuid.uuid4().hex[:8]}"
    return {
        "bootstrap.servers": bootstrap,
        "group.id": f"{prefix}-group",
        "config.storage.topic": f"{prefix}-configs",
        "offset.storage.topic": f"{prefix}-offsets",
        "status.storage.topic": f"{prefix}-status",
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "offset.storage.partitions": "1",
        "status.storage.replication.factor": "1",
        "status.storage.partitions": "1",
        "exactly.once.source.support": "enabled",
        "offset.flush.interval.ms": "500",
        "listeners": "http://127.0.0.1:0",
        "task.shutdown.graceful.timeout.ms": "3000",
        "spark.master": "local[8,4]",
        "spark.driver.memory": "768m",
        **packing_settings(),
        **overrides,
    }


@contextmanager
def private_kafka(run_dir: Path) -> Iterator[LocalKafkaCluster]:
    """One combined broker+controller of the test's own (tied to the pytest process), for tests
    that stop, kill or restart it without disturbing the session broker."""
    cluster = LocalKafkaCluster(run_dir, brokers=1, tie_to_parent=True)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def create_topics(bootstrap: str, *topics: tuple[str, int]) -> None:
    """Create `(name, partitions)` topics with one replica each."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    for future in admin.create_topics([NewTopic(name, parts, 1) for name, parts in topics]).values():
        future.result(30)


def sequence_config(topic: str, tasks: int = 1, **extra: str) -> dict[str, str]:
    """An endless SequenceSource writing 50 records a second per task."""
    return {
        "connector.class": "SequenceSource",
        "tasks.max": str(tasks),
        "topic": topic,
        "records.per.task": "-1",
        "batch.size": "10",
        "rate.per.task": "50",
        **extra,
    }


def connector_path(name: str) -> str:
    """`/connectors/<name>` with the name percent-encoded (names may hold spaces and `%`)."""
    return "/connectors/" + quote(name, safe="")


def wait_running(worker: WorkerProcess, name: str, tasks: int = 1, timeout: float = 90) -> dict[str, Any]:
    """Wait until the connector and exactly `tasks` tasks are RUNNING; returns that status."""

    def running() -> dict[str, Any] | None:
        status = worker.request("GET", connector_path(name) + "/status").json()
        states = [t["state"] for t in status.get("tasks", [])]
        ok = status.get("connector", {}).get("state") == "RUNNING" and states == ["RUNNING"] * tasks
        return status if ok else None

    return worker.wait_for(running, timeout, f"{name} RUNNING with {tasks} task(s)")


def delete_connector(worker: WorkerProcess, name: str) -> None:
    response = worker.request("DELETE", connector_path(name))
    assert response.status_code in (204, 404), response.text
