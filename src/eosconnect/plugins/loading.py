"""Finding connector classes from `connector.class` (and, for converters and transforms, classes
from dotted paths).

`connector.class` may be:

1. a short name registered at run time with `register_connector("MySource", MySourceConnector)`;
2. a short name in `BUILTIN_CONNECTORS` below (eosconnect's own connectors);
3. a short name published by an installed package under the entry-point group
   `eosconnect.connectors`, e.g. in its pyproject.toml::

       [project.entry-points."eosconnect.connectors"]
       MySource = "mypackage.source:MySourceConnector"

4. a fully qualified Python path, `package.module.ClassName` (or `package.module:ClassName`).

As in Kafka Connect, a short name also matches with or without a trailing "Connector".
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import inspect
import logging
import os
import pkgutil
import sys
import threading
import zipfile
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import Any

from eosconnect.api.connector import Connector
from eosconnect.api.errors import ConfigException, ConnectorClassNotFound
from eosconnect.plugins.versions import COPIES_PACKAGE, VERSION_SUFFIX, select_version

__all__ = [
    "BUILTIN_CONNECTORS",
    "ENTRY_POINT_GROUP",
    "ConnectorType",
    "available_connectors",
    "check_plugin_location",
    "configure_plugin_path",
    "connector_class_of",
    "connector_type",
    "import_class",
    "plugin_path_connectors",
    "plugin_version",
    "register_connector",
    "resolve_connector_class",
    "unregister_connector",
]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "eosconnect.connectors"
SETTING = "connector.class"
#: KIP-891: the connector's version, a version or Maven range (plugins/versions.py).
VERSION_SETTING = "connector" + VERSION_SUFFIX

#: Plugin modules are imported one at a time per process. Two threads importing a package with
#: import cycles for the first time (SQLAlchemy's, on a worker validating two JDBC configs at once,
#: or two packed tasks starting together) can each hold a module lock the other needs; Python then
#: hands one of them the partially initialized module ("cannot import name ... from partially
#: initialized module"). Loaded modules cost nothing more to import again.
_IMPORT_LOCK = threading.RLock()


def _import_module(name: str) -> Any:
    with _IMPORT_LOCK:
        return importlib.import_module(name)


BUILTIN_CONNECTORS: dict[str, str] = {
    # Short name -> dotted path of eosconnect's own connectors, imported only when used, e.g.
    "SequenceSource": "eosconnect.connectors.sequence.SequenceSourceConnector",
    "FileStreamSource": "eosconnect.connectors.file_stream.FileStreamSourceConnector",
    "org.apache.kafka.connect.file.FileStreamSourceConnector": (
        "eosconnect.connectors.file_stream.FileStreamSourceConnector"
    ),
    "JdbcSource": "eosconnect.connectors.jdbc.JdbcSourceConnector",
    "JdbcSink": "eosconnect.connectors.jdbc_sink.connector.JdbcSinkConnector",
    "io.confluent.connect.jdbc.JdbcSinkConnector": (
        "eosconnect.connectors.jdbc_sink.connector.JdbcSinkConnector"
    ),
    "DeltaSink": "eosconnect.connectors.delta.connector.DeltaSinkConnector",
    "IcebergSink": "eosconnect.connectors.iceberg.connector.IcebergSinkConnector",
    "org.apache.iceberg.connect.IcebergSinkConnector": (
        "eosconnect.connectors.iceberg.connector.IcebergSinkConnector"
    ),
    "PostgresCdcSource": "eosconnect.connectors.postgres_cdc.PostgresCdcSourceConnector",
    "io.debezium.connector.postgresql.PostgresConnector": (
        "eosconnect.connectors.postgres_cdc.PostgresCdcSourceConnector"
    ),
    "MySqlCdcSource": "eosconnect.connectors.mysql_cdc.MySqlCdcSourceConnector",
    "io.debezium.connector.mysql.MySqlConnector": "eosconnect.connectors.mysql_cdc.MySqlCdcSourceConnector",
    "io.debezium.connector.mariadb.MariaDbConnector": (
        "eosconnect.connectors.mysql_cdc.MySqlCdcSourceConnector"
    ),
    "FileStreamSink": "eosconnect.connectors.file_stream.FileStreamSinkConnector",
    "AirbyteSource": "eosconnect.connectors.hosted.airbyte.AirbyteSourceConnector",
    "SingerSource": "eosconnect.connectors.hosted.singer.SingerSourceConnector",
    "MirrorSink": "eosconnect.connectors.mirror.MirrorSinkConnector",
    "MirrorSource": "eosconnect.connectors.mirror_source.MirrorSourceConnector",
    "org.apache.kafka.connect.mirror.MirrorSourceConnector": (
        "eosconnect.connectors.mirror_source.MirrorSourceConnector"
    ),
    "MirrorCheckpoint": "eosconnect.connectors.mirror_checkpoint.MirrorCheckpointConnector",
    "org.apache.kafka.connect.mirror.MirrorCheckpointConnector": (
        "eosconnect.connectors.mirror_checkpoint.MirrorCheckpointConnector"
    ),
    "MirrorHeartbeat": "eosconnect.connectors.mirror_heartbeat.MirrorHeartbeatConnector",
    "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector": (
        "eosconnect.connectors.mirror_heartbeat.MirrorHeartbeatConnector"
    ),
    "org.apache.kafka.connect.file.FileStreamSinkConnector": (
        "eosconnect.connectors.file_stream.FileStreamSinkConnector"
    ),
}
"""The built-in connectors' short names. Add one line per built-in connector here."""

