"""Find a Java runtime of at least a given major version.

The Kafka broker runs on the default `java` (17+), but some tools need a newer one (Apicurio Registry 3.x
needs Java 21+), and machines often have several JDKs side by side under /usr/lib/jvm with an older one
as the default. This looks, in order, at `EOSCONNECT_JAVA_<N>` (a `java` binary or a JDK home),
`JAVA_HOME`, `java` on PATH and every JDK under /usr/lib/jvm, and takes the first new enough one.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

from eosconnect.devkafka.maven import KafkaSetupError

__all__ = ["find_java", "java_major", "require_java_major"]

JVM_ROOT = Path("/usr/lib/jvm")


def _java_in(path: str | os.PathLike[str]) -> Path | None:
    """`path` itself if it is a java binary, else `<path>/bin/java` if that exists."""
    p = Path(path)
    if p.is_file() and os.access(p, os.X_OK):
        return p
    candidate = p / "bin" / "java"
    return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None


@cache
def java_major(java: str) -> int | None:
    """The feature version of a java binary (17, 21, 25 ...), from the JDK's `release` file when it has
    one, else from `java -version`; None if it cannot be told."""
    binary = Path(java).resolve()
    release = binary.parent.parent / "release"
    text = ""
    if release.is_file():
        text = release.read_text(errors="replace")
        found = re.search(r'^JAVA_VERSION="(\d+)', text, re.MULTILINE)
        if found:
            return int(found.group(1))
    try:
        result = subprocess.run(
            [str(binary), "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError:
        return None
    found = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr + result.stdout)
    if not found:
        return None
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major


def _candidates(min_major: int) -> list[Path]:
    paths: list[str | os.PathLike[str]] = []
    for variable in (f"EOSCONNECT_JAVA_{min_major}", "JAVA_HOME"):
        if value := os.environ.get(variable):
            paths.append(value)
    if on_path := shutil.which("java"):
        paths.append(on_path)
    if JVM_ROOT.is_dir():
        paths.extend(sorted(JVM_ROOT.iterdir(), reverse=True))
    found: list[Path] = []
    for path in paths:
        java = _java_in(path)
        if java is not None and java.resolve() not in {f.resolve() for f in found}:
            found.append(java)
    return found


def find_java(min_major: int) -> str | None:
    """The first java binary of version `min_major` or newer (see the module doc for the order)."""
    for java in _candidates(min_major):
        major = java_major(str(java))
        if major is not None and major >= min_major:
            return str(java)
    return None


def require_java_major(min_major: int, purpose: str) -> str:
    """`find_java(min_major)`, or an error that lists what was found and how to add a new enough one."""
    java = find_java(min_major)
    if java is not None:
        return java
    seen = ", ".join(f"{j} ({java_major(str(j)) or '?'})" for j in _candidates(min_major)) or "none"
    raise KafkaSetupError(
        f"{purpose} needs Java {min_major} or newer; the Java runtimes found are: {seen}. Install one "
        f"(Debian trixie or newer: apt-get install openjdk-{min_major}-jre-headless; elsewhere any "
        f"JDK {min_major}+ under {JVM_ROOT}) or point EOSCONNECT_JAVA_{min_major} at its java binary or home."
    )
