"""Helpers for tests that run connectors end to end on the real broker and Spark.

`run_job` is registered for every test module by tests/conftest.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from eosconnect.cluster.jobs import ConnectorJob

__all__ = ["committed_offsets", "offset_history", "run_job", "wait_until"]


def wait_until(check: Callable[[], bool], timeout: float, what: str, job: ConnectorJob | None = None) -> None:
    """Poll `check` every half second; fail the test on timeout, or as soon as `job` ended early."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if job is not None and not job.running():
            pytest.fail(f"the connector's Spark job ended before {what}: {job.outcomes} {job.error}")
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


@pytest.fixture
def run_job(spark: Any, tmp_path: Path) -> Iterator[Callable[..., ConnectorJob]]:
    """Start `ConnectorJob`s (connector config, worker config, job kwargs); stops leftovers at teardown."""
    jobs: list[ConnectorJob] = []

    def _run(connector: dict[str, str], worker: dict[str, str], **kwargs: Any) -> ConnectorJob:
        job = ConnectorJob(spark, connector, worker, tmp_path / f"control-{len(jobs)}", **kwargs).start()
        jobs.append(job)
        return job

    yield _run
    for job in jobs:
        if job.running():
            job.stop(10)


def offset_history(
    read_committed: Callable[..., list[Any]], topic: str, connector: str
) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Every committed (source partition, source offset) record of `connector`, in order."""
    history = []
    for rec in read_committed(topic):
        name, partition = json.loads(rec.key)
        if name == connector:
            history.append((partition, json.loads(rec.value) if rec.value else None))
    return history


def committed_offsets(
    read_committed: Callable[..., list[Any]], topic: str, connector: str
) -> dict[str, dict[str, Any] | None]:
    """The latest offset per source partition (keyed by the partition as sorted JSON)."""
    return {
        json.dumps(partition, sort_keys=True): offset
        for partition, offset in offset_history(read_committed, topic, connector)
    }