_registered: dict[str, type | str] = {}


class ConnectorType(StrEnum):
    """Which way a connector moves data; the REST API's `type` field."""

    SOURCE = "source"
    SINK = "sink"


def connector_type(cls: type) -> ConnectorType:
    """SOURCE or SINK for a connector class (or task class); raises TypeError for anything else."""
    from eosconnect.api.sink import SinkConnector, SinkTask
    from eosconnect.api.source import SourceConnector, SourceTask

    if issubclass(cls, SourceConnector | SourceTask):
        return ConnectorType.SOURCE
    if issubclass(cls, SinkConnector | SinkTask):
        return ConnectorType.SINK
    raise TypeError(f"{cls.__module__}.{cls.__qualname__} is neither a source nor a sink connector or task")


#: Where classes that configs may name by Python path from before the converters, transforms and
#: plugin loading became packages of their own are now: a connector config in the config topic
#: outlives the package layout it was written against, and must load the same class after an
#: upgrade. Modules under `eosconnect.`, the old one -> the one defining its classes now; a built-in
#: transform (`_OLD_TRANSFORMS`) by its class name at `eosconnect.transforms`, which exports them all.
_RELOCATED_MODULES = {
    "api.schema_registry": "converters.schema_registry",
    "api.converters": "converters",
    "connectors.postgres_cdc.unwrap": "transforms.unwrap",
}
_OLD_TRANSFORMS = "api.builtin_transforms"
_RELOCATED_API_NAMES = {
    **dict.fromkeys(
        ("BooleanConverter", "ByteArrayConverter", "DoubleConverter", "FloatConverter", "IntegerConverter",
         "JsonConverter", "LongConverter", "ShortConverter", "StringConverter"),
        "converters",
    ),
    **dict.fromkeys(
        ("Filter", "HasHeaderKey", "InsertField", "InsertFieldKey", "RecordIsTombstone", "ReplaceField",
         "ReplaceFieldKey", "TopicNameMatches"),
        "transforms",
    ),
}  # fmt: skip


def _relocated(path: str) -> str:
    """`path` with a module of `_RELOCATED_MODULES`, `_OLD_TRANSFORMS` or a class `eosconnect.api` no
    longer exports replaced by where the class is defined now."""
    for separator in (".", ":"):
        if path.startswith(f"eosconnect.{_OLD_TRANSFORMS}{separator}"):
            return f"eosconnect.transforms.{path.replace(':', '.').rsplit('.', 1)[1]}"
        for old, new in _RELOCATED_MODULES.items():
            if path.startswith(f"eosconnect.{old}{separator}"):
                return f"eosconnect.{new}{separator}{path[len(old) + 12 :]}"
        name = path.removeprefix(f"eosconnect.api{separator}")
        if name != path and name in _RELOCATED_API_NAMES:
            return f"eosconnect.{_RELOCATED_API_NAMES[name]}{separator}{name}"
    return path


