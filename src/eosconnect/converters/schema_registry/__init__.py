"""Schema Registry converters: Confluent's wire format, a registry client, Connect <-> format mappings.

Modules: `wire` (magic byte, schema id, Protobuf message indexes), `settings` (the converters' shared
settings, registry access and subject name strategies), `base` (what every registry converter does),
`avro_data` and `avro` (Confluent's AvroData and AvroConverter), `json_schema_data` and `json_schema`,
`protobuf_data`, `protobuf_text` (the `.proto` text) and `protobuf`. Nothing here is imported until a
connector names one of these converters (`converters.resolution.CONVERTER_PATHS`), so schemaless
pipelines do not load fastavro or the registry client.
"""
