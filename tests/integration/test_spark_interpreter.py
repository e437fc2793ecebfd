"""The docs' sink example, run as a user runs it: the virtualenv's interpreter, not activated (issue 24).

`.venv/bin/python job.py` with the virtualenv off the PATH and PYSPARK_PYTHON unset: Spark's Python
workers would run the PATH's `python3`, which has no eosconnect, unless `register()` points them at
the driver's interpreter. The query is stopped mid-stream with `stop_query`, which must be quiet.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "spark.md"
#: Instead of the example's minute: stop as soon as three batches are written, mid-stream.
UNTIL_THREE_BATCHES = """import time
deadline = time.monotonic() + 180
while time.monotonic() < deadline and (query.lastProgress or {}).get("batchId", -1) < 2:
    time.sleep(0.5)"""


def sink_example() -> str:
    """The first Python block of docs/spark.md's sink section."""
    text = DOCS.read_text()
    section = text[text.index("## The sink") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None
    return match.group(1)


def test_docs_sink_example_runs_from_an_unactivated_virtualenv(
    bootstrap, topic_name, create_topic, read_committed, tmp_path
):
    topic = create_topic(topic_name("events"), partitions=2)
    job = (
        sink_example()
        .replace("127.0.0.1:9092", bootstrap)
        .replace('"events"', repr(topic))
        .replace("/tmp/events-checkpoint", str(tmp_path / "checkpoint"))
        .replace('master("local[4]")', 'master("local[2]")')
        .replace("query.awaitTermination(60)", UNTIL_THREE_BATCHES)
    )
    assert "stop_query(query)" in job
    (tmp_path / "job.py").write_text(job)
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "VIRTUAL_ENV", "PYTHONPATH")}
    done = subprocess.run(
        [sys.executable, "job.py"],
        cwd=tmp_path,
        env={**env, "PATH": path},
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    for noise in ("Traceback", "ModuleNotFoundError", "EOFError", "failed to abort", " ERROR "):
        assert noise not in output, f"{noise!r} in the job's output:\n{output[-4000:]}"
    keys = Counter(r.key for r in read_committed(topic))
    assert keys, "the job wrote nothing"
    assert max(keys.values()) == 1, "a row written twice"
