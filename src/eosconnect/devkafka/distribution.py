"""Fetch Apache Kafka broker jars from Maven Central with `mvn`, once, into a cache outside the repo.

We do not ship a Kafka tarball: the broker and its runtime dependencies are ordinary Maven artifacts
(`org.apache.kafka:kafka_2.13`), so `mvn dependency:copy-dependencies` gives us a complete classpath.
The newest 4.x release is preferred, but a release whose dependencies are not all published yet is
skipped in favour of the previous one. Once a version is cached, no network is needed again.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from eosconnect.devkafka.maven import (
    COMPLETE_MARKER,
    KafkaSetupError,
    cache_lock,
    cache_root,
    copy_dependencies,
    published_versions,
    require_mvn,
    version_key,
)

log = logging.getLogger(__name__)

KAFKA_GROUP = "org.apache.kafka"
KAFKA_ARTIFACT = "kafka_2.13"
MAJOR_RANGE = "[4.0.0,5.0.0)"
#: The slf4j binding that routes the broker's logs to log4j2 (and so to files in the run dir).
LOG4J_SLF4J_BINDING = "org.apache.logging.log4j:log4j-slf4j-impl:2.25.4"

__all__ = ["KafkaDistribution", "KafkaSetupError", "cache_root", "ensure_kafka", "require_java"]


@dataclass(frozen=True)
class KafkaDistribution:
    version: str
    libs_dir: Path

    @property
    def classpath(self) -> str:
        return str(self.libs_dir / "*")


def cached_distributions() -> list[KafkaDistribution]:
    """Complete cached versions, newest first."""
    root = cache_root()
    if not root.is_dir():
        return []
    found = []
    for child in root.glob("kafka-*"):
        if (child / COMPLETE_MARKER).exists() and (child / "libs").is_dir():
            found.append(KafkaDistribution(child.name.removeprefix("kafka-"), child / "libs"))
    return sorted(found, key=lambda d: version_key(d.version), reverse=True)


def require_java() -> str:
    java = shutil.which("java")
    if java is None:
        raise KafkaSetupError(
            "Java was not found on PATH. The local Kafka broker needs Java 17 or newer: "
            "install it (Debian: apt-get install openjdk-17-jre-headless) and retry."
        )
    return java


def ensure_kafka(version: str | None = None, progress: bool = True) -> KafkaDistribution:
    """Return a cached Kafka distribution, downloading the newest usable 4.x once if needed.

    `version` (or `EOSCONNECT_KAFKA_VERSION`) pins a release; otherwise any complete cached 4.x is
    reused so that later runs need no network.
    """
    require_java()
    version = version or os.environ.get("EOSCONNECT_KAFKA_VERSION") or None
    if found := _cached(version):
        return found
    with cache_lock("kafka"):
        if found := _cached(version):
            return found
        return _fetch(version, progress)


def _cached(version: str | None) -> KafkaDistribution | None:
    cached = [d for d in cached_distributions() if version is None or d.version == version]
    return cached[0] if cached else None


def _fetch(version: str | None, progress: bool) -> KafkaDistribution:
    mvn = require_mvn()
    with tempfile.TemporaryDirectory(prefix="eosconnect-mvn-") as tmp:
        work = Path(tmp)
        candidates = [version] if version else published_versions(KAFKA_GROUP, KAFKA_ARTIFACT, MAJOR_RANGE)
        errors: list[str] = []
        for candidate in candidates:
            if progress:
                print(f"Fetching Apache Kafka {candidate} jars from Maven Central with mvn ...", flush=True)
            staging = work / f"libs-{candidate}"
            coordinates = [f"{KAFKA_GROUP}:{KAFKA_ARTIFACT}:{candidate}", LOG4J_SLF4J_BINDING]
            failure = copy_dependencies(mvn, work, coordinates, staging)
            if failure is not None:
                errors.append(f"{candidate}: {failure}")
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
