"""`register()`'s choice of the Python that Spark's workers run (spark/interpreter.py), local mode.

The end-to-end case (the docs' job from an unactivated virtualenv) is
tests/integration/test_spark_interpreter.py; these check the choice and the error for a chosen
interpreter that cannot import eosconnect, with a real interpreter made for the test.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from eosconnect.api.errors import ConfigException
from eosconnect.spark.interpreter import use_driver_python


@dataclass
class _Context:
    """What use_driver_python reads of a SparkContext in local mode: its conf and pythonExec."""

    conf: dict[str, str]
    pythonExec: str = "python3"

    def getConf(self) -> dict[str, str]:
        return self.conf


@dataclass
class _Session:
    sparkContext: _Context = field(default_factory=lambda: _Context({"spark.master": "local[2]"}))


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A virtualenv without eosconnect (nor anything else)."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    return str(venv / "bin" / "python")


def test_no_choice_means_the_drivers_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    session = _Session()
    assert use_driver_python(session) == sys.executable
    assert session.sparkContext.pythonExec == sys.executable


def test_a_chosen_interpreter_without_eosconnect_fails_naming_it(
    bare_python: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", bare_python)
    with pytest.raises(ConfigException) as info:
        use_driver_python(_Session())
    message = str(info.value)
    assert bare_python in message and "PYSPARK_PYTHON" in message and "No module named" in message


def test_spark_pyspark_python_from_the_builder_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    session = _Session(_Context({"spark.master": "local[2]", "spark.pyspark.python": sys.executable}))
    assert use_driver_python(session) == sys.executable
    assert Path(session.sparkContext.pythonExec) == Path(sys.executable)
