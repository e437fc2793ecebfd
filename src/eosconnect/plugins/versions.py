"""Several versions of one plugin side by side, chosen per connector (Kafka's KIP-891).

A plugin's version is what its `version()` answers. Two `plugin.path` entries may hold the same
module and class (`/opt/plugins/acme-1.2/acme/source.py` and `/opt/plugins/acme-2.0/acme/source.py`,
both on plugin.path): Python imports `acme` once, from the first entry, so each entry's copy is also
importable on its own under a name of its own, `eosconnect_plugin_copies.<entry key>.acme.source`
(`CopyFinder`, installed on `sys.meta_path` by importing this module). Inside such a copy, the
package's relative imports (`from . import util`) stay in the copy; an absolute import of its own
package (`import acme.util`) reaches the first entry's, so versioned plugins import their own
modules relatively.

The copies' names are derived from the plugin.path entry itself, so the Spark Python workers,
which inherit plugin.path (`EOSCONNECT_PLUGIN_PATH`), import the same copy from the name a task
config carries (its `task.class`).

A setting `connector.plugin.version`, `key.converter.plugin.version`,
`value.converter.plugin.version`, `header.converter.plugin.version` or
`transforms.<alias>.plugin.version` holds a Maven version range, as in Kafka: `2.0` (that version),
`[1.0,2.0)`, `(,1.5]`, `[2.0,)`, `[1.0],[1.2,1.4]`. The newest installed version in the range is
loaded; a range no installed version is in is refused naming the versions installed. Without the
setting the newest installed version loads, as Kafka loads it (`select_version`), so which copy runs
does not depend on the order of plugin.path.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from eosconnect.api.errors import ConfigException

__all__ = [
    "COPIES_PACKAGE",
    "VERSION_SUFFIX",
    "CopyFinder",
    "VersionRange",
    "compare_versions",
    "installed_versions",
    "plugin_class_version",
    "select_version",
]

COPIES_PACKAGE = "eosconnect_plugin_copies"
#: `<setting>.plugin.version` names the version of the plugin `<setting>` names (Kafka's suffix).
VERSION_SUFFIX = ".plugin.version"
_PLUGIN_PATH_ENV = "EOSCONNECT_PLUGIN_PATH"


# ------------------------------------------------------------------------------------ versions
def _tokens(version: str) -> list[tuple[int, int | str]]:
    """Maven-like ordering: numbers numerically, `1.0 == 1`, a qualifier (`-SNAPSHOT`, `-rc1`)
    before the release it qualifies, qualifiers alphabetically among themselves."""
    parts = [p for p in re.split(r"[.\-_+]|(?<=\d)(?=[a-zA-Z])|(?<=[a-zA-Z])(?=\d)", version.strip()) if p]
    tokens: list[tuple[int, int | str]] = []
    for part in parts:
        if part.isdigit():
            tokens.append((1, int(part)))
        elif part.lower() in ("final", "ga", "release"):
            continue
        else:
            tokens.append((0, part.lower()))
    # `1.0 == 1` and `1.0-rc1 == 1-rc1`: zeros ending a run of numbers say nothing
    normal: list[tuple[int, int | str]] = []
    for token in [*tokens, (0, "")]:
        if token[0] == 0:
            while normal and normal[-1] == (1, 0):
                normal.pop()
        normal.append(token)
    return normal[:-1]


def compare_versions(a: str, b: str) -> int:
    """-1, 0 or 1 as version `a` is older than, the same as or newer than `b`."""
    ta, tb = _tokens(a), _tokens(b)
    for x, y in zip(ta, tb, strict=False):
        if x != y:
            if x[0] != y[0]:  # a number is newer than a qualifier at the same place
                return 1 if x[0] > y[0] else -1
            return 1 if x[1] > y[1] else -1  # type: ignore[operator]
    if len(ta) == len(tb):
        return 0
    longer, sign = (ta, 1) if len(ta) > len(tb) else (tb, -1)
    # `1.0.1` is newer than `1.0`; `1.0-rc1` is older than `1.0`
    return sign if longer[min(len(ta), len(tb))][0] == 1 else -sign


@dataclass(frozen=True)
class _Interval:
    low: str | None
    low_inclusive: bool
    high: str | None
    high_inclusive: bool

    def contains(self, version: str) -> bool:
        if self.low is not None:
            c = compare_versions(version, self.low)
            if c < 0 or (c == 0 and not self.low_inclusive):
                return False
        if self.high is not None:
            c = compare_versions(version, self.high)
            if c > 0 or (c == 0 and not self.high_inclusive):
                return False
        return True


@dataclass(frozen=True)
class VersionRange:
    """A Maven version range (`[1.0,2.0)`, `(,1.5]`, `[1.0],[1.2,)`) or one version (`2.0`)."""

    spec: str
    intervals: tuple[_Interval, ...]

    @classmethod
    def parse(cls, spec: str, setting: str) -> VersionRange:
        text = spec.strip()
        if not text:
            raise ConfigException(errors={setting: ["is empty: remove it or set a version or a range"]})
        if text[0] not in "[(":
            if any(c in text for c in "[](),"):
                raise cls._bad(spec, setting)
            return cls(spec, (_Interval(text, True, text, True),))
        intervals = []
        for match in re.finditer(r"\s*([\[(])([^\])]*)([\])])\s*(,|$)", text):
            opening, body, closing = match.group(1), match.group(2), match.group(3)
            bounds = [b.strip() or None for b in body.split(",")]
            if len(bounds) == 1:
                if opening != "[" or closing != "]" or bounds[0] is None:
                    raise cls._bad(spec, setting)
                intervals.append(_Interval(bounds[0], True, bounds[0], True))
            elif len(bounds) == 2:
                low, high = bounds
                if low is not None and high is not None and compare_versions(low, high) > 0:
                    raise cls._bad(spec, setting)
                intervals.append(_Interval(low, opening == "[", high, closing == "]"))
            else:
                raise cls._bad(spec, setting)
        consumed = "".join(m.group(0) for m in re.finditer(r"\s*([\[(])([^\])]*)([\])])\s*(,|$)", text))
        if not intervals or consumed.replace(" ", "") != text.replace(" ", ""):
            raise cls._bad(spec, setting)
        return cls(spec, tuple(intervals))

    @staticmethod
    def _bad(spec: str, setting: str) -> ConfigException:
        return ConfigException(
            errors={
                setting: [
                    f"{spec!r} is not a version or a Maven version range: write 2.0, [1.0,2.0), (,1.5], "
                    "[2.0,) or [1.0],[1.2,)"
                ]
            }
        )

    def contains(self, version: str) -> bool:
        return any(i.contains(version) for i in self.intervals)


# ------------------------------------------------------------------------------ isolated copies
def entry_key(entry: str | Path) -> str:
    """The name part a plugin.path entry's copies are imported under (stable across processes)."""
    resolved = str(Path(entry).expanduser().resolve())
    return "p" + hashlib.sha256(resolved.encode()).hexdigest()[:12]


