"""Finding a hosted source's program and listing the installed ones."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from eosconnect.api.errors import ConfigException
from eosconnect.connectors.hosted.executables import command_of, installed_sources, resolve_executable


def fake_venv(root: Path, package: str, version: str) -> Path:
    venv = root / package
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    (site / f"{package.replace('-', '_')}-{version}.dist-info").mkdir(parents=True)
    program = venv / "bin" / command_of(package)
    program.parent.mkdir(parents=True)
    program.write_text("#!/bin/sh\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return program


def test_commands_of_packages():
    assert command_of("airbyte-source-faker") == "source-faker"
    assert command_of("pipelinewise-tap-postgres") == "tap-postgres"
    assert command_of("tap-csv") == "tap-csv"


def test_a_package_name_resolves_in_its_venv(tmp_path):
    program = fake_venv(tmp_path, "airbyte-source-faker", "7.2.1")
    assert resolve_executable("airbyte-source-faker", str(tmp_path), "airbyte.source") == str(program)
    assert resolve_executable(str(program), "/nowhere", "airbyte.source") == str(program)


def test_an_unknown_program_says_where_it_looked_and_how_to_install(tmp_path):
    with pytest.raises(ConfigException) as err:
        resolve_executable("airbyte-source-nope", str(tmp_path), "airbyte.source")
    (message,) = err.value.errors["airbyte.source"]
    assert str(tmp_path / "airbyte-source-nope" / "bin") in message
    assert "pip install airbyte-source-nope" in message


def test_installed_sources_are_listed_with_versions(tmp_path):
    fake_venv(tmp_path, "airbyte-source-faker", "7.2.1")
    fake_venv(tmp_path, "pipelinewise-tap-postgres", "1.8.4")
    found = {(i.protocol, i.package, i.version) for i in installed_sources(str(tmp_path))}
    assert {
        ("airbyte", "airbyte-source-faker", "7.2.1"),
        ("singer", "pipelinewise-tap-postgres", "1.8.4"),
    } <= found
