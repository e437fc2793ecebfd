"""`IcebergSink` (also `org.apache.iceberg.connect.IcebergSinkConnector`): records into Iceberg tables
through PyIceberg, exactly once (see `connector`).

Modules: `config` (the settings, as Iceberg's Kafka Connect sink names them), `table` (claims and
commits, the positions in the snapshot summary) and `connector` (the connector and task); what they
share with `DeltaSink` is in `eosconnect.connectors.lake`.
"""
