"""Where one bench run keeps its brokers', databases' and workers' files.

A run's directory holds gigabytes (a broker's log at N = 400 connectors: 8-12 GB), so every bench
takes a new one here and it is removed when the run's process exits, however the run ended.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

__all__ = ["new_workdir"]


def new_workdir(prefix: str) -> Path:
    """A new directory under the temporary directory, deleted at exit (after the run's `finally`
    blocks stopped what they started)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)  # PostgreSQL runs as the `postgres` user when we are root
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path
