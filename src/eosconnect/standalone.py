"""`eosconnect standalone worker.properties connector.properties ...`: Kafka's `ConnectStandalone`.

The worker's properties are Kafka Connect's standalone format (`offset.storage.file.filename`, as
in Kafka's config/connect-standalone.properties); every other argument is a connector file, read as
Kafka's `connect-standalone.sh` reads it (`load_connector_file`). The connectors and their tasks run
in this process until SIGTERM/SIGINT (eosconnect.launch `run_standalone_worker`).
"""

from __future__ import annotations

import json
from pathlib import Path

from eosconnect.cli_errors import UserError
from eosconnect.launch import EXIT_GRACE_S, load_properties, run_standalone_worker

__all__ = ["load_connector_file", "run_standalone"]


def load_connector_file(path: Path) -> tuple[str, dict[str, str]]:
    """(name, config) of a connector file, in any form Kafka's standalone worker accepts: a `.json`
    file holding a create request `{"name": ..., "config": {...}}` or a flat config `{"name": ...,
    "connector.class": ...}`, else a Java properties file. `UserError` naming the file and what is
    wrong (bad JSON, no `name`, a `name` that differs from the config's)."""
    if path.suffix.lower() == ".json":
        try:
            body = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}: not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise UserError(
                f'{path}: must hold a JSON object, {{"name": ..., "config": {{...}}}} or a flat config'
            )
        if isinstance(body.get("config"), dict):
            config = {str(k): _text(v) for k, v in body["config"].items()}
            name = body.get("name")
            if name is not None and "name" in config and config["name"] != name:
                raise UserError(
                    f"{path}: the connector name in 'config' ({config['name']}) differs from 'name' ({name})"
                )
            name = name if name is not None else config.get("name")
        else:
            config = {str(k): _text(v) for k, v in body.items()}
            name = config.get("name")
    else:
        config = load_properties(path)
        name = config.get("name")
    if not isinstance(name, str) or not name.strip():
        raise UserError(f"{path}: no connector name: set name (name=my-connector) in the file")
    config["name"] = name
    return name, config


def _text(value: object) -> str:
    """A JSON config value as Kafka's REST layer takes it: numbers and booleans as their text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value)


def run_standalone(properties: Path, connector_files: list[Path], ready_file: Path | None = None) -> None:
    """Run the standalone worker `properties` describes with the connectors of `connector_files`."""
    connectors = [(*load_connector_file(path), str(path)) for path in connector_files]
    names = [name for name, _config, _path in connectors]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise UserError(f"connector {repeated[0]!r} is defined by more than one file")
    run_standalone_worker(
        load_properties(properties),
        connectors,
        ready_file,
        source=str(properties),
        exit_within_s=EXIT_GRACE_S,
    )
