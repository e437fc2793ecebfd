"""Finding connector classes from `connector.class`: Python paths, short names, entry points."""

from __future__ import annotations

import importlib.metadata
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from eosconnect.api import (
    ConfigDef,
    ConfigException,
    ConnectorClassNotFound,
    SourceConnector,
    SourceRecord,
    SourceTask,
)
from eosconnect.plugins import (
    available_connectors,
    import_class,
    register_connector,
    resolve_connector_class,
    unregister_connector,
)
from eosconnect.plugins import (
    loading as plugins,
)

MODULE = """
from eosconnect.api import ConfigDef, SourceConnector, SourceTask


class PluginTask(SourceTask):
    def start(self, config):
        pass

    def poll(self):
        return None


class PluginSourceConnector(SourceConnector):
    def config_def(self):
        return ConfigDef()

    def start(self, config):
        pass

    def task_class(self):
        return PluginTask

    def task_configs(self, max_tasks):
        return [{}]


class Outer:
    class Inner(PluginSourceConnector):
        pass


NOT_A_CLASS = 5
"""


class LocalTask(SourceTask):
    def start(self, config: dict[str, str]) -> None:
        pass

    def poll(self) -> list[SourceRecord] | None:
        return None


class LocalConnector(SourceConnector):
    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def start(self, config: dict[str, str]) -> None:
        pass

    def task_class(self) -> type[SourceTask]:
        return LocalTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{}]


@pytest.fixture
def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    package = tmp_path / "eosc_test_plugins"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "counter.py").write_text(MODULE)
    (package / "broken.py").write_text("import surely_not_installed_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(plugins.PLUGIN_PATH_ENV, str(tmp_path))  # the worker's plugin.path
    yield "eosc_test_plugins"
    for name in [m for m in sys.modules if m.split(".")[0] == "eosc_test_plugins"]:
        del sys.modules[name]  # the next test's copy lives in its own tmp_path


@pytest.fixture
def entry_points(monkeypatch: pytest.MonkeyPatch) -> list[importlib.metadata.EntryPoint]:
    points: list[importlib.metadata.EntryPoint] = []
    monkeypatch.setattr(plugins, "connector_entry_points", lambda: list(points))
    return points


@pytest.fixture(autouse=True)
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugins, "_registered", {})
    monkeypatch.setattr(plugins, "BUILTIN_CONNECTORS", {})


def test_fully_qualified_python_paths(plugin_module: str) -> None:
    cls = resolve_connector_class(f"{plugin_module}.counter.PluginSourceConnector")
    assert cls.__name__ == "PluginSourceConnector" and issubclass(cls, SourceConnector)
    assert resolve_connector_class(f"{plugin_module}.counter:PluginSourceConnector") is cls
    assert resolve_connector_class(f" {plugin_module}.counter.Outer.Inner ").__name__ == "Inner"
    assert resolve_connector_class(LocalConnector) is LocalConnector


def test_registered_short_names_with_and_without_connector_suffix(plugin_module: str) -> None:
    register_connector("Local", LocalConnector)
    register_connector("PluginSource", f"{plugin_module}.counter.PluginSourceConnector")
    assert resolve_connector_class("Local") is LocalConnector
    assert resolve_connector_class("LocalConnector") is LocalConnector
    assert resolve_connector_class("PluginSource").__name__ == "PluginSourceConnector"
    assert available_connectors() == {
        "Local": f"{__name__}.LocalConnector",
        "PluginSource": f"{plugin_module}.counter.PluginSourceConnector",
    }
    with pytest.raises(ValueError, match="already registered"):
        register_connector("Local", "other.Path")
    register_connector("Local", "other.Path", replace=True)
    unregister_connector("Local")
    with pytest.raises(ValueError, match=r"no '.'"):
        register_connector("a.b", LocalConnector)


def test_builtin_short_names_are_imported_lazily(plugin_module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        plugins.BUILTIN_CONNECTORS, "Counter", f"{plugin_module}.counter.PluginSourceConnector"
    )
    assert resolve_connector_class("CounterConnector").__name__ == "PluginSourceConnector"


def test_entry_points(plugin_module: str, entry_points: list[importlib.metadata.EntryPoint]) -> None:
    entry_points.append(
        importlib.metadata.EntryPoint(
            name="Counter",
            value=f"{plugin_module}.counter:PluginSourceConnector",
            group=plugins.ENTRY_POINT_GROUP,
        )
    )
    assert resolve_connector_class("Counter").__name__ == "PluginSourceConnector"
    assert available_connectors() == {"Counter": f"{plugin_module}.counter:PluginSourceConnector"}


