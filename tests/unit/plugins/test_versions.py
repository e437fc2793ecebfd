"""KIP-891: two versions of one connector and transformation on plugin.path side by side, each
importable as a copy of its own; a version or Maven range chooses one; a range nothing installed
is in is refused naming what is."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from eosconnect.api.errors import ConfigException
from eosconnect.cluster.connector_kinds import SOURCE
from eosconnect.cluster.framework_settings import framework_errors
from eosconnect.cluster.herder_api import NotFoundError
from eosconnect.cluster.herder_reads import installed_plugins
from eosconnect.cluster.validation import plugin_config_infos
from eosconnect.converters.resolution import converter_from_config
from eosconnect.plugins.loading import connector_class_of, plugin_version, resolve_connector_class
from eosconnect.plugins.versions import VersionRange, compare_versions, installed_versions
from eosconnect.transforms.chain import TransformationChain

PLUGIN = """
from eosconnect.connectors.sequence import SequenceSourceConnector
from eosconnect.converters import JsonConverter
from eosconnect.transforms import InsertField

from .helper import VERSION


class AcmeSource(SequenceSourceConnector):
    def version(self):
        return VERSION


class AcmeInsert(InsertField):
    def version(self):
        return VERSION


class AcmeJson(JsonConverter):
    def version(self):
        return VERSION
