"""Change data capture from PostgreSQL (logical replication, pgoutput) in Debezium's event format.

Modules, one job each: `config` (settings), `catalog` (checks, publication, table metadata),
`replication` (the slot and the pgoutput stream, over psycopg2), `pgoutput` (message parser),
`types` (column types -> Connect schemas), `events` (Debezium's envelope), `signals` (parsing
Debezium's signals), `signal_channels` (the Kafka channel, the dispatcher, the REST sender),
`incremental` / `incremental_state` (incremental snapshots), `task` with its mixins `outages`,
`resume` and `signal_hooks`, `connector`.
"""

from eosconnect.connectors.postgres_cdc.connector import PostgresCdcSourceConnector
from eosconnect.connectors.postgres_cdc.task import PostgresCdcTask

__all__ = ["PostgresCdcSourceConnector", "PostgresCdcTask"]
