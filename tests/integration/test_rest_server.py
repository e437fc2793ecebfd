"""RestServer: uvicorn in a background thread, plain HTTP and HTTPS (self-signed cert), start/stop."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
from pathlib import Path

import httpx
import pytest

from eosconnect.rest import RestServer, RestServerConfig, create_app
from support.fake_herder import FakeHerder, make_test_client, served, source_config


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return str(cert), str(key)


def test_http_start_stop_frees_the_port() -> None:
    server = RestServer(create_app(FakeHerder()), host="127.0.0.1", port=0).start()
    port = server.port
    assert server.url == f"http://127.0.0.1:{port}"
    assert httpx.get(server.url + "/").json()["kafka_cluster_id"] == "fake-cluster-id"
    server.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/", timeout=2)
    with socket.socket() as sock:  # the port can be bound again
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))


def test_port_in_use_fails_in_start() -> None:
    with served(create_app(FakeHerder())) as first:
        second = RestServer(create_app(FakeHerder()), host="127.0.0.1", port=first.port)
        with pytest.raises(OSError):
            second.start()


def test_https_with_basic_auth(certificate: tuple[str, str]) -> None:
    cert, key = certificate
    props = {
        "listeners": "https://127.0.0.1:0",
        "rest.ssl.certfile": cert,
        "rest.ssl.keyfile": key,
        "rest.basic.auth.users": "admin:pw",
    }
    config = RestServerConfig.from_properties(props)
    app = create_app(FakeHerder(), basic_auth=config.basic_auth_users)
    with RestServer.from_config(app, config) as server:
        assert server.url.startswith("https://127.0.0.1:")
        with httpx.Client(verify=ssl.create_default_context(cafile=cert), auth=("admin", "pw")) as client:
            created = client.post(server.url + "/connectors", json={"name": "c", "config": source_config()})
            assert created.status_code == 201
            assert client.get(server.url + "/connectors").json() == ["c"]
        assert (
            httpx.get(server.url + "/connectors", verify=ssl.create_default_context(cafile=cert)).status_code
            == 401
        )
        with pytest.raises(httpx.ConnectError):  # self-signed: refused without the CA
            httpx.get(server.url + "/", auth=("admin", "pw"))
        with pytest.raises(httpx.HTTPError):  # plain HTTP to a TLS port
            httpx.get(server.url.replace("https://", "http://") + "/", timeout=3)


def test_forwarding_to_an_https_leader(certificate: tuple[str, str]) -> None:
    cert, key = certificate
    leader = FakeHerder()
    with served(create_app(leader), ssl_certfile=cert, ssl_keyfile=key) as server:
        follower = FakeHerder.follower_of(leader, server.url)
        client = make_test_client(create_app(follower, forward_verify=cert))
        response = client.post("/connectors", json={"name": "c", "config": source_config()})
        assert response.status_code == 201, response.text
        assert list(leader.configs) == ["c"]


def test_served_openapi_document(tmp_path: Path) -> None:
    with served(create_app(FakeHerder())) as server:
        spec = httpx.get(server.url + "/openapi.json").json()
    assert spec["info"]["title"] == "eosconnect REST API"
    assert "/connectors/{connector}/offsets" in spec["paths"]
