"""What executors on other machines need to run tasks: the worker's Python environment and plugin code.

In `local[...]` mode executors are threads of the driver's JVM whose Python workers run the driver's
interpreter, so nothing ships. On a cluster they are other machines that see neither the driver's
virtualenv nor its checkout (docs/architecture.md). Unless the user provides the executors' Python
themselves (`spark.archives`, `spark.pyspark.python`, or a container image), the worker packs its own
environment once into a tar.gz, cached by content under `<cache>/shipped-env/<digest>/`, and hands it to
Spark through `spark.archives` (`<archive>#eosconnect-env`); executors unpack it into their working
directory and run `./eosconnect-env/bin/python`.

The pack is made here rather than with venv-pack because venv-pack refuses editable installs, the
normal development set-up: eosconnect's own package is copied from wherever it is imported from.
Left out: Spark's jars (every executor has a Spark install of its own: its `SPARK_HOME` also puts
its `pyspark.zip` first on the Python workers' path), pip/setuptools, test tools and the worker's
byte-code caches. Byte code is compiled afresh for what every Python worker imports at start (the
daemon's imports, see `cluster/spark_daemon.py`): a new executor starts from a freshly unpacked
environment and would otherwise compile those ~2 MB of sources in each daemon (1.2 s of CPU here),
exactly when a failover or a replacement is waiting for its tasks. Like venv-pack's archives, the
pack links to the base interpreter it was made with (`pyvenv.cfg` `home`): executors need the same
Python at the same path, or use an image.

Connector code on the worker's `plugin.path` ships as zip files added with `addPyFile`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import logging
import os
import py_compile
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from importlib.util import cache_from_source
from pathlib import Path

from eosconnect.plugins.loading import PLUGIN_PATH_ENV

log = logging.getLogger(__name__)

ARCHIVE_ALIAS = "eosconnect-env"
#: Top-level entries of site-packages not shipped: tools, not runtime dependencies, and pyarrow, which
#: only Spark's DataFrame data sources use (`eosconnect.spark`, in a user's own Spark application, not
#: in the worker's tasks). It is 170 MB of the ~250 MB, so leaving it out makes every new executor
#: (a first start, a replacement, a failover) fetch and unpack about a third of the bytes.
EXCLUDED_TOP_LEVEL = (
    "pyarrow",
    "pip",
    "setuptools",
    "_pytest",
    "pytest",
    "ruff",
    "py",
    "pluggy",
    "wheel",
)
#: Paths inside site-packages never shipped: the executors' Spark install has its own jars.
EXCLUDED_PATHS = ("pyspark/jars", "pyspark/examples", "pyspark/data")
#: Settings with which the user says how executors get their Python; any of them turns shipping off.
USER_PROVIDED_PYTHON = (
    "spark.archives",
    "spark.pyspark.python",
    "spark.kubernetes.container.image",
    "spark.kubernetes.executor.container.image",
)


class ShippingError(RuntimeError):
    """The worker's environment cannot be packed; the message says what to set instead."""


def is_local_master(master: str) -> bool:
    """`local`, `local[N]`, `local[N,F]`, `local-cluster[...]` run executors on this machine."""
    return master.strip().startswith("local")


@dataclass(frozen=True)
class PackedEnvironment:
    archive: Path
    size_bytes: int
    digest: str

    @property
    def spark_archive(self) -> str:
        return f"{self.archive}#{ARCHIVE_ALIAS}"

    @property
    def executor_python(self) -> str:
        return f"./{ARCHIVE_ALIAS}/bin/python"


def _site_packages() -> Path:
    for entry in sys.path:
        if entry.startswith(sys.prefix) and entry.endswith("site-packages") and Path(entry).is_dir():
            return Path(entry)
    raise ShippingError(f"no site-packages directory under {sys.prefix}")


