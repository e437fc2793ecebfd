"""Finding a Java new enough for a tool (Apicurio Registry needs 21+) beside an older default."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eosconnect.devkafka import java_runtime
from eosconnect.devkafka.maven import KafkaSetupError


def _fake_jdk(root: Path, name: str, version: str) -> Path:
    home = root / name
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text("#!/bin/sh\nexit 1\n")
    java.chmod(0o755)
    (home / "release").write_text(f'JAVA_VERSION="{version}"\n')
    return home


def test_the_newest_enough_jdk_is_found_and_the_error_lists_what_was_seen(tmp_path: Path, monkeypatch):
    jvm = tmp_path / "jvm"
    old = _fake_jdk(jvm, "java-17-openjdk-amd64", "17.0.15")
    monkeypatch.setattr(java_runtime, "JVM_ROOT", jvm)
    monkeypatch.setenv("PATH", str(old / "bin"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.delenv("EOSCONNECT_JAVA_21", raising=False)
    java_runtime.java_major.cache_clear()
    assert java_runtime.find_java(17) == str(old / "bin" / "java")
    with pytest.raises(
        KafkaSetupError, match=r"needs Java 21 or newer.*java-17-openjdk-amd64/bin/java \(17\)"
    ):
        java_runtime.require_java_major(21, "Apicurio Registry")

    new = _fake_jdk(jvm, "temurin-25-jdk-amd64", "25.0.3")
    assert java_runtime.find_java(21) == str(new / "bin" / "java")
    monkeypatch.setenv("EOSCONNECT_JAVA_21", os.fspath(new))
    assert java_runtime.find_java(21) == str(new / "bin" / "java")
