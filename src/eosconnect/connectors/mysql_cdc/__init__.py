"""Change data capture from MySQL and MariaDB (the binlog, through mysql-replication) in Debezium's
event format.

Modules, one job each: `config` (settings), `catalog` (checks, tables, columns), `binlog` (the
binlog as whole transactions, rows decoded with their table maps), `snapshot` (the consistent
snapshot and its position), `types` (column types -> Connect schemas), `events` (Debezium's
envelope), `task`, `connector`.
"""

from eosconnect.connectors.mysql_cdc.connector import MySqlCdcSourceConnector
from eosconnect.connectors.mysql_cdc.task import MySqlCdcTask

__all__ = ["MySqlCdcSourceConnector", "MySqlCdcTask"]
