"""A schema'd SequenceSource for the Schema Registry tests: each value is a `Struct`.

Values carry `task`, `seq` and `payload` under the schema `eosconnect.test.Sequence`; from sequence
number `schema.switch.at` on (if >= 0) the schema gains a required `region` field without a default,
a change a registry refuses under BACKWARD compatibility (readers of v2 cannot read v1 records).
"""

from __future__ import annotations

from eosconnect.api.data import INT32_SCHEMA, INT64_SCHEMA, STRING_SCHEMA, SchemaBuilder, Struct
from eosconnect.api.records import SourceRecord
from eosconnect.api.source import SourceTask
from eosconnect.connectors.sequence import SequenceSourceConnector, SequenceSourceTask

SCHEMA_NAME = "eosconnect.test.Sequence"
SEQUENCE_V1 = (
    SchemaBuilder.struct()
    .name(SCHEMA_NAME)
    .version(1)
    .field("task", INT32_SCHEMA)
    .field("seq", INT64_SCHEMA)
    .field("payload", STRING_SCHEMA)
    .build()
)
SEQUENCE_V2_INCOMPATIBLE = (
    SchemaBuilder.struct()
    .name(SCHEMA_NAME)
    .version(2)
    .field("task", INT32_SCHEMA)
    .field("seq", INT64_SCHEMA)
    .field("payload", STRING_SCHEMA)
    .field("region", STRING_SCHEMA)
    .build()
)


class StructSequenceTask(SequenceSourceTask):
    def start(self, config: dict[str, str]) -> None:
        super().start(config)
        self.switch_at = int(config.get("schema.switch.at", "-1"))

    def _record(self, seq: int) -> SourceRecord:
        incompatible = 0 <= self.switch_at <= seq
        schema = SEQUENCE_V2_INCOMPATIBLE if incompatible else SEQUENCE_V1
        value = Struct(schema).put("task", self.task_index).put("seq", seq).put("payload", self.payload)
        if incompatible:
            value.put("region", "eu")
        return SourceRecord(
            source_partition=self.partition,
            source_offset={"seq": seq},
            topic=self.topic,
            key=self.key,
            value=value,
            value_schema=schema,
        )


class StructSequenceConnector(SequenceSourceConnector):
    def task_class(self) -> type[SourceTask]:
        return StructSequenceTask
