"""`database.allowed.hosts`: validation refuses a database host the worker does not allow, before
anything connects (validate was a port scanner), as `file.allowed.dirs` confines file paths."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from eosconnect.cluster.validation import config_errors, validate_connector_config
from eosconnect.policies.database_hosts import database_host_errors
from eosconnect.worker_config import WorkerConfig


def worker(allowed: str | None) -> WorkerConfig:
    props = {"bootstrap.servers": "localhost:9092", "group.id": "g", "offset.storage.topic": "o"}
    if allowed is not None:
        props["database.allowed.hosts"] = allowed
    return WorkerConfig.parse(props)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A local port that counts who connects (accepts, never speaks)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        s.settimeout(0.5)
        yield s


def _connected(s: socket.socket) -> bool:
    try:
        conn, _ = s.accept()
    except TimeoutError:
        return False
    conn.close()
    return True


def _jdbc(port: int) -> dict[str, str]:
    return {
        "name": "j",
        "connector.class": "JdbcSource",
        "connection.url": f"postgresql://eos@127.0.0.1:{port}/shop",
        "mode": "incrementing",
        "incrementing.column.name": "id",
        "tables": "orders",
        "topic.prefix": "x-",
    }


def test_a_host_outside_the_list_is_refused_unconnected(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    errors = config_errors(validate_connector_config(_jdbc(port), worker("db.internal, *.db.example")))
    assert list(errors) == ["connection.url"], errors
    assert f"127.0.0.1:{port}" in errors["connection.url"][0]
    assert "database.allowed.hosts=db.internal, *.db.example" in errors["connection.url"][0]
    assert not _connected(listener), "validation connected to a host it refused"


def test_patterns_match_host_or_host_and_port() -> None:
    url = {"connection.url": "postgresql://u@orders.db.example:6432/shop"}
    props = {"bootstrap.servers": "b"}
    assert database_host_errors(url, {**props, "database.allowed.hosts": "*.db.example"}) == {}
    assert database_host_errors(url, {**props, "database.allowed.hosts": "orders.db.example:6432"}) == {}
    assert database_host_errors(url, {**props, "database.allowed.hosts": "orders.db.example:5432"})
    assert database_host_errors(url, props) == {}  # unset: any host
    sqlite = {"connection.url": "sqlite:////tmp/x.db"}
    assert database_host_errors(sqlite, {**props, "database.allowed.hosts": "none"}) == {}
    cdc = {"database.hostname": "10.0.0.7", "database.port": "5432"}
    assert database_host_errors(cdc, {**props, "database.allowed.hosts": "10.0.0.*:5432"}) == {}
    assert "database.hostname" in database_host_errors(cdc, {**props, "database.allowed.hosts": "10.0.1.*"})


def test_a_cdc_source_without_a_port_is_checked_at_its_databases_default_port() -> None:
    props = {"bootstrap.servers": "b"}
    only_postgres = {**props, "database.allowed.hosts": "db:5432"}
    mysql = {"connector.class": "io.debezium.connector.mysql.MySqlConnector", "database.hostname": "db"}
    assert "database.hostname" in database_host_errors(mysql, only_postgres), "3306 is not 5432"
    assert database_host_errors(mysql, {**props, "database.allowed.hosts": "db:3306"}) == {}
    postgres = {"connector.class": "PostgresCdcSource", "database.hostname": "db"}
    assert database_host_errors(postgres, only_postgres) == {}
    unknown = {"connector.class": "SomeCdcSource", "database.hostname": "db"}
    assert "database.hostname" in database_host_errors(unknown, only_postgres), "unknown port: no match"
    assert database_host_errors(unknown, {**props, "database.allowed.hosts": "db"}) == {}


def test_an_allowed_host_is_validated_as_before(listener: socket.socket, monkeypatch) -> None:
    from eosconnect.connectors.jdbc import database as jdbc

    monkeypatch.setattr(jdbc, "VALIDATION_CONNECT_TIMEOUT_S", 1)
    port = listener.getsockname()[1]
    errors = config_errors(validate_connector_config(_jdbc(port), worker("127.0.0.1")))
    assert "cannot connect" in errors["connection.url"][0]  # the connector's own check ran
    assert _connected(listener)


def test_a_stored_connector_is_checked_against_the_workers_setting_of_now(listener: socket.socket) -> None:
    """Validation saw the config when it was stored, under an older (or no) setting: starting it on
    a worker whose database.allowed.hosts now refuses its host fails, naming both, unconnected."""
    from eosconnect.api.errors import ConnectException
    from eosconnect.cluster.jobs import start_connector

    port = listener.getsockname()[1]
    props = {"bootstrap.servers": "127.0.0.1:9", "database.allowed.hosts": "db.internal"}
    with pytest.raises(ConnectException, match=r"database.allowed.hosts=db.internal") as refused:
        start_connector(_jdbc(port), props)
    assert f"127.0.0.1:{port}" in str(refused.value)
    assert not _connected(listener), "the connector connected to a host the worker refuses"
