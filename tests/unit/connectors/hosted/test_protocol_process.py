"""ProtocolProcess's source program dies with the process that ran it: a real parent SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal: Linux")

#: A parent that runs a long source program through ProtocolProcess, prints its pid and waits.
PARENT = textwrap.dedent(
    """
    import logging, sys, time
    from eosconnect.connectors.hosted.process import ProtocolProcess

    process = ProtocolProcess(
        [sys.executable, "-c", "import time; print('{}', flush=True); time.sleep(120)"],
        "test source",
        logging.getLogger("test"),
    )
    assert process.next_line(30) == "{}"
    print(process.pid, flush=True)
    time.sleep(120)
    """
)


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie entry awaiting its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_source_program_dies_within_seconds_of_its_sigkilled_parent():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, env=env)
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert alive(child)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 5
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(child), "the source program outlived its parent by 5 s"
    finally:
        parent.kill()
        parent.wait(10)
        if child and alive(child):
            os.kill(child, signal.SIGKILL)
