"""The built-in transformations and predicates: Kafka's own, with the same names, settings and behaviour.

One module per family: `fields` (InsertField, ReplaceField, ExtractField, HoistField, MaskField,
ValueToKey, Flatten), `conversions` (Cast, TimestampConverter), `headers` (DropHeaders, HeaderFrom,
InsertHeader), `routing` (Filter, RegexRouter, TimestampRouter) and `predicates`. Each class works on
the record value; its `...Key` sibling is Kafka's `$Key` variant. `KAFKA_NAMES` maps Kafka's class
names (and the short names) to these classes; `eosconnect.api.transforms` resolves names through it.
"""

from __future__ import annotations

from eosconnect.api.builtin_transforms.conversions import (
    Cast,
    CastKey,
    TimestampConverter,
    TimestampConverterKey,
)
from eosconnect.api.builtin_transforms.fields import (
    ExtractField,
    ExtractFieldKey,
    Flatten,
    FlattenKey,
    HoistField,
    HoistFieldKey,
    InsertField,
    InsertFieldKey,
    MaskField,
    MaskFieldKey,
    ReplaceField,
    ReplaceFieldKey,
    SetSchemaMetadata,
    SetSchemaMetadataKey,
    ValueToKey,
)
from eosconnect.api.builtin_transforms.headers import DropHeaders, HeaderFrom, HeaderFromKey, InsertHeader
from eosconnect.api.builtin_transforms.predicates import HasHeaderKey, RecordIsTombstone, TopicNameMatches
from eosconnect.api.builtin_transforms.routing import Filter, RegexRouter, TimestampRouter

__all__ = [
    "Cast",
    "CastKey",
    "DropHeaders",
    "ExtractField",
    "ExtractFieldKey",
    "Filter",
    "Flatten",
    "FlattenKey",
    "HasHeaderKey",
    "HeaderFrom",
    "HeaderFromKey",
    "HoistField",
    "HoistFieldKey",
    "InsertField",
    "InsertFieldKey",
    "InsertHeader",
    "MaskField",
    "MaskFieldKey",
    "RecordIsTombstone",
    "RegexRouter",
    "ReplaceField",
    "ReplaceFieldKey",
    "SetSchemaMetadata",
    "SetSchemaMetadataKey",
    "TimestampConverter",
    "TimestampConverterKey",
    "TimestampRouter",
    "TopicNameMatches",
    "ValueToKey",
]
