"""The settings every hosted protocol source has, each under its protocol's prefix: how values are
written and how syncs are paced."""

from __future__ import annotations

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.validators import Range

__all__ = ["sync_settings"]


def sync_settings(*, schemaless: str, sync_interval: str, batch_size: str, stream_schema: str) -> ConfigDef:
    """The three settings under these names; `stream_schema` says what a stream's schema is called
    in the protocol (Airbyte's JSON Schema, Singer's SCHEMA message)."""
    return (
        ConfigDef()
        .define(
            schemaless,
            ConfigType.BOOLEAN,
            False,
            Importance.LOW,
            "Write record values as schemaless JSON objects instead of Structs of the stream's "
            f"{stream_schema}.",
        )
        .define(
            sync_interval,
            ConfigType.LONG,
            60_000,
            Importance.MEDIUM,
            "After a sync ends, how long to wait before the next one (from the last state).",
            Range.at_least(0),
        )
        .define(
            batch_size,
            ConfigType.INT,
            500,
            Importance.LOW,
            "The most records one poll() returns.",
            Range.at_least(1),
        )
    )
