"""`AirbyteSource`: an Airbyte source (any program speaking the Airbyte protocol) as an
exactly-once source connector, with `transaction.boundary=connector` (each transaction ends at a
state; other boundaries would commit records with the state before them, so exactly-once support
is UNSUPPORTED with them, as the default config shows below).

The connector runs the source's `spec`, `check` and `discover` (validation and start, on the
worker); each task runs `read` syncs of its streams with `HostedSourceTask`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from eosconnect.api.config import ConfigDef, ConfigValue
from eosconnect.api.errors import ConfigException, ConnectException
from eosconnect.api.source import (
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SourceConnector,
    SourceTask,
)
from eosconnect.connectors.hosted import airbyte_catalog as cfg
from eosconnect.connectors.hosted.airbyte_protocol import parse_message, parse_state, stream_key, trace_error
from eosconnect.connectors.hosted.commands import private_files, run_command
from eosconnect.connectors.hosted.executables import resolve_executable
from eosconnect.connectors.hosted.json_schema import StreamSchema
from eosconnect.connectors.hosted.task import Event, HostedSourceTask, LogLine, RecordData

__all__ = ["AirbyteSourceConnector", "AirbyteSourceTask"]

VERSION = "1.0.0"


def _executable(values: Mapping[str, Any]) -> str:
    return resolve_executable(values[cfg.SOURCE], values[cfg.VENV_DIR], cfg.SOURCE)


def discover(executable: str, source_config: Mapping[str, Any]) -> dict[str, Any]:
    with private_files(config=dict(source_config)) as paths:
        return run_command(
            [executable, "discover", "--config", paths["config"]], f"{executable} discover", "CATALOG"
        )


class AirbyteSourceConnector(SourceConnector):
    """Reads the streams of an Airbyte source into `<topic.prefix>.<stream>`, exactly once for
    incremental streams.

    `airbyte.source` names the source (a package in its own venv, or an executable),
    `airbyte.config` its config (JSON, checked against its `spec` and with `check` at validation),
    `airbyte.streams` the streams (all when empty). Each stream is read incrementally where the
    source supports it, with the catalog's cursor and primary key; records are keyed by the
    primary key, their value a Struct of the stream's JSON Schema (or schemaless JSON).

    Every STATE is a source offset, per stream for STREAM states and one for GLOBAL or LEGACY:
    with `transaction.boundary=connector` a transaction ends at each state that covers all its
    records, and a restarted task gives the source its last committed state (`--state`). So
    delivery is exactly once for incremental streams whose source resumes deterministically from a
    state. A full-refresh stream is read whole at every sync, its records carrying the sync's id in
    the `eosconnect.sync.id` header; under `exactly.once.support=required` it is refused.
    `tasks.max` deals the streams round-robin over the tasks (a source with GLOBAL states, a CDC
    source, needs `tasks.max=1`).
    """

    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConfigDef:
        return cfg.CONFIG_DEF

    def validate(self, config: Mapping[str, str]) -> list[ConfigValue]:
        results = cfg.CONFIG_DEF.validate(config)
        if any(r.errors for r in results):
            return results
        errors = self._source_errors(config)
        by_name = {r.name: r for r in results}
        for name, problems in errors.items():
            if name in by_name:
                by_name[name].errors.extend(problems)
            else:  # a field of the source's own config
                results.append(ConfigValue(name=name, value=None, errors=list(problems)))
        return results

    def _source_errors(self, config: Mapping[str, str]) -> dict[str, list[str]]:
        """The source's `spec`, `check` and `discover`, run at once (each starts a Python program,
        seconds apiece), their answers read in that order: the first that finds fault speaks."""
        values = cfg.CONFIG_DEF.parse(config)
        try:
            executable = _executable(values)
            source_config = cfg.source_config(values[cfg.SOURCE_CONFIG])
        except ConfigException as exc:
            return exc.errors
        with private_files(config=source_config) as paths, ThreadPoolExecutor(3) as pool:
            spec = pool.submit(run_command, [executable, "spec"], f"{executable} spec", "SPEC")
            check = pool.submit(
                run_command,
                [executable, "check", "--config", paths["config"]],
                f"{executable} check",
                "CONNECTION_STATUS",
            )
            catalog = pool.submit(
                run_command,
                [executable, "discover", "--config", paths["config"]],
                f"{executable} discover",
                "CATALOG",
            )
            try:
                errors = cfg.spec_errors(spec.result(), source_config)
            except ConnectException as exc:
                return {cfg.SOURCE: [str(exc)]}
            if errors:
                return errors
            try:
                status = check.result()["connectionStatus"]
            except ConnectException as exc:
                return {cfg.SOURCE_CONFIG: [str(exc)]}
            if status.get("status") != "SUCCEEDED":
                return {cfg.SOURCE_CONFIG: [f"the source's check failed: {status.get('message') or status}"]}
            try:
                full = cfg.full_refresh_streams(catalog.result(), values[cfg.STREAMS])
            except ConfigException as exc:
                return exc.errors
            except ConnectException as exc:
                return {cfg.SOURCE_CONFIG: [str(exc)]}
        if full and str(config.get("exactly.once.support", "")).lower() == "required":
            return {
                cfg.STREAMS: [
                    f"stream(s) {', '.join(full)} support only full refresh: every sync reads them whole "
                    "again, so their records cannot be delivered exactly once (a restart repeats them); "
                    f"leave them out of {cfg.STREAMS} or do not require exactly.once.support"
                ]
            }
        return {}

    def start(self, config: dict[str, str]) -> None:
        self._values = cfg.CONFIG_DEF.parse(config)
        self._config = dict(config)
        executable = _executable(self._values)
        catalog = discover(executable, cfg.source_config(self._values[cfg.SOURCE_CONFIG]))
        self._configured = cfg.configured_catalog(catalog, self._values[cfg.STREAMS])
        if not self._configured:
            raise ConfigException.for_field(cfg.STREAMS, f"{executable} discovered no streams")

    def task_class(self) -> type[SourceTask]:
        return AirbyteSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [
            {**self._config, cfg.TASK_CATALOG: json.dumps({"streams": share}), cfg.TASK_INDEX: str(i)}
            for i, share in enumerate(cfg.split_streams(self._configured, max_tasks))
        ]

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        """Exactly once needs the transactions to end at states (`transaction.boundary=connector`)."""
        if str(config.get("transaction.boundary", "poll")).lower() != "connector":
            return ExactlyOnceSupport.UNSUPPORTED
        return ExactlyOnceSupport.SUPPORTED

    def can_define_transaction_boundaries(self, config: Mapping[str, str]) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED


class AirbyteSourceTask(HostedSourceTask):
    """Runs `read` syncs of its share of the configured catalog (see `AirbyteSourceConnector`)."""

    offset_prefix = "airbyte"
    task_index_key = cfg.TASK_INDEX

    def version(self) -> str:
        return VERSION

    def setup(self, config: dict[str, str]) -> None:
        values = cfg.CONFIG_DEF.parse(config)
        self.executable = _executable(values)
        self.source_config = cfg.source_config(values[cfg.SOURCE_CONFIG])
        self.topic_prefix = values[cfg.TOPIC_PREFIX]
        self.schemaless = values[cfg.SCHEMALESS]
        self.batch_size = values[cfg.BATCH_SIZE]
        self.sync_interval_s = values[cfg.SYNC_INTERVAL] / 1000
        try:
            self.catalog = json.loads(config[cfg.TASK_CATALOG])
        except (KeyError, ValueError) as exc:
            raise ConnectException(f"the task config lacks its catalog ({cfg.TASK_CATALOG}): {exc}") from None
        for entry in self.catalog["streams"]:
            stream = entry["stream"]
            key = stream_key(stream["name"], stream.get("namespace"))
            self.streams[key] = StreamSchema(key, stream.get("json_schema") or {})
            self.primary_keys[key] = entry.get("primary_key") or []
            if entry.get("sync_mode") != "incremental":
                self.full_refresh.add(key)

    def sync_files(self, state: Any) -> dict[str, Any]:
        files: dict[str, Any] = {"config": self.source_config, "catalog": self.catalog}
        if state is not None:
            files["state"] = state
        return files

    def sync_argv(self, paths: Mapping[str, str]) -> list[str]:
        argv = [self.executable, "read", "--config", paths["config"], "--catalog", paths["catalog"]]
        if "state" in paths:
            argv += ["--state", paths["state"]]
        return argv

    def interpret(self, line: str, where: str) -> Event:
        message = parse_message(line, where)
        kind = message["type"]
        if kind == "RECORD":
            record = message["record"]
            emitted = record.get("emitted_at")
            return RecordData(
                stream_key(record["stream"], record.get("namespace")),
                record["data"],
                int(emitted) if isinstance(emitted, int | float) and emitted >= 0 else None,
            )
        if kind == "STATE":
            return parse_state(message, where, line)
        if kind == "LOG":
            entry = message["log"]
            return LogLine(str(entry.get("level", "INFO")), str(entry.get("message", "")))
        if kind == "TRACE":
            error = trace_error(message)
            if error is not None:
                raise ConnectException(f"{where} failed: {error}")
        return None
