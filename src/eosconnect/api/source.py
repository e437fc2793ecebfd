"""Source connectors and tasks: read an external system, produce records into Kafka.

With exactly-once enabled (KIP-618), the runtime writes each transaction's records and their
source offsets atomically, so a task only has to report positions faithfully in
`SourceRecord.source_offset` and resume from `context.offset_storage_reader` on start.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, ClassVar, Protocol, runtime_checkable

from eosconnect.api.batch import SourceBatch
from eosconnect.api.connector import Connector, Task
from eosconnect.api.context import SourceTaskContext
from eosconnect.api.records import Primitive, RecordMetadata, SourceOffset, SourcePartition, SourceRecord
from eosconnect.api.transactions import TransactionParticipant

__all__ = [
    "AcceptsSignals",
    "ConnectorTransactionBoundaries",
    "ExactlyOnceSupport",
    "ReplaySupport",
    "SourceConnector",
    "SourceTask",
]


class ExactlyOnceSupport(StrEnum):
    """Whether a connector can deliver exactly once with a given config (KIP-618)."""

    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class ConnectorTransactionBoundaries(StrEnum):
    """Whether a connector's tasks can define their own transaction boundaries (KIP-618)."""

    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class ReplaySupport(StrEnum):
    """Whether a connector's tasks can re-read any offset range the same way (a Spark streaming
    source, `spark.readStream.format("eosconnect")`, see docs/spark.md)."""

    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


@runtime_checkable
class AcceptsSignals(Protocol):
    """A connector that takes operators' signals (`POST /connectors/<name>/signals`), such as
    Debezium's execute-snapshot: `signal` hands one to the running task through a channel the
    connector defines and says where it went; a ConfigException names the setting it lacks."""

    def signal(self, config: Mapping[str, str], signal_type: str, data: Mapping[str, Any] | None) -> str: ...


class SourceConnector(Connector):
    """Base class for source connectors."""

    @abstractmethod
    def task_class(self) -> type[SourceTask]: ...

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        """Can this config deliver exactly once? Answer SUPPORTED only if re-reading from a committed
        source offset yields the same records again (a replayable source).

        None (the default) means "unknown": with `exactly.once.support=required` the config is
        rejected and the operator is told to consult the connector's docs.
        """
        return None

    def can_define_transaction_boundaries(self, config: Mapping[str, str]) -> ConnectorTransactionBoundaries:
        """Return SUPPORTED if the tasks use `TransactionContext`; needed for
        `transaction.boundary=connector`. The default is UNSUPPORTED."""
        return ConnectorTransactionBoundaries.UNSUPPORTED

    def replay_support(self, config: Mapping[str, str]) -> ReplaySupport:
        """Return SUPPORTED if, with this config, the tasks can serve as a Spark streaming source,
        which re-reads offset ranges: a task started with offset O for a source partition returns
        that partition's records after O again, in the same order and with the same offsets, and
        records that share one offset come from a single `poll()`. The default is UNSUPPORTED.
        """
        return ReplaySupport.UNSUPPORTED

    def required_acls(
        self, name: str, config: Mapping[str, str], worker_props: Mapping[str, str]
    ) -> list[Any] | None:
        """The Kafka ACLs (`eosconnect.storage.acls.Acl`) this connector's clients need: what
        `eosconnect connectors acls` lists and a task's authorization failure names. The default,
        None, means any source's, worked out by the runtime (`eosconnect.storage.acls.source_acls`:
        Write on the topics in `topic`/`topics`, and KIP-618's rows under exactly-once). A connector
        whose `topics` are not what it writes, or with clients of its own (a mirror source reading
        another cluster), returns its rows in full."""
        return None

    def alter_offsets(
        self, config: Mapping[str, str], offsets: Mapping[SourcePartition, SourceOffset | None]
    ) -> bool:
        """KIP-875's hook: the user alters (`PATCH .../offsets`) or resets (`DELETE .../offsets`, every
        partition mapped to None) the offsets of this STOPPED connector.

        Called before anything is written; raise `ConfigException` (or `ValueError`) to refuse the
        request with a 400 naming the problem, e.g. a partition this connector never writes or an
        offset of the wrong shape. Return True if the connector applied the change somewhere of its
        own as well; the default, False, means the offsets topic is all there is. Either way the
        runtime then writes the offsets."""
        return False


class SourceTask(Task):
    """Base class for source tasks. The runtime calls, in order: `initialize`, `start`, then `poll`
    in a loop (with `commit_record`/`commit` after each successful commit), and `stop`."""

    @property
    def context(self) -> SourceTaskContext:
        """Set by `initialize`; holds the task's configs, offset reader and transaction context."""
        ctx: SourceTaskContext | None = self.__dict__.get("_context")
        if ctx is None:
            raise RuntimeError(
                f"{type(self).__name__}.context is not set: the runtime calls initialize(context) before "
                "start(); in a test, call task.initialize(SourceTaskContext(...)) first"
            )
        return ctx

    @context.setter
    def context(self, value: SourceTaskContext) -> None:
        self.__dict__["_context"] = value

    def initialize(self, context: SourceTaskContext) -> None:
        self.context = context

    @abstractmethod
    def poll(self) -> list[SourceRecord] | SourceBatch | list[SourceBatch] | None:
        """Return the next records, or None/[] if there are none right now.

        Records come one by one (`SourceRecord`s) or, much faster for high-volume sources, as
        columns: a `SourceBatch` per source partition, or a list of them (see `eosconnect.api.batch`).

        Block for a short while at most (up to about a second) when idle: the runtime can only
        commit transactions, heartbeat and stop the task between `poll` calls.
        """

    def commit(self) -> None:
        """Called after a transaction (or offset flush) committed; acknowledge upstream here."""

    def transaction_participant(self) -> TransactionParticipant | None:
        """What adds records of the task's own to each of its transactions (exactly-once runtime
        only; see `eosconnect.api.transactions.TransactionParticipant`), or None (the default).
        Asked once, after `start()`: the answer may depend on the task's config."""
        return None

    #: Whether an override of `commit_record` reads its `metadata` (where Kafka stored the record).
    #: Knowing where a record landed costs the runtime a delivery report per record (a Python
    #: callback on the producer's thread, competing with the task's for the GIL); a task whose
    #: `commit_record` only looks at the record itself (its source offset, say) sets this to False:
    #: the exactly-once runtime then asks for no delivery reports and passes None as `metadata` (the
    #: at-least-once runtime has them anyway, to know what Kafka acknowledged, and passes them).
    commit_record_metadata: ClassVar[bool] = True

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        """Called once per committed record, in order. `metadata` is None when a transformation
        dropped the record (it was not written, but its offset was committed), and under exactly-once
        always when the task's `commit_record_metadata` is False."""

    def update_offsets(
        self, offsets: dict[SourcePartition, SourceOffset]
    ) -> Mapping[SourcePartition, Mapping[str, Primitive]] | None:
        """KIP-910: adjust the offsets about to be committed, e.g. to advance idle partitions.

        `offsets` holds, per source partition, the offset of its latest record in this commit.
        Return a map with entries changed or added (build new keys with `SourcePartition(...)`;
        plain dict values are fine); they are committed too, in the same transaction under
        exactly-once. Dropping partitions has no effect. None (the default) or {} changes nothing.
        """
        return None
