"""The `Transformation` and `Predicate` interfaces: Kafka Connect's Single Message Transforms.

A connector config lists its transformations (`transforms=...`) and the predicates that decide
which records each applies to (`predicates=...`); the built-in ones are in `eosconnect.transforms`,
and the chain that runs them is `eosconnect.transforms.chain.TransformationChain`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Generic

from eosconnect.api.config import ConfigDef
from eosconnect.api.records import R

if TYPE_CHECKING:
    from eosconnect.api.batch import SourceBatch

__all__ = ["Predicate", "Transformation"]


class Transformation(ABC, Generic[R]):
    """Changes, reroutes or drops one record at a time; must not keep per-record state.

    Return a new record (`record.new_record(value=...)`) rather than mutating the one given: the
    runtime still needs the original to commit its source offset.
    """

    def __init__(self) -> None:
        self.config: dict[str, Any] = {}

    def config_def(self) -> ConfigDef:
        """The transformation's settings (without the `transforms.<alias>.` prefix)."""
        return ConfigDef()

    def configure(self, config: Mapping[str, Any]) -> None:
        """Apply settings; the default parses them with `config_def()` into `self.config`."""
        self.config = self.config_def().parse(config)

    @abstractmethod
    def apply(self, record: R) -> R | None:
        """The transformed record, or None to drop it."""

    def apply_columns(self, batch: SourceBatch) -> SourceBatch | None:
        """A whole `SourceBatch` transformed at once (`batch.replace(...)`), or None: the runtime then
        calls `apply` record by record, for this batch only (the default).

        Override where a batch is much cheaper than its records (one schema lookup, one topic name
        per batch), and only with the very result `apply` gives each record: no record dropped, and
        every record still of one topic, partition and schema. Decline (None) any batch that would
        not stay one: e.g. timestamps giving several routed topics. An exception also sends the batch
        record by record, so errors are raised and reported per record as ever.
        """
        return None

    def close(self) -> None:
        """Release resources; called when the task stops."""


class Predicate(ABC, Generic[R]):
    """Decides whether a transformation applies to a record (`transforms.<alias>.predicate`)."""

    def __init__(self) -> None:
        self.config: dict[str, Any] = {}

    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def configure(self, config: Mapping[str, Any]) -> None:
        self.config = self.config_def().parse(config)

    @abstractmethod
    def test(self, record: R) -> bool: ...

    def close(self) -> None:
        """Release resources; called when the task stops."""
