"""Drive Apache Kafka Connect's own JsonConverter, transformations and predicates from Python tests.

`ConnectHarness` compiles tests/support/java/ConnectHarness.java (once per source and Kafka version, cached
next to the jars) against connect-api, connect-json and connect-transforms from Maven Central
(`ensure_connect_libraries`), then keeps one JVM that answers JSON-lines requests, so a differential
test module pays the JVM start once and each case costs about a millisecond.

A request is a dict, e.g.::

    harness.run({
        "converter": {"schemas.enable": "false"},        # JsonConverter settings for key and value
        "topic": "orders", "partition": 0, "timestamp": 1700000000000,
        "kafkaOffset": 7,                                 # present: a SinkRecord; absent: a SourceRecord
        "key": {"id": 1}, "value": {"a": 1},              # JSON as JsonConverter reads it (an envelope
                                                          # {"schema", "payload"} with schemas.enable=true)
        "headers": [["h", "text"]],                       # read like SimpleHeaderConverter
        "predicates": {"p": {"class": "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
                             "config": {"name": "h"}}},
        "transforms": [{"class": "org.apache.kafka.connect.transforms.InsertField$Value",
                        "config": {"static.field": "s", "static.value": "v"},
                        "predicate": "p", "negate": False}],
    })

and the answer is `{"topic", "partition", "timestamp", "key", "value", "headers"}` (key and value written
back by JsonConverter with the same settings, headers as `[name, text]` pairs as SimpleHeaderConverter
writes them), `{"dropped": True}`, or `{"error": {"class", "message", "stage"}}` where stage is
configure, apply or convert. The Java file's header comment is the full contract.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any, Self

from eosconnect.devkafka.distribution import require_java
from eosconnect.devkafka.kafka_connect import ensure_connect_libraries
from eosconnect.devkafka.maven import cache_lock

SOURCE = Path(__file__).resolve().parent / "java" / "ConnectHarness.java"
MAIN_CLASS = "ConnectHarness"


class HarnessError(RuntimeError):
    """The harness could not be compiled or its JVM stopped answering; the message says why."""


def compile_harness(libs: Path) -> Path:
    """The directory holding ConnectHarness.class, compiled once per (source, libs) and cached beside libs."""
    digest = hashlib.sha256(SOURCE.read_bytes() + str(sorted(p.name for p in libs.glob("*.jar"))).encode())
    classes = libs.parent / f"harness-classes-{digest.hexdigest()[:16]}"
    if (classes / f"{MAIN_CLASS}.class").exists():
        return classes
    javac = shutil.which("javac")
    if javac is None:
        raise HarnessError("javac was not found on PATH; install a JDK (Debian: openjdk-17-jdk-headless).")
    with cache_lock(f"harness-{libs.parent.name}"):
        if (classes / f"{MAIN_CLASS}.class").exists():
            return classes
        staging = classes.with_name(classes.name + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        result = subprocess.run(
            [javac, "-nowarn", "-d", str(staging), "-cp", str(libs / "*"), str(SOURCE)],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise HarnessError(f"javac failed on {SOURCE}:\n{result.stdout}{result.stderr}")
        staging.rename(classes)
    return classes


class ConnectHarness:
    """One JVM running Kafka's converter and transforms; `run(request)` answers one request.

    Use as a context manager (or call `close()`): the JVM exits when its stdin closes.
    """

    def __init__(self, version: str | None = None) -> None:
        libs = ensure_connect_libraries(version, progress=False)
        classes = compile_harness(libs)
        self._lock = threading.Lock()
        self._proc = subprocess.Popen(
            [
                require_java(),
                "-Xms32m",
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                "-cp",
                f"{classes}:{libs}/*",
                MAIN_CLASS,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send one request, return the harness's answer (see the module docstring)."""
        answer: dict[str, Any] = json.loads(self.run_line(request))
        return answer

    def run_line(self, request: dict[str, Any]) -> str:
        """`run`, answering the JSON line exactly as the JVM wrote it (Jackson's number text and key
        order intact: what byte-level converter comparisons need)."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        with self._lock:
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        if not line:
            stderr = self._proc.stderr.read() if self._proc.stderr else ""
            raise HarnessError(f"the Java harness exited ({self._proc.wait()}): {stderr[-2000:]}")
        return line

    def close(self) -> None:
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for stream in (self._proc.stdout, self._proc.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
