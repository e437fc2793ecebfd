"""Config providers (KIP-297): Kafka's three providers, allowed.paths, errors by variable, and
placeholders kept wherever a config is stored."""

from __future__ import annotations

from pathlib import Path

import pytest

from eosconnect.api.errors import ConfigException
from eosconnect.plugins.config_providers import resolve_config, unresolvable_variables
from eosconnect.storage.clients import client_config


@pytest.fixture
def worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "orders.properties").write_text("password=s3cret\nuser=orders\n")
    (secrets / "token").write_text("tok-123")
    monkeypatch.setenv("EOSCONNECT_TEST_SECRET", "from-env")
    return {
        "config.providers": "file,dir,env",
        "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
        "config.providers.file.param.allowed.paths": str(secrets),
        "config.providers.dir.class": "DirectoryConfigProvider",
        "config.providers.dir.param.allowed.paths": str(secrets),
        "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
        "config.providers.env.param.allowlist.pattern": "EOSCONNECT_.*",
        "secrets": str(secrets),
    }


def test_the_three_providers_resolve(worker: dict[str, str]) -> None:
    d = worker["secrets"]
    config = {
        "producer.override.sasl.password": f"${{file:{d}/orders.properties:password}}",
        "token": f"Bearer ${{dir:{d}:token}}",
        "env": "${env:EOSCONNECT_TEST_SECRET}",
        "plain": "x",
    }
    resolved = resolve_config(config, worker)
    assert resolved == {
        "producer.override.sasl.password": "s3cret",
        "token": "Bearer tok-123",
        "env": "from-env",
        "plain": "x",
    }
    assert unresolvable_variables(config, worker) == {}
    # Clients are built with the value; the connector config keeps the placeholder.
    assert client_config("producer", worker, config)["sasl.password"] == "s3cret"
    assert config["producer.override.sasl.password"].startswith("${file:")


def test_unresolvable_variables_are_named_and_no_value_leaks(worker: dict[str, str], tmp_path: Path) -> None:
    d = worker["secrets"]
    outside = tmp_path / "other.properties"
    outside.write_text("password=elsewhere\n")
    config = {
        "a": f"${{file:{d}/orders.properties:nope}}",
        "b": f"${{file:{outside}:password}}",
        "c": "${vault:secret/x:y}",
        "d": "${env:HOME}",
    }
    errors = unresolvable_variables(config, worker)
    assert set(errors) == {"a", "b", "c", "d"}
    assert "has no 'nope'" in errors["a"][0]
    assert "outside its allowed.paths" in errors["b"][0]
    assert "no config provider 'vault'" in errors["c"][0]
    with pytest.raises(ConfigException) as info:
        resolve_config(config, worker)
    assert "elsewhere" not in str(info.value) and "s3cret" not in str(info.value)


def test_task_configs_keep_the_placeholder(worker: dict[str, str]) -> None:
    """The connector starts with the value; the task configs it derives (stored in the config
    topic) get the variable back, as Kafka's reverse transform does."""
    from eosconnect.cluster.jobs import task_configs_for

    d = worker["secrets"]
    variable = f"${{file:{d}/orders.properties:password}}"
    props = {
        "name": "s",
        "connector.class": "SequenceSource",
        "topic": "t",
        "tasks.max": "2",
        "secret": variable,
    }
    _connector, configs = task_configs_for(props, worker)
    assert configs and all(c.get("secret") == variable for c in configs)
    assert all("s3cret" not in str(c) for c in configs)


def test_validation_uses_the_value_and_answers_the_placeholder(worker: dict[str, str]) -> None:
    """A JdbcSource whose password is a variable: the connector's validation connects with the
    resolved value; the validate answer shows the variable, never the value."""
    import json

    from eosconnect.cluster.validation import validate_connector_config
    from eosconnect.worker_config import WorkerConfig

    d = worker["secrets"]
    variable = f"${{file:{d}/orders.properties:password}}"
    config = {
        "name": "j",
        "connector.class": "JdbcSource",
        "connection.url": f"sqlite:///{d}/missing.db",
        "connection.password": variable,
        "tables": "orders",
        "mode": "bulk",
        "topic.prefix": "p-",
    }
    base = {"bootstrap.servers": "localhost:9092", "group.id": "g", "offset.storage.topic": "o"}
    answer = validate_connector_config(config, WorkerConfig.parse({**base, **worker}))
    text = json.dumps(answer)
    assert "s3cret" not in text and variable in text
    unresolved = validate_connector_config(
        {**config, "connection.password": "${file:/nope:x}"}, WorkerConfig.parse({**base, **worker})
    )
    assert "${file:/nope:x} cannot be resolved" in json.dumps(unresolved)
