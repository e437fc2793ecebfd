"""Resolve Java artifacts from Maven Central with `mvn`, once, into the cache outside the repo.

Everything Java the project runs (the Kafka broker, Apache Kafka Connect and MirrorMaker 2 as yardsticks,
Spark's own Kafka sink for comparison) is an ordinary Maven artifact, so one routine serves them all:
`mvn dependency:copy-dependencies` gives a complete runtime classpath. Our own local Maven repository
lives inside the cache (Java's user.home need not match $HOME, and nothing lands in the user's ~/.m2).
A file lock makes concurrent fetches of the same set (parallel test sessions) wait for each other
instead of racing on the same directory.
"""

from __future__ import annotations

import fcntl
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from eosconnect.runtime.host import cache_root

COMPLETE_MARKER = ".complete"


class KafkaSetupError(RuntimeError):
    """Java, Maven or the download is missing; the message says what to install or check."""


def maven_repo() -> Path:
    return cache_root() / "m2-repository"


def require_mvn() -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaSetupError(
            "Maven ('mvn') was not found on PATH. It is needed once, to fetch Java artifacts (Apache Kafka, "
            "Kafka Connect) from Maven Central: install it (Debian: apt-get install maven) and retry."
        )
    return mvn


def pom(dependencies: list[str]) -> str:
    """A throw-away pom whose only job is to list `group:artifact:version` dependencies."""
    deps = []
    for coordinate in dependencies:
        group, artifact, version = coordinate.split(":")
        deps.append(
            f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version></dependency>"
        )
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>eosconnect</groupId><artifactId>fetch</artifactId><version>1</version>
  <dependencies>
    {"".join(deps)}
  </dependencies>
</project>
"""


def run_mvn(mvn: str, workdir: Path, pom_text: str, goal_args: list[str]) -> subprocess.CompletedProcess[str]:
    (workdir / "pom.xml").write_text(pom_text)
    return subprocess.run(
        [mvn, "-B", "-q", f"-Dmaven.repo.local={maven_repo()}", *goal_args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


@contextmanager
def cache_lock(name: str) -> Iterator[None]:
    """Serialise fetches of one cache entry across processes."""
    cache_root().mkdir(parents=True, exist_ok=True)
    with (cache_root() / f".{name}.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def copy_dependencies(mvn: str, workdir: Path, coordinates: list[str], output: Path) -> str | None:
    """Resolve `coordinates` with their runtime dependencies into `output`; None on success, else why not."""
    result = run_mvn(
        mvn,
        workdir,
        pom(coordinates),
        ["dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={output}"],
    )
    if result.returncode == 0 and output.is_dir():
        return None
    return mvn_error(result)


def mvn_error(result: subprocess.CompletedProcess[str]) -> str:
    """The first `[ERROR]` line of a quiet mvn run, without terminal colours: it names the artifact."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("[ERROR]") and len(line) > len("[ERROR]")]
    return (errors or lines or ["mvn failed"])[0]


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


def published_versions(
    group: str, artifact: str, version_range: str, pattern: str = r"4\.\d+\.\d+"
) -> list[str]:
    """Released versions of an artifact in `version_range`, newest first, read from the metadata Maven
    downloads while resolving the range (mvn has no plain 'list versions' goal)."""
    mvn = require_mvn()
    with tempfile.TemporaryDirectory(prefix="eosconnect-mvn-") as tmp:
        work = Path(tmp)
        result = run_mvn(
            mvn,
            work,
            pom([f"{group}:{artifact}:{version_range}"]),
            [
                "dependency:copy-dependencies",
                "-DexcludeTransitive=true",
                f"-DoutputDirectory={work / 'probe'}",
            ],
        )
    versions: set[str] = set()
    for meta in (maven_repo() / group.replace(".", "/") / artifact).glob("maven-metadata*.xml"):
        versions.update(re.findall(rf"<version>({pattern})</version>", meta.read_text()))
    if not versions:
        raise KafkaSetupError(
            f"Could not list the versions of {group}:{artifact} from Maven Central with mvn: "
            f"{mvn_error(result)}. Check that Maven can reach Maven Central."
        )
    return sorted(versions, key=version_key, reverse=True)


def fetch_artifacts(name: str, coordinates: list[str], progress: bool = True) -> Path:
    """The libs dir of cache entry `name` holding `coordinates` and their runtime dependencies.

    Downloaded once; later calls (and runs) need no network.
    """
    target = cache_root() / name
    if (target / COMPLETE_MARKER).exists():
        return target / "libs"
    with cache_lock(name):
        if (target / COMPLETE_MARKER).exists():
            return target / "libs"
        mvn = require_mvn()
        if progress:
            print(f"Fetching {', '.join(coordinates)} from Maven Central with mvn ...", flush=True)
        with tempfile.TemporaryDirectory(prefix="eosconnect-mvn-") as tmp:
            staging = Path(tmp) / "libs"
            failure = copy_dependencies(mvn, Path(tmp), coordinates, staging)
            if failure is not None:
                raise KafkaSetupError(
                    f"Could not fetch {', '.join(coordinates)} with mvn: {failure}. "
                    "Check that Maven can reach Maven Central."
                )
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            shutil.move(str(staging), target / "libs")
        (target / COMPLETE_MARKER).write_text("\n".join(coordinates) + "\n")
        if progress:
            jars = len(list((target / "libs").glob("*.jar")))
            print(f"{name}: {jars} jars cached in {target}", flush=True)
        return target / "libs"


def fetch_unpacked(name: str, coordinate: str, progress: bool = True) -> Path:
    """The directory of cache entry `name` holding the archive `coordinate` unpacked.

    `coordinate` is `group:artifact:version:packaging[:classifier]` of a `tar.gz`/`zip` archive published
    ready to run (e.g. a Quarkus application). Downloaded and unpacked once; later calls need no network.
    """
    target = cache_root() / name
    if (target / COMPLETE_MARKER).exists():
        return target / "app"
    with cache_lock(name):
        if (target / COMPLETE_MARKER).exists():
            return target / "app"
        mvn = require_mvn()
        if progress:
            print(f"Fetching {coordinate} from Maven Central with mvn ...", flush=True)
        with tempfile.TemporaryDirectory(prefix="eosconnect-mvn-") as tmp:
            work = Path(tmp)
            result = run_mvn(
                mvn,
                work,
                pom([]),
                ["dependency:copy", f"-Dartifact={coordinate}", f"-DoutputDirectory={work / 'download'}"],
            )
            archives = list((work / "download").glob("*")) if result.returncode == 0 else []
            if len(archives) != 1:
                raise KafkaSetupError(
                    f"Could not fetch {coordinate} with mvn: {mvn_error(result)}. "
                    "Check that Maven can reach Maven Central."
                )
            staging = work / "app"
            shutil.unpack_archive(archives[0], staging)
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            shutil.move(str(staging), target / "app")
        (target / COMPLETE_MARKER).write_text(coordinate + "\n")
        if progress:
            print(f"{name}: unpacked in {target / 'app'}", flush=True)
        return target / "app"
