"""What the lake sinks (`DeltaSink`, `IcebergSink`) share; each module has one job.

`arrow_schema` (Connect schemas and schemaless JSON maps to Arrow), `changes` (a `SinkRecord` to a
row and its operation: append, upsert, delete, for CDC streams), `buffer` (rows per partition,
flushed by size or `commit.interval.ms`), `positions` (the consumed position a table commit carries
and the claim that fences earlier holders), `config` (the settings both sinks have) and `task` (the
sink task: buffer in `put`, one table commit with the positions in `pre_commit`).
"""
