"""`DeltaSink`: records into a Delta Lake table through delta-rs, exactly once (see `connector`).

Modules: `config` (the settings), `table` (claims and commits with `txn` actions) and `connector`
(the connector and task); what they share with `IcebergSink` is in `eosconnect.connectors.lake`.
"""
