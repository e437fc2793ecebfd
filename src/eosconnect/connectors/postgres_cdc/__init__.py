"""Change data capture from PostgreSQL (logical replication, pgoutput) in Debezium's event format.

Modules, one job each: `config` (settings), `catalog` (checks, publication, table metadata),
`replication` (the slot and the pgoutput stream, over psycopg2), `pgoutput` (message parser),
`types` (column types -> Connect schemas), `events` (Debezium's envelope), `task`, `connector`.
"""

from eosconnect.connectors.postgres_cdc.connector import PostgresCdcSourceConnector
from eosconnect.connectors.postgres_cdc.task import PostgresCdcTask

__all__ = ["PostgresCdcSourceConnector", "PostgresCdcTask"]
