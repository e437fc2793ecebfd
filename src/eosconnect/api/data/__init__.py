"""Kafka Connect's data model (`org.apache.kafka.connect.data`): schemas, structs, logical types.

Modules: `schema` (`Schema`, `Field`, the predefined schemas, validation), `builder` (`SchemaBuilder`),
`struct` (`Struct`), `logical` (`Decimal`, `Date`, `Time`, `Timestamp`) and `projector`
(`SchemaProjector`). Everything is re-exported by `eosconnect.api`.
"""

from eosconnect.api.data.builder import SchemaBuilder, copy_schema_basics
from eosconnect.api.data.logical import LOGICAL_NAMES, Date, Decimal, Time, Timestamp
from eosconnect.api.data.projector import SchemaProjector, SchemaProjectorException
from eosconnect.api.data.schema import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_BOOLEAN_SCHEMA,
    OPTIONAL_BYTES_SCHEMA,
    OPTIONAL_FLOAT32_SCHEMA,
    OPTIONAL_FLOAT64_SCHEMA,
    OPTIONAL_INT8_SCHEMA,
    OPTIONAL_INT16_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    ConnectSchema,
    Field,
    Schema,
    SchemaAndValue,
    SchemaBuilderException,
    Type,
    field_changes,
    validate_value,
)
from eosconnect.api.data.struct import Struct

__all__ = [
    "BOOLEAN_SCHEMA",
    "BYTES_SCHEMA",
    "FLOAT32_SCHEMA",
    "FLOAT64_SCHEMA",
    "INT8_SCHEMA",
    "INT16_SCHEMA",
    "INT32_SCHEMA",
    "INT64_SCHEMA",
    "LOGICAL_NAMES",
    "OPTIONAL_BOOLEAN_SCHEMA",
    "OPTIONAL_BYTES_SCHEMA",
    "OPTIONAL_FLOAT32_SCHEMA",
    "OPTIONAL_FLOAT64_SCHEMA",
    "OPTIONAL_INT8_SCHEMA",
    "OPTIONAL_INT16_SCHEMA",
    "OPTIONAL_INT32_SCHEMA",
    "OPTIONAL_INT64_SCHEMA",
    "OPTIONAL_STRING_SCHEMA",
    "STRING_SCHEMA",
    "ConnectSchema",
    "Date",
    "Decimal",
    "Field",
    "Schema",
    "SchemaAndValue",
    "SchemaBuilder",
    "SchemaBuilderException",
    "SchemaProjector",
    "SchemaProjectorException",
    "Struct",
    "Time",
    "Timestamp",
    "Type",
    "copy_schema_basics",
    "field_changes",
    "validate_value",
]