def import_class(path: str) -> type:
    """Import a class from `package.module.ClassName`, `package.module:ClassName`, or a nested
    `package.module.Outer.Inner`.

    Raises `ImportError` with a readable reason. A module that exists but fails to import (a
    missing dependency of *it*, a syntax error) is reported as such, not as "not found", since
    that is the one thing the operator needs to know.
    """
    path = _relocated(path.strip())
    if ":" in path:
        module_name, _, qualname = path.partition(":")
        candidates = [(module_name, qualname)]
    else:
        parts = path.split(".")
        candidates = [(".".join(parts[:i]), ".".join(parts[i:])) for i in range(len(parts) - 1, 0, -1)]
    if not candidates or not all(candidates[0]):
        raise ImportError(f"{path!r} is not a Python class path of the form package.module.ClassName")
    hint = _java_hint(path)
    try:
        check_plugin_location(candidates[0][0].split(".", 1)[0])
    except ImportError as exc:
        raise ImportError(f"{exc}{hint}") from None
    missing_module = candidates[-1][0]
    for module_name, qualname in candidates:
        try:
            module = _import_module(module_name)
        except ModuleNotFoundError as exc:
            missing = exc.name or ""
            if missing == module_name or module_name.startswith(missing + "."):
                missing_module = missing
                continue  # this prefix is not a module: try a shorter one
            raise ImportError(f"module {module_name!r} was found but failed to import: {exc}") from exc
        except Exception as exc:
            raise ImportError(f"module {module_name!r} was found but failed to import: {exc!r}") from exc
        obj: Any = module
        for depth, attr in enumerate(qualname.split(".")):
            obj = getattr(obj, attr, None)
            if obj is None:
                if depth == 0 and missing_module.startswith(module_name + "."):
                    raise ImportError(f"no module named {missing_module!r}{hint}")
                raise ImportError(f"module {module_name!r} has no attribute {qualname!r}{hint}")
        if not isinstance(obj, type):
            raise ImportError(f"{path!r} is a {type(obj).__name__}, not a class")
        return obj
    raise ImportError(f"no module named {missing_module!r}{hint}")


@functools.lru_cache(maxsize=256)
def plugin_version(class_name: str | None, requirement: str | None = None) -> str | None:
    """`version()` of the connector or task class `class_name` names, in the version `requirement`
    (`connector.plugin.version`) chooses (KIP-891's status `version`); None when it cannot be
    loaded or instantiated."""
    if not class_name:
        return None
    try:
        target = class_name.strip()
        try:  # a connector: the version `requirement` chooses, else the newest installed
            cls: type = resolve_connector_class(target, requirement)
        except ConfigException:
            if requirement:
                return None
            # a task class: the copy its module names is the one its connector chose
            cls = import_class(target)
        version = cls().version()
    except Exception:
        return None
    return str(version) if version is not None else None


PLUGIN_PATH_ENV = "EOSCONNECT_PLUGIN_PATH"
"""`plugin.path` as the worker configured it, inherited by its Spark Python workers (os.pathsep list)."""


def configure_plugin_path(directories: Iterable[str]) -> None:
    """Make `plugin.path` the place user plugins load from: importable here and, through the
    environment, in Spark's Python workers started after this call (local mode).

    Here the entries go to the front of `sys.path`, in `plugin.path` order, so a plugin wins over an
    installed module of the same name, as it does in the Python workers (PYTHONPATH comes before
    site-packages there).
    """
    dirs = [str(Path(d).expanduser().resolve()) for d in directories if str(d).strip()]
    os.environ[PLUGIN_PATH_ENV] = os.pathsep.join(dirs)
    python_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*python_path, *dirs]))
    for d in reversed(dirs):
        if d not in sys.path:
            sys.path.insert(0, d)


def plugin_path_connectors() -> dict[str, str]:
    """Every connector class defined on the worker's plugin.path, `module.Class` -> `module.Class`,
    found as Kafka Connect finds them: by importing the plugins' modules (for `plugins list` and
    `GET /connector-plugins`). A module that fails to import is logged and skipped."""
    return dict(_scan_plugin_path(os.environ.get(PLUGIN_PATH_ENV, "")))


@functools.lru_cache(maxsize=4)
def _scan_plugin_path(plugin_path: str) -> tuple[tuple[str, str], ...]:
    """Cached per plugin.path: modules stay imported, a change takes effect after a restart anyway."""
    found: dict[str, str] = {}
    for entry in (Path(p) for p in plugin_path.split(os.pathsep) if p):
        for name in sorted(_top_level_modules(entry)):
            for module in _modules_of(name):
                for cls in vars(module).values():
                    if (
                        isinstance(cls, type)
                        and issubclass(cls, Connector)
                        and cls.__module__ == module.__name__
                        and not inspect.isabstract(cls)
                    ):
                        path = f"{cls.__module__}.{cls.__qualname__}"
                        found[path] = path
    return tuple(sorted(found.items()))


