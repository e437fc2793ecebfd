"""RestServerConfig: listeners, TLS and basic-auth settings from worker properties."""

from __future__ import annotations

import pytest

from eosconnect.rest.middleware import parse_basic_auth_users
from eosconnect.rest.server import RestServerConfig


def test_defaults() -> None:
    config = RestServerConfig.from_properties({})
    assert (config.scheme, config.host, config.port) == ("http", "0.0.0.0", 8083)
    assert config.url() == "http://localhost:8083"
    assert config.basic_auth_users == {}


def test_https_listener_with_tls_and_auth() -> None:
    config = RestServerConfig.from_properties(
        {
            "listeners": "https://127.0.0.1:8443,http://0.0.0.0:8083",
            "rest.ssl.certfile": "/etc/cert.pem",
            "listeners.https.ssl.keyfile": "/etc/key.pem",
            "rest.ssl.client.auth": "required",
            "rest.basic.auth.users": "admin:pw, ops:x:y",
        }
    )
    assert (config.scheme, config.host, config.port) == ("https", "127.0.0.1", 8443)
    assert config.ssl_certfile == "/etc/cert.pem"
    assert config.ssl_keyfile == "/etc/key.pem"
    assert config.ssl_client_auth == "required"
    assert config.basic_auth_users == {"admin": "pw", "ops": "x:y"}
    assert config.url() == "https://127.0.0.1:8443"


def test_advertised_listener() -> None:
    config = RestServerConfig.from_properties(
        {"listeners": "http://:8084", "rest.advertised.host.name": "worker-1", "rest.advertised.port": "9000"}
    )
    assert config.host == "0.0.0.0"
    assert config.advertised_url == "http://worker-1:9000"


@pytest.mark.parametrize(
    "props",
    [
        {"listeners": "ftp://x:1"},
        {"listeners": "https://x:1"},
        {"listeners": "https://x:1", "rest.ssl.certfile": "c", "rest.ssl.client.auth": "sometimes"},
    ],
)
def test_bad_settings(props: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        RestServerConfig.from_properties(props)


def test_parse_basic_auth_users() -> None:
    assert parse_basic_auth_users(None) == {}
    assert parse_basic_auth_users("") == {}
    assert parse_basic_auth_users("a:b,,c:") == {"a": "b", "c": ""}
    with pytest.raises(ValueError):
        parse_basic_auth_users(":pw")
