"""Which program runs a hosted source: `airbyte.source` / `singer.tap` name an executable (a path,
or a command on PATH) or a package installed in a virtual environment of its own.

Sources pin their dependencies tightly (airbyte-cdk's clash with the worker's), so each may live
in a venv under a directory of venvs, one per package: `<venv.dir>/<package>/bin/<command>`. A
package name resolves there first, then in the worker's own environment, then on PATH. The
command of `airbyte-source-x` is `source-x`; a Singer package's command is its name without a
`pipelinewise-` prefix (`pipelinewise-tap-postgres` -> `tap-postgres`).
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from eosconnect.api.errors import ConfigException

__all__ = ["DEFAULT_VENV_DIR", "Installed", "command_of", "installed_sources", "resolve_executable"]

DEFAULT_VENV_DIR = str(Path("~/.cache/eosconnect/hosted").expanduser())


def command_of(package: str) -> str:
    if package.startswith("airbyte-source-"):
        return package[len("airbyte-") :]
    if package.startswith("pipelinewise-tap-"):
        return package[len("pipelinewise-") :]
    return package


def resolve_executable(name: str, venv_dir: str, setting: str) -> str:
    """The absolute path of the program `name` designates; a `ConfigException` on `setting` saying
    where it was looked for."""
    name = name.strip()
    if not name:
        raise ConfigException.for_field(setting, "name an executable or an installed package")
    if os.sep in name:
        path = Path(name).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
        raise ConfigException.for_field(setting, f"{path} is not an executable file")
    command = command_of(name)
    candidates = [
        Path(venv_dir).expanduser() / name / "bin" / command,
        Path(sys.executable).parent / command,
    ]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(command) or shutil.which(name)
    if found:
        return found
    raise ConfigException.for_field(
        setting,
        f"no program {command!r} found in {candidates[0].parent}, the worker's environment or PATH; "
        f"install it with `python -m venv {candidates[0].parent.parent} && "
        f"{candidates[0].parent}/pip install {name}` (or give the executable's path)",
    )


@dataclass(frozen=True)
class Installed:
    """A hosted source package found installed: its protocol, package, version and command."""

    protocol: str
    package: str
    version: str
    executable: str


def installed_sources(venv_dir: str) -> list[Installed]:
    """Airbyte sources and Singer taps in the venv directory and the worker's environment, read
    from their installed metadata (nothing is run)."""
    import importlib.metadata

    found: dict[tuple[str, str], Installed] = {}
    roots = [Path(venv_dir).expanduser()]
    paths: list[tuple[list[str], Path]] = []
    for root in roots:
        if root.is_dir():
            for venv in sorted(root.iterdir()):
                for site in sorted(venv.glob("lib/python*/site-packages")):
                    paths.append(([str(site)], venv / "bin"))
    paths.append((sys.path, Path(sys.executable).parent))
    for search, bindir in paths:
        for dist in importlib.metadata.distributions(path=search):
            name = (dist.metadata["Name"] or "").lower()
            protocol = _protocol(name)
            if protocol is None:
                continue
            executable = bindir / command_of(name)
            key = (name, str(bindir))
            if key not in found:
                found[key] = Installed(protocol, name, dist.version, str(executable))
    return sorted(found.values(), key=lambda i: (i.protocol, i.package, i.executable))


def _protocol(name: str) -> str | None:
    if name.startswith("airbyte-source-"):
        return "airbyte"
    if name.startswith(("tap-", "pipelinewise-tap-")):
        return "singer"
    return None
