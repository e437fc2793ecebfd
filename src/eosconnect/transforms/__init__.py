"""The built-in transformations and predicates: Kafka's own, with the same names, settings and behaviour.

One module per family: `fields` (InsertField, ReplaceField, ExtractField, HoistField), `reshape`
(MaskField, ValueToKey, Flatten, SetSchemaMetadata), `conversions` (Cast, TimestampConverter),
`headers` (DropHeaders, HeaderFrom, InsertHeader), `routing` (Filter, RegexRouter, TimestampRouter)
and `predicates`, and Debezium's `ExtractNewRecordState` in `unwrap`. Each class works on the record
value; its `...Key` sibling is Kafka's `$Key` variant. `chain` maps Kafka's class names (and the
short names) to these classes (`BUILTIN_TRANSFORMATIONS`, `BUILTIN_PREDICATES`) and runs a
connector's `transforms=...` chain.
"""

from __future__ import annotations

from eosconnect.transforms.conversions import Cast, CastKey, TimestampConverter, TimestampConverterKey
from eosconnect.transforms.fields import (
    ExtractField,
    ExtractFieldKey,
    HoistField,
    HoistFieldKey,
    InsertField,
    InsertFieldKey,
    ReplaceField,
    ReplaceFieldKey,
)
from eosconnect.transforms.headers import DropHeaders, HeaderFrom, HeaderFromKey, InsertHeader
from eosconnect.transforms.predicates import HasHeaderKey, RecordIsTombstone, TopicNameMatches
from eosconnect.transforms.reshape import (
    Flatten,
    FlattenKey,
    MaskField,
    MaskFieldKey,
    SetSchemaMetadata,
    SetSchemaMetadataKey,
    ValueToKey,
)
from eosconnect.transforms.routing import Filter, RegexRouter, TimestampRouter

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
