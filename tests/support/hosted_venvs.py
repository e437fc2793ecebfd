"""Real Airbyte sources and Singer taps from PyPI for the tests, each installed once into a venv of
its own (their pins clash with eosconnect's) under the default venv directory that AirbyteSource
and SingerSource look in (`~/.cache/eosconnect/hosted/<package>`, or EOSCONNECT_HOSTED_VENV_DIR).
Installed versions are pinned here so the tests read what they were written against; later runs
find the venv made and need no network."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest

from eosconnect.connectors.hosted.executables import DEFAULT_VENV_DIR, install_package

__all__ = ["FAKER", "PLAIN_JSON", "TAP_POSTGRES", "VENV_DIR", "airbyte_config", "hosted_program"]

FAKER = "airbyte-source-faker==7.2.1"
TAP_POSTGRES = "pipelinewise-tap-postgres==1.8.4"
VENV_DIR = os.environ.get("EOSCONNECT_HOSTED_VENV_DIR", DEFAULT_VENV_DIR)


def hosted_program(requirement: str) -> str:
    """The program of `requirement`, installed first if need be; skips (saying why) when it cannot
    be installed (no network on a machine that never made the venv)."""
    try:
        return install_package(requirement, VENV_DIR)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot install {requirement} into {VENV_DIR}: {exc}")


PLAIN_JSON = {
    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
    "key.converter.schemas.enable": "false",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "false",
}


def airbyte_config(source: str, prefix: str, streams: str, source_config: dict[str, Any]) -> dict[str, str]:
    """An exactly-once AirbyteSource of one task with plain JSON records, one sync an hour."""
    return {
        "connector.class": "AirbyteSource",
        "tasks.max": "1",
        "airbyte.source": source,
        "airbyte.venv.dir": VENV_DIR,
        "airbyte.config": json.dumps(source_config),
        "airbyte.streams": streams,
        "topic.prefix": prefix,
        "airbyte.sync.interval.ms": "3600000",
        "transaction.boundary": "connector",
        "exactly.once.support": "required",
        **PLAIN_JSON,
    }