def _excluded(relative: Path) -> bool:
    parts = relative.parts
    if not parts or "__pycache__" in parts:
        return True
    top = parts[0]
    name = top.split("-")[0].removesuffix(".pth").lower()
    if name in EXCLUDED_TOP_LEVEL or top.startswith(("__editable__", "_eosconnect")) or top == "eosconnect":
        return True  # eosconnect's own package is added from where it is imported (maybe a checkout)
    text = relative.as_posix()
    return any(text == p or text.startswith(p + "/") for p in EXCLUDED_PATHS)


def _eosconnect_package() -> Path:
    import eosconnect

    return Path(eosconnect.__file__).resolve().parent


#: Bumped when what goes into the archive changes, so that archives packed the old way are not reused.
PACK_FORMAT = 2


def _fingerprint(site: Path) -> str:
    """Changes when an installed distribution or any file of eosconnect's own package changes."""
    digest = hashlib.sha256(f"{sys.version}|{sys.prefix}|{PACK_FORMAT}".encode())
    dists = sorted(f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions(path=[str(site)]))
    digest.update("\n".join(dists).encode())
    package = _eosconnect_package()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:20]


def pack_environment(cache_dir: Path) -> PackedEnvironment:
    """The worker's environment as a tar.gz for `spark.archives`, made once per content."""
    if sys.prefix == sys.base_prefix:
        raise ShippingError(
            f"the worker runs in no virtualenv ({sys.executable}), so it cannot ship its Python to the "
            "executors: run it from a virtualenv, or set spark.archives and spark.pyspark.python (or "
            "spark.kubernetes.container.image) so that executors have eosconnect installed"
        )
    site = _site_packages()
    digest = _fingerprint(site)
    root = cache_dir / "shipped-env"
    target_dir = root / digest
    archive = target_dir / f"{ARCHIVE_ALIAS}.tar.gz"
    while True:
        target_dir.mkdir(parents=True, exist_ok=True)
        with (target_dir / ".lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # workers started together pack once
            if not target_dir.is_dir():
                continue  # pruned by another worker while we waited for the lock: make it again
            if not archive.exists():
                partial = archive.with_suffix(".partial")
                _write_archive(partial, site)
                partial.rename(archive)
                log.info(
                    "packed the worker's Python environment into %s (%d bytes)",
                    archive,
                    archive.stat().st_size,
                )
            _hold_in_use(target_dir)
            break
    for removed in prune_packed_environments(root, keep=digest):
        log.info("removed an environment packed for another version, unused: %s", removed)
    return PackedEnvironment(archive, archive.stat().st_size, digest)


#: Besides the environment in use, how many other packed environments (the newest) are kept, so that
#: going back one version does not pack again.
KEEP_OTHER_ENVIRONMENTS = 1
#: Shared locks on the `in-use` files of the environments this process serves, held for its life
#: (Spark serves the archive from its path for the application's life); the OS drops them on exit.
_IN_USE: list[object] = []


def _hold_in_use(target_dir: Path) -> None:
    holder = (target_dir / "in-use").open("a")
    fcntl.flock(holder, fcntl.LOCK_SH)
    os.utime(target_dir / "in-use")  # "newest" means most recently used
    _IN_USE.append(holder)


def _last_used(directory: Path) -> float:
    marker = directory / "in-use"
    return (marker if marker.exists() else directory).stat().st_mtime


def prune_packed_environments(root: Path, keep: str) -> list[Path]:
    """Remove packed environments that no running worker uses, except `keep` and the
    `KEEP_OTHER_ENVIRONMENTS` most recently used others. A worker holds a shared lock on its
    environment's `in-use` file while it runs; an environment whose lock can be taken exclusively
    (and whose packing lock is free) is unused. Returns the removed directories."""
    others = sorted(
        (d for d in root.iterdir() if d.is_dir() and d.name != keep),
        key=_last_used,
        reverse=True,
    )
    removed = []
    for directory in others[KEEP_OTHER_ENVIRONMENTS:]:
        with contextlib.ExitStack() as files:
            try:
                packing = files.enter_context((directory / ".lock").open("a"))
                in_use = files.enter_context((directory / "in-use").open("a"))
            except FileNotFoundError:
                continue  # another worker's prune is removing it
            try:
                fcntl.flock(packing, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(in_use, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a worker packs it or serves it
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory)
    return removed


#: The module every executor's Python daemon runs (`spark.python.daemon.module`).
DAEMON_MODULE = "eosconnect.cluster.spark_daemon"


def startup_sources() -> set[Path]:
    """The source files the Python daemon imports (and so every forked worker uses), found by
    importing it in a child interpreter of this environment."""
    program = (
        f"import sys, {DAEMON_MODULE}\n"
        "for module in list(sys.modules.values()):\n"
        "    print(getattr(module, '__file__', None) or '')\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    try:
        listed = subprocess.run(
            [sys.executable, "-c", program], capture_output=True, text=True, check=True, env=env, timeout=120
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:  # the executors then compile on import
        log.warning("shipping no byte code: importing %s failed here: %s", DAEMON_MODULE, exc)
        return set()
    return {Path(line).resolve() for line in listed.splitlines() if line.endswith(".py")}


class _ArchiveWriter:
    """Adds files to the tar.gz, each startup source with its byte code beside it (checked-hash:
    valid whatever the unpacked files' times are)."""

    def __init__(self, tar: tarfile.TarFile, compiled: set[Path], scratch: Path) -> None:
        self.tar = tar
        self.compiled = compiled
        self.scratch = scratch

    def add(self, file: Path, name: str) -> None:
        self.tar.add(file, name, recursive=False)
        if file.suffix != ".py" or file.resolve() not in self.compiled:
            return
        byte_code = self.scratch / "module.pyc"
        try:
            py_compile.compile(
                str(file),
                cfile=str(byte_code),
                dfile=name,
                doraise=True,
                invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
            )
        except py_compile.PyCompileError as exc:  # the executors then compile it themselves
            log.warning("not shipping byte code for %s: %s", file, exc.msg)
            return
        self.tar.add(byte_code, cache_from_source(name), recursive=False)


def _write_archive(path: Path, site: Path) -> None:
    prefix = Path(sys.prefix)
    site_in_env = site.relative_to(prefix)
    with tarfile.open(path, "w:gz", compresslevel=6) as tar, tempfile.TemporaryDirectory() as scratch:
        writer = _ArchiveWriter(tar, startup_sources(), Path(scratch))
        tar.add(prefix / "pyvenv.cfg", "pyvenv.cfg")
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        # CPython's interpreter behind the virtualenv; typeshed does not declare this private attribute
        base_python = sys._base_executable  # type: ignore[attr-defined]
        for name, target in (("python", base_python), ("python3", "python"), (version, "python")):
            info = tarfile.TarInfo(f"bin/{name}")
            info.type, info.linkname = tarfile.SYMTYPE, str(target)
            tar.addfile(info)
        for root, dirs, files in os.walk(site):
            rel_root = Path(root).relative_to(site)
            dirs[:] = [d for d in dirs if not _excluded(rel_root / d)]
            for file in files:
                rel = rel_root / file
                if not _excluded(rel):
                    writer.add(Path(root) / file, (site_in_env / rel).as_posix())
        package = _eosconnect_package()
        for path in sorted(package.rglob("*")):
            rel = path.relative_to(package)
            if path.is_file() and "__pycache__" not in rel.parts:
                writer.add(path, (site_in_env / "eosconnect" / rel).as_posix())


# ---------------------------------------------------------------------------------------- plugins
def plugin_fingerprint(plugin_path: Sequence[str]) -> str:
    """Changes when a file on the plugin path is added, removed or modified (by size and mtime)."""
    digest = hashlib.sha256()
    for entry in plugin_path:
        for file in _plugin_files(Path(entry)):
            stat = file.stat()
            digest.update(f"{file}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:20]


def _plugin_files(entry: Path) -> Iterable[Path]:
    if entry.is_file():
        yield entry
    elif entry.is_dir():
        for file in sorted(entry.rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts:
                yield file


def pack_plugins(plugin_path: Sequence[str], cache_dir: Path) -> list[Path]:
    """Files for `addPyFile`: a directory on the plugin path is zipped (its contents importable, as a
    `sys.path` entry); .zip, .whl and .egg files ship as they are."""
    shipped: list[Path] = []
    for entry in map(Path, plugin_path):
        if entry.is_file() and entry.suffix in (".zip", ".whl", ".egg"):
            shipped.append(entry)
        elif entry.is_dir():
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
                for file in _plugin_files(entry):
                    info = zipfile.ZipInfo(file.relative_to(entry).as_posix(), (1980, 1, 1, 0, 0, 0))
                    zf.writestr(info, file.read_bytes())
            data = buffer.getvalue()
            digest = hashlib.sha256(data).hexdigest()[:16]
            target = cache_dir / "shipped-plugins" / f"{entry.name or 'plugins'}-{digest}.zip"
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                partial = target.with_suffix(".partial")
                partial.write_bytes(data)
                partial.rename(target)
            shipped.append(target)
        else:
            raise ShippingError(
                f"plugin.path entry {str(entry)!r} is neither a directory nor a .zip/.whl/.egg file; "
                "fix the worker's plugin.path"
            )
    return shipped


# ---------------------------------------------------------------------------------------- plan
@dataclass(frozen=True)
class ShippingPlan:
    """What the session gets: extra Spark settings, the executors' interpreter, files for addPyFile."""

    conf: dict[str, str]
    executor_python: str
    py_files: list[Path]
    environment: PackedEnvironment | None

    def describe(self) -> str:
        env = (
            f"environment {self.environment.archive} ({self.environment.size_bytes / 1e6:.1f} MB)"
            if self.environment
            else "no environment (executors' Python is provided)"
        )
        files = [str(p) for p in self.py_files]
        return f"executors run {self.executor_python}; shipping {env}, plugin files {files}"


def plan_shipping(
    master: str, conf: Mapping[str, str], plugin_path: Sequence[str], cache_dir: Path, ship: bool = True
) -> ShippingPlan:
    """Decide how executors get eosconnect and the plugins; user settings always win."""
    plugins = pack_plugins(plugin_path, cache_dir) if plugin_path and not is_local_master(master) else []
    user_python = conf.get("spark.pyspark.python")
    if is_local_master(master):
        return ShippingPlan({}, user_python or os.environ.get("PYSPARK_PYTHON") or sys.executable, [], None)
    shipped = executor_plugin_path(plugins, conf)
    if not ship or any(conf.get(k) for k in USER_PROVIDED_PYTHON):
        return ShippingPlan(
            shipped, user_python or os.environ.get("PYSPARK_PYTHON") or "python3", plugins, None
        )
    env = pack_environment(cache_dir)
    return ShippingPlan(
        {"spark.archives": env.spark_archive, "spark.pyspark.python": env.executor_python, **shipped},
        env.executor_python,
        plugins,
        env,
    )


def executor_plugin_path(plugins: Sequence[Path], conf: Mapping[str, str]) -> dict[str, str]:
    """The executors' plugin.path: the files added with addPyFile (ours and `spark.submit.pyFiles`),
    by name, as Spark puts them in each executor's working directory, the Python workers' current
    directory. Without it the class-loading rule (plugins/loading.py) refuses the shipped plugins there."""
    user_files = [Path(p).name for p in conf.get("spark.submit.pyFiles", "").split(",") if p]
    names = [*user_files, *(p.name for p in plugins)]
    if not names:
        return {}
    return {f"spark.executorEnv.{PLUGIN_PATH_ENV}": os.pathsep.join(names)}
