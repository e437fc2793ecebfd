"""What the runtime hands connectors and tasks: their way back into the runtime.

These are plain objects the runtime fills in, so connector unit tests can build them directly
(with an `InMemoryOffsetStorageReader`, say) without any Kafka or Spark.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from eosconnect.api.errors import ConnectException
from eosconnect.api.metrics import PluginMetrics
from eosconnect.api.offsets import InMemoryOffsetStorageReader, OffsetStorageReader
from eosconnect.api.records import OffsetAndMetadata, TopicPartition, known_or_none
from eosconnect.api.transactions import TransactionalWriter, TransactionContext, TransactionParticipant

__all__ = ["ConnectorContext", "SinkTaskContext", "SourceTaskContext", "WriterFactory"]

log = logging.getLogger(__name__)


def _log_reconfiguration_request() -> None:
    log.info("connector requested task reconfiguration, but it is not attached to a runtime")


def _log_error(error: BaseException) -> None:
    log.error("connector raised an error, but it is not attached to a runtime: %r", error)


@dataclass
class ConnectorContext:
    """Lets a connector (typically a monitoring thread of it) poke the runtime.

    The runtime replaces both callables; the defaults only log, so a connector used on its own
    (in a test) does not crash when it calls them.
    """

    request_task_reconfiguration: Callable[[], None] = _log_reconfiguration_request
    """Ask the runtime to call `task_configs()` again, e.g. when the source's tables changed."""

    raise_error: Callable[[BaseException], None] = _log_error
    """Fail the connector with this error from outside a runtime call (e.g. a background thread)."""

    client_config: Callable[[str], dict[str, Any]] | None = None
    """The Kafka client settings (`"producer"`, `"consumer"` or `"admin"`) the runtime would give
    this connector's tasks: the worker's with the connector's `<kind>.override.*`. Lets a connector
    look at the cluster its tasks use (a mirror lists its source partitions). None outside a runtime."""

    metrics_registry: PluginMetrics = field(default_factory=lambda: PluginMetrics({}))
    """The connector's KIP-877 metrics, tagged `connector` by the runtime (see `plugin_metrics`)."""

    def plugin_metrics(self) -> PluginMetrics:
        """KIP-877: where the connector registers metrics of its own, exported on the `/metrics` of
        the worker that runs it (the leader) with its `connector` tag until it stops."""
        return self.metrics_registry


@dataclass
class SourceTaskContext:
    """Given to `SourceTask.initialize` before `start`.

    `transaction_context` is None unless the connector runs with connector-defined transaction
    boundaries; tasks that support them must check for None.
    """

    configs: dict[str, str] = field(default_factory=dict)
    offset_storage_reader: OffsetStorageReader = field(default_factory=InMemoryOffsetStorageReader)
    transaction_context: TransactionContext | None = None
    #: The worker's `file.allowed.dirs` (set by the runtime; None: not restricted). Tasks that open
    #: local files by a configured path (the FileStream tasks) must stay inside these directories.
    file_allowed_dirs: str | None = None
    #: The task's KIP-877 metrics, tagged `connector` and `task` by the runtime (see `plugin_metrics`).
    metrics_registry: PluginMetrics = field(default_factory=lambda: PluginMetrics({}))

    def plugin_metrics(self) -> PluginMetrics:
        """KIP-877: where the task registers metrics of its own, exported on the worker's `/metrics`
        with the task's `connector` and `task` tags until the task stops."""
        return self.metrics_registry


class WriterFactory(Protocol):
    """What the runtime sets as `SinkTaskContext.writer_factory`."""

    def __call__(
        self,
        producer_config: Mapping[str, Any],
        consumer_config: Mapping[str, Any],
        *,
        timeout_remedies: str,
        participant: TransactionParticipant | None,
    ) -> TransactionalWriter: ...


