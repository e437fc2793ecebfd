"""The background copy of a connector's committed offsets to the worker's global offsets topic."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from eosconnect.api.records import SourceOffset, SourcePartition
from eosconnect.storage.offsets.placement import OffsetsTopicPlacement
from eosconnect.storage.offsets.writing import (
    OffsetWriteError,
    OffsetWriter,
    PartitionOffsets,
    non_transactional,
)

__all__ = ["GlobalOffsetCopier"]

log = logging.getLogger(__name__)


class GlobalOffsetCopier:
    """Copies a connector's committed offsets to the worker's global offsets topic, in the background.

    KIP-618: after each commit to a separate offsets topic, the same offsets go to the global topic
    with a non-transactional producer and the worker's principal, on a thread of their own that
    retries forever and never fails or blocks the task. Submissions coalesce (latest offset per
    partition wins), so a slow or unreachable cluster costs memory per partition, not per commit.
    """

    def __init__(
        self,
        connector: str,
        topic: str,
        producer_config: Mapping[str, Any],
        *,
        initial_backoff: float = 0.5,
        max_backoff: float = 30.0,
    ) -> None:
        self.connector = connector
        self.topic = topic
        config = non_transactional(producer_config)
        # Report failures after 30s instead of librdkafka's 5 minutes, so they are logged and retried.
        config.setdefault("message.timeout.ms", 30_000)
        self._config = config
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._pending: dict[SourcePartition, SourceOffset | None] = {}
        self._in_flight = 0
        self._closing = False
        self._abandon = threading.Event()
        self._cond = threading.Condition()
        self._writer: OffsetWriter | None = None
        #: Offsets delivered so far, and failed attempts (for metrics and tests).
        self.delivered = 0
        self.failures = 0
        self._thread = threading.Thread(target=self._run, name=f"offset-copier-{connector}", daemon=True)
        self._thread.start()

    @classmethod
    def for_placement(cls, connector: str, placement: OffsetsTopicPlacement) -> GlobalOffsetCopier:
        return cls(connector, placement.global_topic, placement.global_producer_config)

    def submit(self, offsets: PartitionOffsets) -> None:
        """Queue committed offsets (None: deleted) for copying; returns at once."""
        frozen = {
            SourcePartition.of(p): (SourceOffset.of(o) if o is not None else None) for p, o in offsets.items()
        }
        if not frozen:
            return
        with self._cond:
            if self._closing:
                log.warning("offset copier of %r is closed; dropping %d offsets", self.connector, len(frozen))
                return
            self._pending.update(frozen)
            self._cond.notify_all()

    def flush(self, timeout: float) -> bool:
        """Wait until everything submitted so far is in the global topic; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending or self._in_flight:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Deliver what is pending within `timeout`, then stop; undelivered offsets are logged."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._abandon.set()
            with self._cond:
                self._cond.notify_all()
            self._thread.join(5.0)
        with self._cond:
            left = len(self._pending) + self._in_flight
        if left:
            log.warning(
                "offset copier of %r stopped with %d offsets not copied to %r; the global topic lags "
                "behind the connector's own offsets topic until the connector commits again",
                self.connector,
                left,
                self.topic,
            )
        if not self._thread.is_alive() and self._writer is not None:
            self._writer.close(0)
            self._writer = None

    def _run(self) -> None:
        backoff = self._initial_backoff
        while True:
            with self._cond:
                while not self._pending and not self._closing:
                    self._cond.wait()
                if not self._pending or self._abandon.is_set():
                    return
                batch, self._pending = self._pending, {}
                self._in_flight = len(batch)
            failed = self._copy(batch)
            with self._cond:
                for partition in failed:
                    if partition not in self._pending:  # a newer offset supersedes the failed one
                        self._pending[partition] = batch[partition]
                self._in_flight = 0
                self.delivered += len(batch) - len(failed)
                self._cond.notify_all()
                if not failed:
                    backoff = self._initial_backoff
                    continue
                if self._closing:
                    return
                self._cond.wait(backoff)  # close() cuts the back-off short
            backoff = min(backoff * 2, self._max_backoff)

    def _copy(self, batch: Mapping[SourcePartition, SourceOffset | None]) -> set[SourcePartition]:
        """Write a batch; returns the partitions that must be retried. Never raises."""
        try:
            if self._writer is None:
                self._writer = OffsetWriter(self._config, self.topic)
            self._writer.write(self.connector, batch, timeout=None, cancel=self._abandon)
            return set()
        except OffsetWriteError as exc:
            self.failures += 1
            log.warning(
                "Copying %d offsets of connector %r to the global offsets topic %r failed (%s); retrying",
                len(exc.failed),
                self.connector,
                self.topic,
                exc,
            )
            if exc.fatal:
                self._drop_writer()
            return set(exc.failed)
        except Exception as exc:
            self.failures += 1
            log.warning(
                "Copying offsets of connector %r to %r failed (%s: %s); retrying",
                self.connector,
                self.topic,
                type(exc).__name__,
                exc,
            )
            self._drop_writer()
            return set(batch)

    def _drop_writer(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close(0)
            except Exception:
                log.debug("closing the copier's producer failed", exc_info=True)
            self._writer = None
