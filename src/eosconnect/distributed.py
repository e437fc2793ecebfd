"""`eosconnect worker worker.properties`: Kafka Connect's `ConnectDistributed`, on the launch API.

The properties file is Kafka Connect's distributed-worker format; the worker runs in this process
until SIGTERM/SIGINT (eosconnect.launch).
"""

from __future__ import annotations

from pathlib import Path

from eosconnect.launch import EXIT_GRACE_S, load_properties, run_worker

__all__ = ["run_distributed"]


def run_distributed(properties: Path, ready_file: Path | None = None) -> None:
    """Run the worker `properties` describes; `ready_file` gets its URL and pid once it serves."""
    run_worker(load_properties(properties), ready_file, source=str(properties), exit_within_s=EXIT_GRACE_S)
