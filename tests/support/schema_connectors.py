"""Schema'd test connectors for the Schema Registry tests: a SequenceSource whose values are `Struct`s,
and a recording sink that logs the Structs it is given.

Values carry `task`, `seq` and `payload` under the schema `eosconnect.test.Sequence`; from sequence
number `schema.switch.at` on (if >= 0) the schema gains a required `region` field without a default,
a change a registry refuses under BACKWARD compatibility (readers of v2 cannot read v1 records).
"""

from __future__ import annotations

import json

from eosconnect.api.data import INT32_SCHEMA, INT64_SCHEMA, STRING_SCHEMA, SchemaBuilder, Struct
from eosconnect.api.records import SinkRecord, SourceRecord
from eosconnect.api.sink import SinkTask
from eosconnect.api.source import SourceTask
from eosconnect.connectors.sequence import SequenceSourceConnector, SequenceSourceTask
from support.connectors import RecordingSinkConnector, RecordingSinkTask

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


class StructRecordingSinkTask(RecordingSinkTask):
    """`RecordingSinkTask` for schema'd records: each put record is logged as
    `[topic, partition, offset, value schema name, value as a dict]` (dates and the like as text)."""

    def put(self, records: list[SinkRecord]) -> None:
        if records:
            rows = [
                [
                    r.topic,
                    r.kafka_partition,
                    r.kafka_offset,
                    r.value_schema.name if r.value_schema is not None else None,
                    json.loads(
                        json.dumps(r.value.to_dict() if isinstance(r.value, Struct) else r.value, default=str)
                    ),
                ]
                for r in records
            ]
            self._event("put", records=rows)


class StructRecordingSinkConnector(RecordingSinkConnector):
    def task_class(self) -> type[SinkTask]:
        return StructRecordingSinkTask
