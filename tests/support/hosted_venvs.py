"""Real Airbyte sources and Singer taps from PyPI for the tests, each installed once into a venv of
its own (their pins clash with eosconnect's) under the default venv directory that AirbyteSource
and SingerSource look in (`~/.cache/eosconnect/hosted/<package>`, or EOSCONNECT_HOSTED_VENV_DIR).
Installed versions are pinned here so the tests read what they were written against; later runs
find the venv made and need no network."""

from __future__ import annotations

import os
import subprocess

import pytest

from eosconnect.connectors.hosted.executables import DEFAULT_VENV_DIR, install_package

__all__ = ["FAKER", "TAP_POSTGRES", "VENV_DIR", "hosted_program"]

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
