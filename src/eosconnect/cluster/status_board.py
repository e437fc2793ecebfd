"""Statuses for the REST API from memory, written to and read from the status topic in the background.

A status GET must answer within a second, also while Kafka is unreachable; and the herder must never
wait for a status write while it holds its lock (a broker outage would stall heartbeats and the
control loop with it). So writes go through a queue to one writer thread (in order, best effort: the
status topic is advisory, docs/architecture.md), a reader thread keeps the topic's snapshot fresh, and
what this worker published last is kept as an overlay: on the leader, which publishes every task's
and connector's status, that overlay is the current truth even before Kafka acknowledged it.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
from collections.abc import Callable

from eosconnect.storage.status_store import Status, StatusSnapshot, StatusStore

log = logging.getLogger(__name__)

REFRESH_S = 1.0
_Key = tuple[str, int | None]  # (connector, task) or (connector, None) for the connector itself


class StatusBoard:
    def __init__(self, store: StatusStore) -> None:
        self.store = store
        self._published: dict[_Key, Status] = {}
        self._lock = threading.Lock()
        self._queue: queue.Queue[Callable[[], object] | None] = queue.Queue()
        self._stop = threading.Event()
        self._writer = threading.Thread(target=self._write_loop, name="status-writer", daemon=True)
        self._reader = threading.Thread(target=self._read_loop, name="status-reader", daemon=True)

    def start(self) -> None:
        self._writer.start()
        self._reader.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Write what is queued (bounded), then stop both threads."""
        self._queue.put(None)
        self._writer.join(timeout)
        self._stop.set()
        self._reader.join(timeout)

    # ------------------------------------------------------------------------------ writes
    def put_connector(self, name: str, status: Status) -> None:
        self._publish((name, None), status, lambda: self.store.put_connector_status(name, status))

    def put_task(self, name: str, task: int, status: Status) -> None:
        self._publish((name, task), status, lambda: self.store.put_task_status(name, task, status))

    def delete(self, name: str, task_count: int) -> None:
        with self._lock:
            for key in [k for k in self._published if k[0] == name]:
                del self._published[key]
        self._queue.put(lambda: self.store.delete_connector_status(name))
        for t in range(task_count):
            self._queue.put(functools.partial(self.store.delete_task_status, name, t))

    def forget_published(self) -> None:
        """This worker no longer leads: what it published is no longer the truth."""
        with self._lock:
            self._published.clear()

    def _publish(self, key: _Key, status: Status, write: Callable[[], object]) -> None:
        with self._lock:
            self._published[key] = status
        self._queue.put(write)

    def _write_loop(self) -> None:
        while (write := self._queue.get()) is not None:
            try:
                write()
            except Exception as exc:
                log.warning("could not write a status record: %s", exc)

    # ------------------------------------------------------------------------------ reads
    def _read_loop(self) -> None:
        while not self._stop.wait(REFRESH_S):
            try:
                self.store.read_to_end(timeout=10)
            except Exception as exc:
                log.debug("status topic not readable now: %s", exc)

    @property
    def topic(self) -> StatusSnapshot:
        """The status topic as last read (never waits for Kafka)."""
        return self.store.snapshot

    def published(self, name: str, task: int | None = None) -> Status | None:
        with self._lock:
            return self._published.get((name, task))