def _plugin_path() -> list[str]:
    return [p for p in os.environ.get(_PLUGIN_PATH_ENV, "").split(os.pathsep) if p]


class _EmptyPackage(importlib.abc.Loader):
    """A package with no code of its own: `COPIES_PACKAGE` and one per plugin.path entry."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        return None


class CopyFinder(importlib.abc.MetaPathFinder):
    """Finds `eosconnect_plugin_copies` and `eosconnect_plugin_copies.<entry key>`, the latter a
    package whose `__path__` is that plugin.path entry: Python's own path finder then imports the
    entry's modules beneath it, each a copy of its own."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        parts = fullname.split(".")
        if parts[0] != COPIES_PACKAGE or len(parts) > 2:
            return None
        locations: list[str] = []
        if len(parts) == 2:
            entry = next((e for e in _plugin_path() if entry_key(e) == parts[1]), None)
            if entry is None:
                return None
            locations = [str(Path(entry).resolve())]
        spec = importlib.machinery.ModuleSpec(fullname, _EmptyPackage(), is_package=True)
        spec.submodule_search_locations = locations
        return spec


if not any(isinstance(f, CopyFinder) for f in sys.meta_path):
    sys.meta_path.append(CopyFinder())


def _defines(entry: str, module: str) -> bool:
    base = Path(entry).joinpath(*module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _version_of(cls: type) -> str | None:
    """`version()` of an instance of `cls`; for a converter, transformation or predicate without
    one, its module's `__version__` (as a connector's default `version()` answers)."""
    try:
        instance = cls()
        method = getattr(instance, "version", None)
        version = (
            method() if callable(method) else getattr(sys.modules.get(cls.__module__), "__version__", None)
        )
    except Exception:
        return None
    return str(version) if version is not None else None


def plugin_class_version(cls: type) -> str | None:
    """The version of plugin class `cls` (None when it cannot be instantiated or has none)."""
    return _version_of(cls)


@functools.lru_cache(maxsize=256)
def _copies(class_path: str, plugin_path: str) -> tuple[tuple[str, type], ...]:
    """(version, class) of each plugin.path entry's copy of `module.Class`, in plugin.path order."""
    module, _, name = class_path.replace(":", ".").rpartition(".")
    if not module or module.startswith(COPIES_PACKAGE + "."):
        return ()
    found: list[tuple[str, type]] = []
    for entry in plugin_path.split(os.pathsep):
        if not entry or not _defines(entry, module):
            continue
        try:
            loaded: Any = importlib.import_module(f"{COPIES_PACKAGE}.{entry_key(entry)}.{module}")
        except Exception:
            continue  # plugin.path's scan logs modules that fail to import
        cls = getattr(loaded, name, None)
        if isinstance(cls, type) and (version := _version_of(cls)) is not None:
            found.append((version, cls))
    return tuple(found)


def installed_versions(default: type, class_path: str | None = None) -> dict[str, type]:
    """Every installed version of the plugin `default` is (the class as it loads without a version),
    version -> class: `default` itself and the copies plugin.path holds of its `module.Class`."""
    path = class_path or f"{default.__module__}.{default.__qualname__}"
    versions: dict[str, type] = {}
    default_version = _version_of(default)
    if default_version is not None:
        versions[default_version] = default
    for version, cls in _copies(path, os.pathsep.join(_plugin_path())):
        versions.setdefault(version, cls)
    return versions


def select_version(default: type, requirement: str | None, setting: str, class_name: str) -> type:
    """The class of the newest installed version of `default`'s plugin in `requirement` (a version
    or Maven range, the value of `setting`); without a requirement, the newest installed version
    (Kafka's default), which is `default` itself when plugin.path holds no other copy of it."""
    if requirement is None or not str(requirement).strip():
        path = f"{default.__module__}.{default.__qualname__}"
        if not _copies(path, os.pathsep.join(_plugin_path())):
            return default  # the common case: one copy, nothing to choose (and nothing instantiated)
        installed = installed_versions(default)
        if not installed:
            return default
        return installed[max(installed, key=functools.cmp_to_key(compare_versions))]
    wanted = VersionRange.parse(str(requirement), setting)
    versions = installed_versions(default)
    matching = [v for v in versions if wanted.contains(v)]
    if not matching:
        installed_list = ", ".join(sorted(versions, key=functools.cmp_to_key(compare_versions))) or "none"
        raise ConfigException(
            errors={
                setting: [
                    f"no installed version of {class_name} is in {requirement!r}; installed: "
                    f"{installed_list}. Set {setting} to one of them (or a range holding one), or "
                    "remove it to load the newest"
                ]
            }
        )
    newest = max(matching, key=functools.cmp_to_key(compare_versions))
    return versions[newest]
