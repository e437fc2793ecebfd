"""Sink connectors and tasks: consume records from Kafka and deliver them elsewhere (KIP-656 work).

Kept deliberately small and close to Kafka Connect's shape so existing sink designs carry over.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Mapping, Sequence

from eosconnect.api.connector import Connector, Task
from eosconnect.api.context import SinkTaskContext
from eosconnect.api.records import OffsetAndMetadata, SinkRecord, TopicPartition

__all__ = ["SinkConnector", "SinkTask"]


class SinkConnector(Connector):
    """Base class for sink connectors; the topics come from the `topics`/`topics.regex` settings."""

    @abstractmethod
    def task_class(self) -> type[SinkTask]: ...


class SinkTask(Task):
    """Base class for sink tasks. The runtime calls `initialize`, `start`, `open` for assigned
    partitions, then `put` with batches and `pre_commit` before committing consumer offsets."""

    @property
    def context(self) -> SinkTaskContext:
        ctx: SinkTaskContext | None = self.__dict__.get("_context")
        if ctx is None:
            raise RuntimeError(
                f"{type(self).__name__}.context is not set: the runtime calls initialize(context) first"
            )
        return ctx

    @context.setter
    def context(self, value: SinkTaskContext) -> None:
        self.__dict__["_context"] = value

    def initialize(self, context: SinkTaskContext) -> None:
        self.context = context

    @abstractmethod
    def put(self, records: Sequence[SinkRecord]) -> None:
        """Deliver (or buffer) a batch. Raise `RetriableException` to get the same batch again."""

    def flush(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Make everything given to `put` up to these offsets durable. The default does nothing."""

    def pre_commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> Mapping[TopicPartition, OffsetAndMetadata]:
        """Return the offsets that are safe to commit; the default flushes and returns them all."""
        self.flush(offsets)
        return offsets

    def open(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions were assigned to this task; set up per-partition writers here."""

    def close(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions were taken away; release their resources (`stop` is still called later)."""