def test_real_entry_point_lookup_uses_the_group(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def fake(group: str) -> list[importlib.metadata.EntryPoint]:
        seen.append(group)
        return []

    monkeypatch.setattr(importlib.metadata, "entry_points", fake)
    assert list(plugins.connector_entry_points()) == [] and seen == ["eosconnect.connectors"]


def test_unknown_names_give_a_clear_error(entry_points: list[importlib.metadata.EntryPoint]) -> None:
    register_connector("SequenceSource", LocalConnector)
    with pytest.raises(ConnectorClassNotFound) as info:
        resolve_connector_class("NoSuchSource")
    message = str(info.value)
    assert '"connector.class"' in message and "'NoSuchSource'" in message
    assert "available: SequenceSource" in message and "Set connector.class to" in message
    assert info.value.errors.keys() == {"connector.class"}
    assert isinstance(info.value, ConfigException)


def test_unloadable_paths(plugin_module: str, entry_points: list[importlib.metadata.EntryPoint]) -> None:
    with pytest.raises(ConnectorClassNotFound, match=r"no module named 'nosuch'.*none are installed"):
        resolve_connector_class("nosuch.module.Connector")
    with pytest.raises(ConnectorClassNotFound, match="Java class"):
        resolve_connector_class("org.apache.kafka.connect.file.FileStreamSourceConnector")
    with pytest.raises(ConnectorClassNotFound, match=r"was found but failed to import.*surely_not_installed"):
        resolve_connector_class(f"{plugin_module}.broken.Connector")
    with pytest.raises(ConnectorClassNotFound, match="has no attribute 'Missing'"):
        resolve_connector_class(f"{plugin_module}.counter.Missing")
    with pytest.raises(ConnectorClassNotFound, match="not a class"):
        resolve_connector_class(f"{plugin_module}.counter.NOT_A_CLASS")
    with pytest.raises(ConfigException, match="is not a connector"):
        resolve_connector_class(f"{plugin_module}.counter.PluginTask")
    with pytest.raises(ConnectorClassNotFound, match="is empty"):
        resolve_connector_class("  ")


def test_broken_short_name_target_is_reported() -> None:
    register_connector("Broken", "nosuch.module.Connector")
    with pytest.raises(
        ConfigException, match=r"'Broken' refers to nosuch.module.Connector, which could not be loaded"
    ):
        resolve_connector_class("Broken")


def test_import_class_forms() -> None:
    assert import_class("eosconnect.api.config.ConfigDef").__name__ == "ConfigDef"
    assert import_class("eosconnect.api.config:ConfigDef").__name__ == "ConfigDef"
    with pytest.raises(ImportError, match=r"package.module.ClassName"):
        import_class("JustAName")


@pytest.mark.parametrize(
    ("path", "defined_in"),
    [
        ("api.builtin_transforms.InsertField", "eosconnect.transforms.fields"),
        ("api.builtin_transforms.routing:Filter", "eosconnect.transforms.routing"),
        ("api.builtin_transforms.fields.MaskField", "eosconnect.transforms.reshape"),
        ("api.converters.JsonConverter", "eosconnect.converters.json"),
        ("api.converters.StringConverter", "eosconnect.converters.primitives"),
        ("api.schema_registry.avro.AvroConverter", "eosconnect.converters.schema_registry.avro"),
        ("api.JsonConverter", "eosconnect.converters.json"),
        ("api:TopicNameMatches", "eosconnect.transforms.predicates"),
        ("connectors.postgres_cdc.unwrap.ExtractNewRecordState", "eosconnect.transforms.unwrap"),
    ],
)
def test_class_paths_of_the_former_package_layout_load_the_same_classes(path: str, defined_in: str) -> None:
    """A config stored in the config topic keeps naming the classes by where they were defined."""
    cls = import_class(f"eosconnect.{path}")
    assert cls.__module__ == defined_in and cls.__name__ == path.replace(":", ".").rsplit(".", 1)[1]


def test_modules_outside_the_plugin_locations_are_refused_before_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "antigravity" not in sys.modules
    with pytest.raises(ImportError, match=r"'antigravity' .* is not a plugin.*plugin.path"):
        import_class("antigravity.Anything")
    assert "antigravity" not in sys.modules  # refused before any of its code ran
    with pytest.raises(ConfigException, match="is not a plugin"):
        resolve_connector_class("this.Zen")
    assert "this" not in sys.modules
    outside = tmp_path / "elsewhere"
    (outside / "eosc_outside").mkdir(parents=True)
    (outside / "eosc_outside" / "__init__.py").write_text("class X:\n    pass\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.syspath_prepend(str(outside))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.delenv(plugins.PLUGIN_PATH_ENV, raising=False)
    with pytest.raises(ImportError, match="is not a plugin"):
        import_class("eosc_outside.X")
    plugins.configure_plugin_path([str(outside)])
    assert import_class("eosc_outside.X").__name__ == "X"


def test_plugin_path_comes_first_on_sys_path_in_its_order(tmp_path, monkeypatch):
    """A plugin shadows an installed module of the same name in the driver, as in Spark's Python workers."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    monkeypatch.setattr(sys, "path", ["/site-packages-stand-in", *sys.path])
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.delenv(plugins.PLUGIN_PATH_ENV, raising=False)
    plugins.configure_plugin_path([str(first), " ", str(second)])
    assert sys.path[:3] == [str(first.resolve()), str(second.resolve()), "/site-packages-stand-in"]
    plugins.configure_plugin_path([str(first)])  # configuring again adds no duplicate
    assert sys.path.count(str(first.resolve())) == 1


SINK_PACKAGE_MODULE = """
from eosconnect.api import ConfigDef, SinkConnector, SinkTask


class JsonTask(SinkTask):
    def start(self, config):
        pass

    def put(self, records):
        pass


class JsonSinkConnector(SinkConnector):
    def config_def(self):
        return ConfigDef()

    def start(self, config):
        pass

    def task_class(self):
        return JsonTask

    def task_configs(self, max_tasks):
        return [{}]
"""


def test_plugin_path_connectors_are_listed_with_their_versions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A module, a package and a zip on plugin.path: `GET /connector-plugins` (and so `eosconnect
    plugins list`) shows each one's connector classes with their versions; a module that does not
    import is skipped."""
    import uuid
    import zipfile

    from eosconnect.cluster.herder_reads import HerderReads

    tag = uuid.uuid4().hex[:8]
    plugin_dir = tmp_path / "plugins"
    plugin_dir.mkdir()
    (plugin_dir / f"single_{tag}.py").write_text(MODULE + '\n__version__ = "1.2.3"\n')
    package = plugin_dir / f"pkg_{tag}"
    package.mkdir()
    (package / "__init__.py").write_text('__version__ = "0.4"\n')
    (package / "sink.py").write_text(
        SINK_PACKAGE_MODULE + '\ndef _v(self):\n    return "0.4"\nJsonSinkConnector.version = _v\n'
    )
    (plugin_dir / f"broken_{tag}.py").write_text("import surely_not_installed_dependency\n")
    archive = tmp_path / f"zipped_{tag}.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(
            f"zipped_{tag}/__init__.py", MODULE.replace("PluginSourceConnector", "ZippedSourceConnector")
        )
    entries = [str(plugin_dir), str(archive)]
    monkeypatch.setattr(sys, "path", [*entries, *sys.path])
    monkeypatch.setenv(plugins.PLUGIN_PATH_ENV, ":".join(entries))
    try:
        listed = {p["class"]: p for p in HerderReads.connector_plugins(None, True)}  # type: ignore[arg-type]
    finally:
        plugins._scan_plugin_path.cache_clear()
        for name in [m for m in sys.modules if m.split(".")[0].endswith(tag)]:
            del sys.modules[name]
    assert listed[f"single_{tag}.PluginSourceConnector"] == {
        "class": f"single_{tag}.PluginSourceConnector",
        "type": "source",
        "version": "1.2.3",
    }
    assert listed[f"pkg_{tag}.sink.JsonSinkConnector"]["type"] == "sink"
    assert listed[f"pkg_{tag}.sink.JsonSinkConnector"]["version"] == "0.4"
    assert listed[f"zipped_{tag}.ZippedSourceConnector"]["type"] == "source"
    assert not any(c.startswith(f"broken_{tag}") for c in listed)


GATE = """
import threading

entered = threading.Event()
release = threading.Event()
second_imported = threading.Event()
"""


def test_plugin_modules_are_imported_one_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two threads importing packages with import cycles for the first time can each hold a module
    lock the other needs, and Python then gives one a partially initialized module (a worker
    validating a JdbcSource and a JdbcSink config at once failed on SQLAlchemy that way). So the
    second plugin import waits until the first one has finished."""
    package = tmp_path / "eosc_import_gate"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "gate.py").write_text(GATE)
    (package / "slow.py").write_text(
        "from eosc_import_gate import gate\n"
        "gate.entered.set()\n"
        "gate.release.wait(10)\n\n"
        "class Slow:\n    pass\n"
    )
    (package / "quick.py").write_text(
        "from eosc_import_gate import gate\ngate.second_imported.set()\n\nclass Quick:\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(plugins.PLUGIN_PATH_ENV, str(tmp_path))
    try:
        from eosc_import_gate import gate  # type: ignore[import-not-found]

        loaded: dict[str, type] = {}
        first = threading.Thread(
            target=lambda: loaded.update(slow=import_class("eosc_import_gate.slow.Slow"))
        )
        first.start()
        assert gate.entered.wait(10)
        second = threading.Thread(
            target=lambda: loaded.update(quick=import_class("eosc_import_gate.quick.Quick"))
        )
        second.start()
        assert not gate.second_imported.wait(0.5), "a second plugin module was imported during the first"
        gate.release.set()
        first.join(10)
        second.join(10)
        assert gate.second_imported.is_set()
        assert {name: cls.__name__ for name, cls in loaded.items()} == {"slow": "Slow", "quick": "Quick"}
    finally:
        for name in [n for n in sys.modules if n.startswith("eosc_import_gate")]:
            del sys.modules[name]