def _top_level_modules(entry: Path) -> set[str]:
    """What a `sys.path` entry makes importable at its top: `x.py`, packages `x/__init__.py`, in a
    directory or in a .zip/.whl/.egg file."""
    if entry.is_dir():
        names = [p.name for p in entry.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()]
    elif entry.is_file() and zipfile.is_zipfile(entry):
        with zipfile.ZipFile(entry) as archive:
            names = [
                n.split("/", 1)[0]
                for n in archive.namelist()
                if (n.count("/") == 0 and n.endswith(".py"))
                or (n.count("/") == 1 and n.endswith("/__init__.py"))
            ]
    else:
        return set()
    return {n.removesuffix(".py") for n in names if n.removesuffix(".py").isidentifier()}


def _modules_of(name: str) -> list[Any]:
    """The module `name` and, for a package, its submodules; import errors are logged."""
    try:
        check_plugin_location(name)
        module = _import_module(name)
    except Exception as exc:
        log.warning("plugin.path: module %r cannot be imported, its connectors are not listed: %s", name, exc)
        return []
    modules = [module]
    for info in pkgutil.walk_packages(getattr(module, "__path__", []), prefix=f"{name}."):
        try:
            modules.append(_import_module(info.name))
        except Exception as exc:
            log.warning("plugin.path: module %r could not be imported: %s", info.name, exc)
    return modules


def _allowed_roots() -> list[Path]:
    roots = [Path(__file__).resolve().parent.parent]  # the eosconnect package
    for variable in (PLUGIN_PATH_ENV, "PYTHONPATH"):
        roots += [Path(p).resolve() for p in os.environ.get(variable, "").split(os.pathsep) if p]
    return roots


def _entry_point_modules() -> set[str]:
    return {ep.value.split(":", 1)[0].split(".", 1)[0] for ep in connector_entry_points()}


def check_plugin_location(top_level: str) -> None:
    """Refuse to import a module that is not a plugin: classes named in configs and REST requests
    load only from eosconnect's built-ins, installed packages that publish eosconnect entry points,
    `plugin.path` and PYTHONPATH (Kafka Connect's plugin.path and classpath). Anything else (the
    standard library, arbitrary installed packages) is refused *before* it is imported, so a request
    naming `this.Zen` or `antigravity.X` runs no code. Decided from the module's location only."""
    if top_level in ("eosconnect", COPIES_PACKAGE) or top_level in _entry_point_modules():
        return  # COPIES_PACKAGE: plugin.path's copies, by version (plugins/versions.py)
    try:
        spec = importlib.util.find_spec(top_level)
    except (ImportError, ValueError):
        return  # not importable at all: the import itself reports it
    if spec is None:
        return
    locations = [spec.origin] if spec.origin and spec.origin not in ("built-in", "frozen") else []
    locations += list(spec.submodule_search_locations or [])
    if not locations:
        raise ImportError(f"module {top_level!r} is built into Python, not a plugin")
    roots = _allowed_roots()
    for location in locations:
        path = Path(location).resolve()
        if any(path.is_relative_to(root) for root in roots):
            return
    raise ImportError(
        f"module {top_level!r} ({locations[0]}) is not a plugin: classes load only from eosconnect's "
        "built-ins, installed packages' eosconnect entry points, the worker's plugin.path and PYTHONPATH. "
        "Put the plugin's directory on plugin.path"
    )


def _java_hint(path: str) -> str:
    if path.startswith(("org.apache.kafka.", "io.confluent.", "io.debezium.")) or "$" in path:
        return " (it looks like a Java class name; eosconnect loads Python classes only)"
    return ""


def register_connector(short_name: str, cls_or_path: type | str, *, replace: bool = False) -> None:
    """Make `short_name` usable as `connector.class` in this process (e.g. from a package's import
    or a test). A dotted path is imported lazily, on first use."""
    if not short_name or "." in short_name or ":" in short_name or short_name != short_name.strip():
        raise ValueError(f"short connector name {short_name!r} must be non-empty and contain no '.' or ':'")
    current = _registered.get(short_name)
    if current is not None and current != cls_or_path and not replace:
        raise ValueError(
            f"connector short name {short_name!r} is already registered for {_describe(current)}; "
            "pass replace=True to override it"
        )
    _registered[short_name] = cls_or_path


def unregister_connector(short_name: str) -> None:
    _registered.pop(short_name, None)