"""


@pytest.fixture
def two_versions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """`<package>.source.AcmeSource` in versions 1.4.2 (first on plugin.path) and 2.1.0."""
    package = f"acme_{uuid.uuid4().hex[:8]}"
    entries = []
    for version in ("1.4.2", "2.1.0"):
        root = tmp_path / f"acme-{version}" / package
        root.mkdir(parents=True)
        (root / "__init__.py").write_text("")
        (root / "helper.py").write_text(f"VERSION = {version!r}\n")
        (root / "source.py").write_text(PLUGIN)
        entries.append(str(root.parent))
    monkeypatch.setenv("EOSCONNECT_PLUGIN_PATH", ":".join(entries))
    for entry in reversed(entries):
        monkeypatch.syspath_prepend(entry)
    return package


@pytest.mark.parametrize(
    ("older", "newer"),
    [("1.0", "1.0.1"), ("1.9", "1.10"), ("1.0-SNAPSHOT", "1.0"), ("1.0-rc1", "1.0-rc2"), ("2", "10.0")],
)
def test_versions_order_as_maven_orders_them(older: str, newer: str) -> None:
    assert compare_versions(older, newer) == -1
    assert compare_versions(newer, older) == 1
    assert compare_versions("1.0", "1") == 0


@pytest.mark.parametrize(
    ("spec", "inside", "outside"),
    [
        ("2.0", ["2.0", "2"], ["2.0.1", "1.9"]),
        ("[1.0,2.0)", ["1.0", "1.9.9"], ["2.0", "0.9"]),
        ("(,1.5]", ["0.1", "1.5"], ["1.5.1"]),
        ("[2.0,)", ["2.0", "99"], ["1.9"]),
        ("(1.0,2.0]", ["1.0.1", "2.0"], ["1.0", "2.1"]),
        ("[1.0],[1.2,1.4]", ["1.0", "1.3"], ["1.1", "1.5"]),
    ],
)
def test_ranges(spec: str, inside: list[str], outside: list[str]) -> None:
    wanted = VersionRange.parse(spec, "connector.plugin.version")
    assert all(wanted.contains(v) for v in inside)
    assert not any(wanted.contains(v) for v in outside)


@pytest.mark.parametrize("spec", ["[1.0", "[2.0,1.0]", "1.0]", "[1,2,3]", "(1.0)", ""])
def test_a_malformed_range_is_refused_naming_the_setting(spec: str) -> None:
    with pytest.raises(ConfigException) as raised:
        VersionRange.parse(spec, "transforms.x.plugin.version")
    assert "transforms.x.plugin.version" in raised.value.errors


def test_both_versions_load_side_by_side(two_versions: str) -> None:
    path = f"{two_versions}.source.AcmeSource"
    first = resolve_connector_class(path, "1.4.2")
    assert first.__module__ == f"{two_versions}.source"  # the first on plugin.path is imported plainly
    versions = installed_versions(first)
    assert sorted(versions) == ["1.4.2", "2.1.0"]
    newer = resolve_connector_class(path, "[2.0,3.0)")
    assert newer().version() == "2.1.0"
    assert newer.__module__.startswith("eosconnect_plugin_copies.")
    assert resolve_connector_class(path) is newer  # no version set: the newest, as Kafka loads it
    assert resolve_connector_class(path, "[1.0,)")().version() == "2.1.0"  # the newest in the range
    assert connector_class_of({"connector.class": path, "connector.plugin.version": "2.1.0"}) is newer
    # the task class of the copy is the copy's (its path is what a task config carries)
    task = newer().task_class()
    assert task.__module__ == "eosconnect.connectors.sequence"
    assert plugin_version(path, "(,2)") == "1.4.2" and plugin_version(path) == "2.1.0"


def test_a_range_nothing_is_in_is_refused_naming_what_is_installed(two_versions: str) -> None:
    path = f"{two_versions}.source.AcmeSource"
    with pytest.raises(ConfigException) as raised:
        resolve_connector_class(path, "[3.0,)")
    (message,) = raised.value.errors["connector.plugin.version"]
    assert "installed: 1.4.2, 2.1.0" in message and "[3.0,)" in message
    errors = framework_errors({"connector.class": path, "connector.plugin.version": "(,1.0)"}, SOURCE)
    assert "installed: 1.4.2, 2.1.0" in errors["connector.plugin.version"][0]


def test_a_transformation_version_is_chosen_by_its_alias_setting(two_versions: str) -> None:
    config = {
        "transforms": "a,b",
        "transforms.a.type": f"{two_versions}.source.AcmeInsert",
        "transforms.a.static.field": "f",
        "transforms.a.static.value": "v",
        "transforms.b.type": f"{two_versions}.source.AcmeInsert",
        "transforms.b.plugin.version": "1.4.2",
        "transforms.b.static.field": "g",
        "transforms.b.static.value": "w",
    }
    chain = TransformationChain.from_config(config)
    # a: no version set, the newest; b: the one its setting names
    assert [stage.transformation.version() for stage in chain.stages] == ["2.1.0", "1.4.2"]  # type: ignore[attr-defined]
    with pytest.raises(ConfigException) as raised:
        TransformationChain.from_config({**config, "transforms.b.plugin.version": "[5,6]"})
    assert "installed: 1.4.2, 2.1.0" in raised.value.errors["transforms.b.plugin.version"][0]


def test_a_converter_version_is_chosen_by_its_setting(two_versions: str) -> None:
    config = {"value.converter": f"{two_versions}.source.AcmeJson", "value.converter.schemas.enable": "false"}
    assert converter_from_config(config, is_key=False).version() == "2.1.0"  # type: ignore[attr-defined]
    pinned = {**config, "value.converter.plugin.version": "(,2.0)"}
    assert converter_from_config(pinned, is_key=False).version() == "1.4.2"  # type: ignore[attr-defined]
    with pytest.raises(ConfigException) as raised:
        converter_from_config({**config, "value.converter.plugin.version": "0.9"}, is_key=False)
    assert "installed: 1.4.2, 2.1.0" in raised.value.errors["value.converter.plugin.version"][0]


def test_a_header_converter_version_is_checked_against_what_is_installed(two_versions: str) -> None:
    config = {"connector.class": "SequenceSource", "header.converter": f"{two_versions}.source.AcmeJson"}
    assert "header.converter.plugin.version" not in framework_errors(
        {**config, "header.converter.plugin.version": "[2.0,)"}, SOURCE
    )
    errors = framework_errors({**config, "header.converter.plugin.version": "[3.0,)"}, SOURCE)
    assert "installed: 1.4.2, 2.1.0" in errors["header.converter.plugin.version"][0]


def test_connector_plugins_lists_each_version(two_versions: str) -> None:
    listed = [p for p in installed_plugins(True) if p["class"] == f"{two_versions}.source.AcmeSource"]
    assert listed == [
        {"class": f"{two_versions}.source.AcmeSource", "type": "source", "version": "1.4.2"},
        {"class": f"{two_versions}.source.AcmeSource", "type": "source", "version": "2.1.0"},
    ]


def test_plugin_config_of_a_version(two_versions: str) -> None:
    path = f"{two_versions}.source.AcmeSource"
    assert plugin_config_infos(path, "[2.0,)") == plugin_config_infos(path)
    with pytest.raises(NotFoundError) as raised:
        plugin_config_infos(path, "[9,)")
    assert "installed: 1.4.2, 2.1.0" in str(raised.value)
