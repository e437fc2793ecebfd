"""`POST /connectors/<name>/signals`: handed to a connector that takes signals, refused otherwise."""

from __future__ import annotations

from typing import Any

import pytest

from eosconnect.rest.app import create_app
from support.fake_herder import FakeHerder, make_test_client, source_config


@pytest.fixture
def herder() -> FakeHerder:
    return FakeHerder()


@pytest.fixture
def client(herder: FakeHerder) -> Any:
    return make_test_client(create_app(herder, commit="abc123"))


def test_a_connector_without_signals_is_400_naming_it(client: Any, herder: FakeHerder) -> None:
    herder.put_connector_config("seq", source_config(name="seq"), True)
    answer = client.post("/connectors/seq/signals", json={"type": "log", "data": {"message": "hi"}})
    assert answer.status_code == 400 and "takes no signals" in answer.json()["message"]


def test_unknown_connector_is_404_and_a_missing_type_is_400(client: Any, herder: FakeHerder) -> None:
    assert client.post("/connectors/nope/signals", json={"type": "log"}).status_code == 404
    herder.put_connector_config("seq", source_config(name="seq"), True)
    answer = client.post("/connectors/seq/signals", json={"data": {}})
    assert answer.status_code == 400 and "type is missing" in answer.json()["message"]


def test_a_cdc_connector_without_a_channel_names_the_setting(client: Any, herder: FakeHerder) -> None:
    config = {
        "name": "cdc",
        "connector.class": "PostgresCdcSource",
        "database.hostname": "127.0.0.1",
        "database.user": "u",
        "database.dbname": "d",
        "topic.prefix": "p",
    }
    herder.configs["cdc"] = config  # stored as it is: validating it would need the database
    answer = client.post("/connectors/cdc/signals", json={"type": "log", "data": {"message": "hi"}})
    assert answer.status_code == 400 and "signal.data.collection" in answer.json()["message"]