def connector_entry_points() -> Iterable[importlib.metadata.EntryPoint]:
    """The installed `eosconnect.connectors` entry points (a seam for tests)."""
    return importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)


def available_connectors() -> dict[str, str]:
    """Every short name and what it points to, without importing anything (for REST and errors)."""
    names: dict[str, str] = {ep.name: ep.value for ep in connector_entry_points()}
    names.update(BUILTIN_CONNECTORS)
    names.update({name: _describe(target) for name, target in _registered.items()})
    return dict(sorted(names.items()))


def resolve_connector_class(name: str | type, version: str | None = None) -> type[Connector]:
    """The connector class for a `connector.class` value, in the version `version` (the value of
    `connector.plugin.version`: a version or Maven range, plugins/versions.py) chooses, the newest
    installed without it; raises
    `ConfigException` (a `ConnectorClassNotFound` when nothing matches) naming the setting and the
    way to fix it."""
    cls = _resolve_connector_class(name)
    label = name if isinstance(name, str) else f"{name.__module__}.{name.__qualname__}"
    return _check_connector(select_version(cls, version, VERSION_SETTING, label.strip()), label)


def connector_class_of(config: Any) -> type[Connector]:
    """The connector class a connector config names, in the version it chooses."""
    return resolve_connector_class(str(config.get(SETTING) or ""), config.get(VERSION_SETTING))


def _resolve_connector_class(name: str | type) -> type[Connector]:
    if isinstance(name, type):
        return _check_connector(name, name.__qualname__)
    value = name.strip() if isinstance(name, str) else ""
    if not value:
        raise ConnectorClassNotFound(errors={SETTING: [f"is empty. Set {SETTING} to {_choices()}."]})
    for candidate in _short_name_candidates(value):
        target = _find_short_name(candidate)
        if target is not None:
            return _check_connector(_load_short_name(value, target), value)
    if "." in value or ":" in value:
        try:
            cls = import_class(value)
        except ImportError as exc:
            raise ConnectorClassNotFound(
                errors={SETTING: [f"cannot load {value!r}: {exc}. Set {SETTING} to {_choices()}."]}
            ) from exc
        return _check_connector(cls, value)
    raise ConnectorClassNotFound(
        errors={SETTING: [f"no connector is named {value!r}. Set {SETTING} to {_choices()}."]}
    )


def _short_name_candidates(value: str) -> list[str]:
    if value.endswith("Connector") and len(value) > len("Connector"):
        return [value, value.removesuffix("Connector")]
    return [value, value + "Connector"]


def _find_short_name(name: str) -> type | str | importlib.metadata.EntryPoint | None:
    if name in _registered:
        return _registered[name]
    if name in BUILTIN_CONNECTORS:
        return BUILTIN_CONNECTORS[name]
    for ep in connector_entry_points():
        if ep.name == name:
            return ep
    return None


def _load_short_name(value: str, target: type | str | importlib.metadata.EntryPoint) -> type:
    if isinstance(target, type):
        return target
    try:
        if isinstance(target, str):
            loaded = import_class(target)
        else:
            with _IMPORT_LOCK:
                loaded = target.load()
    except Exception as exc:
        raise ConfigException(
            errors={
                SETTING: [
                    f"{value!r} refers to {_describe(target)}, which could not be loaded: {exc}. Check that "
                    "the package providing it is installed on the worker and its executors."
                ]
            }
        ) from exc
    if not isinstance(loaded, type):
        raise ConfigException(
            errors={SETTING: [f"{value!r} refers to {_describe(target)}, which is not a class."]}
        )
    return loaded


def _check_connector(cls: type, value: str) -> type[Connector]:
    if not issubclass(cls, Connector):
        raise ConfigException(
            errors={
                SETTING: [
                    f"{value!r} is not a connector: the class must subclass eosconnect.api.SourceConnector "
                    f"or eosconnect.api.SinkConnector. Set {SETTING} to {_choices()}."
                ]
            }
        )
    return cls


def _describe(target: object) -> str:
    if isinstance(target, type):
        return f"{target.__module__}.{target.__qualname__}"
    if isinstance(target, importlib.metadata.EntryPoint):
        return target.value
    return str(target)


def _choices() -> str:
    names = list(available_connectors())
    listed = ", ".join(names) if names else "none are installed"
    return (
        f"a connector short name (available: {listed}) or a fully qualified Python class path such as "
        "mypackage.connectors.MySourceConnector"
    )
