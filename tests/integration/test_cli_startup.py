"""Start-up mistakes, as a user makes them: `eosconnect worker` and `eosconnect mirror-maker` run as
subprocesses must fail before Spark starts, with one `Error:` line on stderr naming the setting and
the fix, exit status 2, and no traceback (only with --debug)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import eosconnect as eosconnect_package
from eosconnect.devkafka.ports import free_port

#: Where the eosconnect under test is imported from (a git worktree's is not the installed one).
IMPORT_PATH = str(Path(eosconnect_package.__file__).parents[1])

#: Everything here fails before Spark starts: seconds, even on a loaded machine.
FAST_S = 45.0


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("Error:")]


def eosconnect(*args: str, cwd: Path) -> Run:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "eosconnect.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "PYTHONPATH": IMPORT_PATH},
    )
    return Run(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)


def write(path: Path, **settings: str) -> Path:
    path.write_text("".join(f"{k.replace('__', '.')}={v}\n" for k, v in settings.items()))
    return path


def assert_one_line_failure(run: Run, *needles: str) -> str:
    assert run.code == 2, (run.code, run.stdout, run.stderr)
    assert len(run.error_lines) == 1, run.stderr
    assert "Traceback" not in run.stderr and "Traceback" not in run.stdout, run.stderr
    assert "starting Spark" not in run.stdout, "the mistake must be found before Spark starts"
    assert run.seconds < FAST_S, f"took {run.seconds:.1f}s"
    line = run.error_lines[0]
    for needle in needles:
        assert needle in line, line
    return line


@pytest.fixture
def closed_port() -> int:
    """A local port nothing listens on."""
    return free_port()


@pytest.fixture
def used_port() -> Iterator[int]:
    """A local port another program listens on (as a second worker would find it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_misspelt_required_setting_names_the_near_miss(tmp_path: Path) -> None:
    props = write(tmp_path / "worker.properties", bootstrap__server="127.0.0.1:9092", group__id="g")
    run = eosconnect("worker", str(props), cwd=tmp_path)
    assert_one_line_failure(
        run, "'bootstrap.server'", "did you mean 'bootstrap.servers'?", "worker.properties"
    )
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_unreachable_brokers_name_bootstrap_servers_and_the_address(tmp_path: Path, closed_port: int) -> None:
    address = f"127.0.0.1:{closed_port}"
    props = write(tmp_path / "worker.properties", bootstrap__servers=address, listeners="http://127.0.0.1:0")
    run = eosconnect("worker", str(props), cwd=tmp_path)
    assert_one_line_failure(run, f"bootstrap.servers={address}", "Connection refused")
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr

    debug = eosconnect("worker", str(props), "--debug", cwd=tmp_path)
    assert debug.code == 2 and "Traceback" in debug.stderr, "--debug shows the traceback"


def test_used_rest_port_names_the_port_and_listeners(tmp_path: Path, bootstrap: str, used_port: int) -> None:
    listener = f"http://127.0.0.1:{used_port}"
    props = write(tmp_path / "worker.properties", bootstrap__servers=bootstrap, listeners=listener)
    run = eosconnect("worker", str(props), cwd=tmp_path)
    assert_one_line_failure(run, f"127.0.0.1:{used_port}", f"listeners={listener}", "Address already in use")


def test_unknown_settings_are_warned_by_name_with_a_near_miss(
    tmp_path: Path, bootstrap: str, used_port: int
) -> None:
    props = write(
        tmp_path / "worker.properties",
        bootstrap__servers=bootstrap,
        listeners=f"http://127.0.0.1:{used_port}",  # so the worker stops before Spark, after the warnings
        offset__flush__intervall__ms="1000",
        key__converter="org.apache.kafka.connect.storage.StringConverter",
        producer__linger__ms="5",  # legitimate: a client prefix
        spark__driver__memory="1g",
        listeners__https__ssl__certfile="/nowhere.pem",
    )
    run = eosconnect("worker", str(props), cwd=tmp_path)
    assert_one_line_failure(run, "listeners=")
    warnings = [line for line in run.stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 2, run.stderr
    assert (
        "The configuration 'offset.flush.intervall.ms' was supplied but isn't a known config; "
        "did you mean 'offset.flush.interval.ms'?"
    ) in warnings[0]
    assert "'key.converter' is a Kafka Connect setting eosconnect does not use" in warnings[1]


def test_standalone_checks_as_the_worker_does(tmp_path: Path, closed_port: int, used_port: int) -> None:
    """`eosconnect standalone`: the worker's checks, plus its own offsets setting, one line each."""
    connector = write(
        tmp_path / "source.properties",
        name="s",
        connector__class="FileStreamSource",
        file="in.txt",
        topic="t",
    )
    address = f"127.0.0.1:{closed_port}"
    no_file = write(tmp_path / "no-file.properties", bootstrap__servers=address)
    run = eosconnect("standalone", str(no_file), str(connector), cwd=tmp_path)
    assert_one_line_failure(run, "no-file.properties", "offset.storage.file.filename is required")
    offsets = str(tmp_path / "connect.offsets")
    listener = f"http://127.0.0.1:{used_port}"
    used = write(
        tmp_path / "used.properties",
        bootstrap__servers=address,
        listeners=listener,
        offset__storage__file__filename=offsets,
    )
    run = eosconnect("standalone", str(used), str(connector), cwd=tmp_path)
    assert_one_line_failure(run, f"listeners={listener}", "Address already in use")
    down = write(
        tmp_path / "down.properties",
        bootstrap__servers=address,
        listeners="http://127.0.0.1:0",
        offset__storage__file__filename=offsets,
    )
    run = eosconnect("standalone", str(down), str(connector), cwd=tmp_path)
    assert_one_line_failure(run, f"bootstrap.servers={address}", "Connection refused")


def test_mirror_maker_with_unreachable_brokers(tmp_path: Path, closed_port: int) -> None:
    address = f"127.0.0.1:{closed_port}"
    mm2 = tmp_path / "mm2.properties"
    mm2.write_text(
        f"clusters = A, B\nA.bootstrap.servers = {address}\nB.bootstrap.servers = {address}\n"
        "A->B.enabled = true\nA->B.topics = orders\n"
    )
    run = eosconnect("mirror-maker", str(mm2), cwd=tmp_path)
    assert_one_line_failure(run, f"bootstrap.servers={address}")


def test_other_commands_report_user_errors_in_one_line(tmp_path: Path) -> None:
    missing = eosconnect("mirror", "translate-offsets", "--group", "g", "--source", "A", "--target", "B",
                         "--config", str(tmp_path / "nope.properties"), cwd=tmp_path)  # fmt: skip
    assert_one_line_failure(missing, "nope.properties: No such file or directory")
    unreachable = eosconnect("connectors", "list", "--url", "http://127.0.0.1:9", cwd=tmp_path)
    assert unreachable.code == 1 and len(unreachable.error_lines) == 1, unreachable.stderr
    assert "Traceback" not in unreachable.stderr and "cannot reach http://127.0.0.1:9" in unreachable.stderr
