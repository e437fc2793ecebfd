"""The GTID sets the binlog reader advances, and the catalog's ENUM/SET member parsing."""

from __future__ import annotations

from eosconnect.connectors.mysql_cdc.binlog import _Gtids
from eosconnect.connectors.mysql_cdc.catalog import _members
from eosconnect.connectors.mysql_cdc.config import MySqlCdcConfig


def test_mariadb_gtids_keep_the_last_of_each_domain() -> None:
    gtids = _Gtids("0-1-5,2-7-3", mariadb=True)
    gtids.add("0-1-6")
    gtids.add("1-1-1")
    assert gtids.text() == "0-1-6,1-1-1,2-7-3"
    assert _Gtids(None, mariadb=True).text() is None


def test_mysql_gtids_extend_their_intervals() -> None:
    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    gtids = _Gtids(f"{uuid}:1-5", mariadb=False)
    gtids.add(f"{uuid}:6")
    gtids.add(f"{uuid}:9")
    gtids.add(f"{uuid}:3")  # already in the set
    assert gtids.text() == f"{uuid}:1-6:9"


def test_enum_members_with_quotes_and_commas() -> None:
    assert _members("enum('a','it''s','x,y')") == ("a", "it's", "x,y")


def test_filters_and_connector_name() -> None:
    base = {
        "database.hostname": "h",
        "database.user": "u",
        "topic.prefix": "p",
        "database.include.list": "shop",
        "table.exclude.list": "shop\\.audit",
    }
    config = MySqlCdcConfig.parse(
        {**base, "connector.class": "io.debezium.connector.mariadb.MariaDbConnector"}
    )
    assert config.connector == "mariadb"
    assert config.captured("shop", "orders") and not config.captured("shop", "audit")
    assert not config.captured("other", "orders")
    assert (
        MySqlCdcConfig.parse(
            {**base, "connector.class": "io.debezium.connector.mysql.MySqlConnector"}
        ).connector
        == "mysql"
    )
