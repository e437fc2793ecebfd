"""Config-topic writes on a worker that cannot reach its brokers (storage/config_store.py): each
fails within the store's write timeout from the moment it was asked, a write behind another one
included, and closing the store does not wait for the brokers."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from eosconnect.storage.config_state import TargetState
from eosconnect.storage.config_store import ConfigStore
from eosconnect.storage.config_writers import ConfigWriteError
from eosconnect.worker_config import WorkerConfig

WRITE_TIMEOUT_S = 2.0


def unreachable_store() -> ConfigStore:
    # Nothing listens on the discard port. Without exactly-once support any worker writes, through
    # the idempotent producer: no transaction coordinator is needed to start writing.
    worker = WorkerConfig.parse(
        {
            "bootstrap.servers": "127.0.0.1:9",
            "group.id": "config-store-unit",
            "config.storage.topic": "config-store-unit-configs",
            "offset.storage.topic": "config-store-unit-offsets",
            "status.storage.topic": "config-store-unit-status",
            "exactly.once.source.support": "disabled",
        }
    )
    return ConfigStore(worker, write_timeout_s=WRITE_TIMEOUT_S)


def timed_write(store: ConfigStore, connector: str) -> float:
    began = time.monotonic()
    with pytest.raises(ConfigWriteError, match="config topic"):
        store.put_target_state(connector, TargetState.PAUSED)
    return time.monotonic() - began


def test_writes_to_an_unreachable_config_topic_fail_in_time_and_do_not_queue() -> None:
    store = unreachable_store()
    try:
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(timed_write, store, "a")
            time.sleep(0.5)  # the first holds the write lock
            second = pool.submit(timed_write, store, "b")
            took = [first.result(), second.result()]
        # Each within its own timeout from its call (and a second of slack for a loaded machine),
        # the second's wait for the first's lock included.
        assert all(t < WRITE_TIMEOUT_S + 1.0 for t in took), took
        assert took[0] >= WRITE_TIMEOUT_S - 0.1, took  # it did wait for the acknowledgement
    finally:
        began = time.monotonic()
        store.close()
        assert time.monotonic() - began < 1.0  # closing gives the producer up, without waiting
