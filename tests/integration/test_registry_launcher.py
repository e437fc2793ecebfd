"""The schema registry launcher: a real Apicurio Registry answering Confluent's API, stopped by pid."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from eosconnect.devkafka.processes import pid_alive
from eosconnect.devkafka.registry import LocalSchemaRegistry

AVRO_V1 = '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}'
#: Adds a field without a default: readers of v2 cannot read v1 data, so BACKWARD refuses it.
AVRO_V2_NO_DEFAULT = (
    '{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"string"}]}'
)


def _register(url: str, subject: str, schema: str) -> httpx.Response:
    return httpx.post(f"{url}/subjects/{subject}/versions", json={"schema": schema}, timeout=10)


def test_registry_speaks_confluent_api_and_applies_subject_rules(schema_registry: LocalSchemaRegistry):
    url = schema_registry.url
    assert url.endswith("/apis/ccompat/v7")
    # Apicurio's global default is NONE, unlike Confluent's BACKWARD: the launcher leaves it as it is.
    assert httpx.get(f"{url}/config", timeout=10).json()["compatibilityLevel"] == "NONE"

    first = _register(url, "launcher-none", AVRO_V1)
    assert first.status_code == 200, first.text
    assert _register(url, "launcher-none", AVRO_V2_NO_DEFAULT).status_code == 200

    assert _register(url, "launcher-backward", AVRO_V1).status_code == 200
    schema_registry.set_compatibility("BACKWARD", subject="launcher-backward")
    refused = _register(url, "launcher-backward", AVRO_V2_NO_DEFAULT)
    assert refused.status_code == 409, refused.text


def test_cli_start_status_stop(tmp_path: Path):
    run_dir = tmp_path / "registry"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "eosconnect.cli", "registry", *args, "--dir", str(run_dir)],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
            env={**os.environ, "COLUMNS": "200"},
        )

    started = cli("start", "--compatibility", "BACKWARD")
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        url = started.stdout.strip().splitlines()[-1].removeprefix("schema.registry.url=")
        assert httpx.get(f"{url}/config", timeout=10).json()["compatibilityLevel"] == "BACKWARD"
        pid = LocalSchemaRegistry.attach(run_dir).pid
        assert pid_alive(pid)
        status = cli("status")
        assert status.returncode == 0 and "running" in status.stdout
    finally:
        stopped = cli("stop")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert not pid_alive(pid)
    assert cli("status").returncode == 1


def test_unknown_compatibility_level_is_refused_before_starting(tmp_path: Path):
    with pytest.raises(ValueError, match="compatibility must be one of"):
        LocalSchemaRegistry(tmp_path, compatibility="sideways")
