"""eosconnect: Kafka Connect-style connectors on Apache Spark, exactly once into Apache Kafka."""

import sys

__version__ = "0.1.0"

# `import httpx` also imports its command-line client (httpx._main) and with it click, rich and
# pygments when they are installed: ~4.6 MB and ~90 modules in every Python worker that runs
# connector tasks (their HTTP channel to the leader uses httpx), for a CLI nobody calls in-process.
# Marking the module absent makes httpx define its stub `main` instead; nothing else changes, and a
# process that imported httpx before eosconnect keeps what it has.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
