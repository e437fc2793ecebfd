"""Command lines, log4j2 files and process spawning for the JVMs the dev launchers start.

Brokers (`cluster.py`) and Kafka Connect / MirrorMaker 2 (`kafka_connect.py`) run as plain JVMs in
a work dir: a log4j2 file writing one log under `kafka.logs.dir`, a heap sized for a shared 2-core
machine, a marker on the command line that identifies our JVMs, and a child that can be tied to
the Python process that started it. One place builds all that, so the launchers cannot drift apart.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from eosconnect.devkafka.distribution import require_java
from eosconnect.runtime.host import die_with_parent

__all__ = ["die_with_parent", "java_command", "log4j2_config", "spawn_java"]


def log4j2_config(log_file: str, levels: Mapping[str, str]) -> str:
    """A log4j2 XML config: everything at INFO into `${kafka.logs.dir}/<log_file>`, `levels` per logger."""
    loggers = "".join(f'    <Logger name="{name}" level="{level}"/>\n' for name, level in levels.items())
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <File name="file" fileName="${{sys:kafka.logs.dir}}/{log_file}">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
{loggers}    <Root level="INFO"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
"""


def java_command(
    *,
    heap: Sequence[str],
    marker: str,
    logs_dir: Path,
    log4j2_file: Path,
    classpath: Path,
    main: Sequence[str],
    jvm_options: Sequence[str] = (),
) -> list[str]:
    """`java <heap> -XX:+UseG1GC <jvm_options> ... -cp <classpath>/* <main...>`.

    `marker` is a `-D` flag that lets a launcher recognise its own JVMs (e.g. before killing a stale pid);
    `classpath` is a libs dir, all of whose jars are used.
    """
    return [
        require_java(),
        *heap,
        "-XX:+UseG1GC",
        *jvm_options,
        "-Djava.awt.headless=true",
        marker,
        f"-Dkafka.logs.dir={logs_dir}",
        f"-Dlog4j2.configurationFile={log4j2_file}",
        "-cp",
        str(classpath / "*"),
        *main,
    ]


def spawn_java(cmd: Sequence[str], stdout_log: Path, tie_to_parent: bool) -> subprocess.Popen[bytes]:
    """Start `cmd` in its own session, stdout and stderr appended to `stdout_log`; with `tie_to_parent`
    it dies with this process (`die_with_parent`)."""
    with stdout_log.open("ab") as out:
        return subprocess.Popen(
            list(cmd),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent if tie_to_parent else None,
        )
