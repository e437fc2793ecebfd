"""Fetch Apache Kafka broker jars from Maven Central with `mvn`, once, into a cache outside the repo.

We do not ship a Kafka tarball: the broker and its runtime dependencies are ordinary Maven artifacts
(`org.apache.kafka:kafka_2.13`), so `mvn dependency:copy-dependencies` gives us a complete classpath.
The newest 4.x release is preferred, but a release whose dependencies are not all published yet is
skipped in favour of the previous one. Once a version is cached, no network is needed again.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

KAFKA_GROUP = "org.apache.kafka"
KAFKA_ARTIFACT = "kafka_2.13"
MAJOR_RANGE = "[4.0.0,5.0.0)"
#: The slf4j binding that routes the broker's logs to log4j2 (and so to files in the run dir).
LOG4J_SLF4J_BINDING = ("org.apache.logging.log4j", "log4j-slf4j-impl", "2.25.4")
COMPLETE_MARKER = ".complete"


class KafkaSetupError(RuntimeError):
    """Java, Maven or the download is missing; the message says what to install or check."""


@dataclass(frozen=True)
class KafkaDistribution:
    version: str
    libs_dir: Path

    @property
    def classpath(self) -> str:
        return str(self.libs_dir / "*")


def cache_root() -> Path:
    """`EOSCONNECT_CACHE` wins; otherwise the XDG cache dir, never the repository."""
    if env := os.environ.get("EOSCONNECT_CACHE"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "eosconnect"


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


def cached_distributions() -> list[KafkaDistribution]:
    """Complete cached versions, newest first."""
    root = cache_root()
    if not root.is_dir():
        return []
    found = []
    for child in root.glob("kafka-*"):
        if (child / COMPLETE_MARKER).exists() and (child / "libs").is_dir():
            found.append(KafkaDistribution(child.name.removeprefix("kafka-"), child / "libs"))
    return sorted(found, key=lambda d: _version_key(d.version), reverse=True)


def require_java() -> str:
    java = shutil.which("java")
    if java is None:
        raise KafkaSetupError(
            "Java was not found on PATH. The local Kafka broker needs Java 17 or newer: "
            "install it (Debian: apt-get install openjdk-17-jre-headless) and retry."
        )
    return java


def _require_mvn() -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaSetupError(
            "Maven ('mvn') was not found on PATH. It is needed once, to fetch the Apache Kafka jars "
            "from Maven Central: install it (Debian: apt-get install maven) and retry."
        )
    return mvn


def _pom(version: str, with_binding: bool = True) -> str:
    binding = ""
    if with_binding:
        g, a, v = LOG4J_SLF4J_BINDING
        binding = (
            f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
            f"<version>{v}</version></dependency>"
        )
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>eosconnect</groupId><artifactId>kafka-fetch</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>{KAFKA_GROUP}</groupId><artifactId>{KAFKA_ARTIFACT}</artifactId>
      <version>{version}</version></dependency>
    {binding}
  </dependencies>
</project>
"""


def maven_repo() -> Path:
    """Our own Maven local repository inside the cache: its location is known (Java's user.home
    need not match $HOME) and nothing of ours lands in the user's ~/.m2."""
    return cache_root() / "m2-repository"


def _run_mvn(mvn: str, workdir: Path, pom: str, goal_args: list[str]) -> subprocess.CompletedProcess[str]:
    (workdir / "pom.xml").write_text(pom)
    return subprocess.run(
        [mvn, "-B", "-q", f"-Dmaven.repo.local={maven_repo()}", *goal_args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def _candidate_versions(mvn: str, workdir: Path) -> list[str]:
    """All published 4.x versions, newest first, read from Maven's own metadata download."""
    result = _run_mvn(
        mvn,
        workdir,
        _pom(MAJOR_RANGE, with_binding=False),
        [
            "dependency:copy-dependencies",
            "-DexcludeTransitive=true",
            f"-DoutputDirectory={workdir / 'probe'}",
        ],
    )
    repo = maven_repo() / KAFKA_GROUP.replace(".", "/") / KAFKA_ARTIFACT
    versions: set[str] = set()
    for meta in repo.glob("maven-metadata*.xml"):
        versions.update(re.findall(r"<version>(4\.\d+\.\d+)</version>", meta.read_text()))
    if not versions:
        raise KafkaSetupError(
            "Could not list Apache Kafka versions from Maven Central with mvn. Check that Maven can reach "
            f"Maven Central (mvn output follows):\n{result.stdout[-2000:]}{result.stderr[-2000:]}"
        )
    return sorted(versions, key=_version_key, reverse=True)


def ensure_kafka(version: str | None = None, progress: bool = True) -> KafkaDistribution:
    """Return a cached Kafka distribution, downloading the newest usable 4.x once if needed.

    `version` (or `EOSCONNECT_KAFKA_VERSION`) pins a release; otherwise any complete cached 4.x is
    reused so that later runs need no network.
    """
    require_java()
    version = version or os.environ.get("EOSCONNECT_KAFKA_VERSION") or None
    cached = cached_distributions()
    if version:
        cached = [d for d in cached if d.version == version]
    if cached:
        return cached[0]

    mvn = _require_mvn()
    cache_root().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="eosconnect-mvn-") as tmp:
        work = Path(tmp)
        candidates = [version] if version else _candidate_versions(mvn, work)
        errors: list[str] = []
        for candidate in candidates:
            if progress:
                print(f"Fetching Apache Kafka {candidate} jars from Maven Central with mvn ...", flush=True)
            staging = work / f"libs-{candidate}"
            result = _run_mvn(
                mvn,
                work,
                _pom(candidate),
                [
                    "dependency:copy-dependencies",
                    "-DincludeScope=runtime",
                    f"-DoutputDirectory={staging}",
                ],
            )
            if result.returncode != 0 or not staging.is_dir():
                reason = (result.stdout + result.stderr).strip().splitlines()
                errors.append(f"{candidate}: {reason[-1] if reason else 'mvn failed'}")
                log.warning("Apache Kafka %s could not be resolved, trying an older release", candidate)
                continue
            target = cache_root() / f"kafka-{candidate}"
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            shutil.move(str(staging), target / "libs")
            (target / COMPLETE_MARKER).write_text(candidate + "\n")
            if progress:
                jars = len(list((target / "libs").glob("*.jar")))
                print(f"Apache Kafka {candidate}: {jars} jars cached in {target}", flush=True)
            return KafkaDistribution(candidate, target / "libs")
    raise KafkaSetupError(
        "No Apache Kafka 4.x release could be fetched with mvn. Check network access to Maven Central. "
        "Attempts:\n  " + "\n  ".join(errors[:5])
    )