@dataclass
class SinkTaskContext:
    """Given to `SinkTask.initialize`: the task's assignment and its requests to the runtime.

    The runtime reads the requests (rewinds in `requested_offsets`, `paused`/`resumed` partitions,
    `commit_requested`) after each `put` and each `open`, applies them to its consumer and resets
    them; a task only calls the methods.
    """

    configs: dict[str, str] = field(default_factory=dict)
    assigned: set[TopicPartition] = field(default_factory=set)
    requested_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    #: Leader epochs of the rewinds that came with one (KIP-320): those positions are checked
    #: against the partition's log before the task reads from them.
    requested_epochs: dict[TopicPartition, int] = field(default_factory=dict)
    paused: set[TopicPartition] = field(default_factory=set)
    resumed: set[TopicPartition] = field(default_factory=set)
    commit_requested: bool = False
    #: The connector's consumer group, `connect-<connector>` (set by the runtime).
    consumer_group: str = ""
    #: Set by the runtime only for a connector that delivers exactly once
    #: (`SinkConnector.exactly_once_delivery`): `<group.id>-<connector>-<task>`. The task's
    #: transactional producer must use it, since zombie fencing fences exactly these ids.
    transactional_id: str | None = None
    #: The worker's `file.allowed.dirs` (set by the runtime; None: not restricted). Tasks that open
    #: local files by a configured path (the FileStream tasks) must stay inside these directories.
    file_allowed_dirs: str | None = None
    #: Set by the runtime when `errors.tolerance=all` (see `errant_record_reporter`).
    errant_reporter: Any = None
    #: Set by the runtime with `transactional_id`: makes the task's `TransactionalWriter` (see
    #: `transactional_writer`).
    writer_factory: WriterFactory | None = None
    #: The task's KIP-877 metrics, tagged `connector` and `task` by the runtime (see `plugin_metrics`).
    metrics_registry: PluginMetrics = field(default_factory=lambda: PluginMetrics({}))

    def transactional_writer(
        self,
        producer_config: Mapping[str, Any],
        consumer_config: Mapping[str, Any],
        *,
        timeout_remedies: str,
        participant: TransactionParticipant | None = None,
    ) -> TransactionalWriter:
        """KIP-656: the task's writer into Kafka, its transactions carrying the consumed positions
        for the connector's consumer group on the cluster written to, ready to write (its
        `init_transactions()` fenced any predecessor). `producer_config`/`consumer_config` are the
        clients' settings for that cluster; `timeout_remedies` names the connector's settings that
        help when a transaction outlives its timeout; `participant` adds records of the task's own to
        every transaction. Only for a connector that delivers exactly once
        (`SinkConnector.exactly_once_delivery`), on a worker with exactly-once support."""
        if self.writer_factory is None:
            raise ConnectException(
                "a transactional writer needs exactly-once support on the worker "
                "(exactly.once.source.support=enabled) and a connector whose exactly_once_delivery() "
                "is true"
            )
        return self.writer_factory(
            producer_config, consumer_config, timeout_remedies=timeout_remedies, participant=participant
        )

    def plugin_metrics(self) -> PluginMetrics:
        """KIP-877: where the task registers metrics of its own, exported on the worker's `/metrics`
        with the task's `connector` and `task` tags until the task stops."""
        return self.metrics_registry

    def errant_record_reporter(self) -> Any:
        """KIP-610: the reporter for records this task cannot write (e.g. a constraint violation), or
        None when the connector does not tolerate errors (`errors.tolerance=none`: raise instead).

        `reporter.report(record, error)` skips the record: it is logged and, with
        `errors.deadletterqueue.topic.name`, its original bytes go to the dead letter queue with
        Kafka's `__connect.errors.*` headers. Its position is committed only after the dead letter
        was written. Report records of the batch `put` was given, from `put`.
        """
        return self.errant_reporter

    def assignment(self) -> set[TopicPartition]:
        """The partitions this task consumes right now (changes on rebalances: see open/close)."""
        return set(self.assigned)

    def offset(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata]
        | Iterable[tuple[TopicPartition, int | OffsetAndMetadata]],
    ) -> None:
        """Ask the runtime to continue consuming these partitions from these offsets, e.g. to
        resume from positions the task stored in the target system itself.

        A task that stored the leader epoch with an offset (the `leader_epoch` of the
        `OffsetAndMetadata` it was given) passes the `OffsetAndMetadata` back: the runtime then
        checks the position against the partition's log (KIP-320) and applies the connector's
        `log.truncation.policy` if records before it were lost. A plain offset is not checked.
        """
        pairs = offsets.items() if isinstance(offsets, Mapping) else offsets
        for tp, position in pairs:
            if isinstance(position, OffsetAndMetadata):
                self.requested_offsets[tp] = position.offset
                epoch = position.leader_epoch
            else:
                self.requested_offsets[tp] = int(position)
                epoch = None
            known = known_or_none(epoch)
            if known is not None:
                self.requested_epochs[tp] = known
            else:
                self.requested_epochs.pop(tp, None)

    def requested_position(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        """Take the rewind asked for `tp` (with its leader epoch, if one came with it), or None."""
        if tp not in self.requested_offsets:
            return None
        offset = self.requested_offsets.pop(tp)
        return OffsetAndMetadata(offset, leader_epoch=self.requested_epochs.pop(tp, None))

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop fetching these partitions (e.g. while the target is overloaded) until `resume`."""
        self.paused.update(partitions)
        self.resumed.difference_update(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self.resumed.update(partitions)
        self.paused.difference_update(partitions)

    def request_commit(self) -> None:
        """Ask for offsets to be committed soon instead of at the next interval."""
        self.commit_requested = True
