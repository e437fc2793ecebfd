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

__all__ = [
    "DEFAULT_VENV_DIR",
    "Installed",
    "command_of",
    "install_package",
    "installed_sources",
    "resolve_executable",
]

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
    """Airbyte sources and Singer taps in the venv directory and the worker's environment, from
    the names of their `.dist-info` directories (`<name>-<version>.dist-info`): nothing is run or
    imported, so listing stays cheap however many packages an environment holds."""
    places: list[tuple[Path, Path]] = []
    root = Path(venv_dir).expanduser()
    if root.is_dir():
        for venv in sorted(root.iterdir()):
            places += [(site, venv / "bin") for site in sorted(venv.glob("lib/python*/site-packages"))]
    bindir = Path(sys.executable).parent
    places += [(Path(p), bindir) for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    found: dict[tuple[str, str], Installed] = {}
    for site, bin_path in places:
        for pattern in ("airbyte_source_*.dist-info", "tap_*.dist-info", "pipelinewise_tap_*.dist-info"):
            for info in site.glob(pattern):
                name, _, version = info.name[: -len(".dist-info")].partition("-")
                package = name.lower().replace("_", "-")
                protocol = _protocol(package)
                if protocol is not None:
                    executable = str(bin_path / command_of(package))
                    found.setdefault((package, executable), Installed(protocol, package, version, executable))
    return sorted(found.values(), key=lambda i: (i.protocol, i.package, i.executable))


def _protocol(name: str) -> str | None:
    if name.startswith("airbyte-source-"):
        return "airbyte"
    if name.startswith(("tap-", "pipelinewise-tap-")):
        return "singer"
    return None


def install_package(requirement: str, venv_dir: str = DEFAULT_VENV_DIR) -> str:
    """Install `requirement` (`airbyte-source-faker` or `airbyte-source-faker==7.2.1`) into a venv
    of its own, `<venv_dir>/<package>`, once, and return its program's path. Concurrent callers
    (test workers, two workers on one host) wait for one another on a lock file; a finished venv
    is marked, so a half-made one (an interrupted install) is made again."""
    import fcntl
    import re
    import subprocess

    package = re.split(r"[<>=!~\[ ;]", requirement.strip(), maxsplit=1)[0].lower()
    if not package:
        raise ConfigException.for_field("package", f"{requirement!r} names no package")
    venv = Path(venv_dir).expanduser() / package
    venv.parent.mkdir(parents=True, exist_ok=True)
    marker = venv / ".eosconnect-installed"
    with open(venv.parent / f".{package}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (marker.is_file() and marker.read_text() == requirement):
            if venv.exists():
                shutil.rmtree(venv)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            subprocess.run(
                [str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", requirement],
                check=True,
            )
            marker.write_text(requirement)
    return resolve_executable(package, venv_dir, "package")
