"""`SingerSource`: a Singer tap (`tap-*`, `pipelinewise-tap-*`, singer-sdk taps) as an
exactly-once source connector, with `transaction.boundary=connector` (exactly-once support is
UNSUPPORTED with other boundaries, as the default config shows below).

Singer's STATE is one object for the whole tap: one source offset `{"singer.state": "GLOBAL"}`.
Taps resume INCREMENTAL streams inclusively (`replication_key >= bookmark`, so rows sharing the
bookmark's value are not missed): the first records of a resumed stream may be ones already
delivered. The offset therefore also keeps, per stream, the bookmark's value and the keys of the
records delivered with it, and a resumed sync drops exactly those records again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from eosconnect.api.config import ConfigDef
from eosconnect.api.errors import ConfigException, ConnectException
from eosconnect.api.source import (
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SourceConnector,
    SourceTask,
)
from eosconnect.connectors.hosted import singer_catalog as cfg
from eosconnect.connectors.hosted.airbyte_catalog import source_config
from eosconnect.connectors.hosted.airbyte_protocol import StateMessage
from eosconnect.connectors.hosted.commands import private_files
from eosconnect.connectors.hosted.executables import resolve_executable
from eosconnect.connectors.hosted.json_schema import StreamSchema
from eosconnect.connectors.hosted.process import preview
from eosconnect.connectors.hosted.task import Event, HostedSourceTask, RecordData

__all__ = ["SingerSourceConnector", "SingerSourceTask"]

VERSION = "1.0.0"
#: Keys of records delivered with a bookmark's value kept at most per stream (ties of a timestamp).
MAX_TIES = 10_000
KNOWN = frozenset({"SCHEMA", "RECORD", "STATE", "ACTIVATE_VERSION", "BATCH"})


def _config_json(values: Mapping[str, Any]) -> dict[str, Any]:
    try:
        return source_config(values[cfg.TAP_CONFIG])
    except ConfigException as exc:
        raise ConfigException(
            errors={cfg.TAP_CONFIG: [m for ms in exc.errors.values() for m in ms]}
        ) from None


def discover(executable: str, tap_config: Mapping[str, Any]) -> dict[str, Any]:
    import subprocess

    with private_files(config=dict(tap_config)) as paths:
        try:
            done = subprocess.run(
                [executable, "--config", paths["config"], "--discover"],
                capture_output=True,
                timeout=120,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ConnectException(f"{executable} --discover failed: {exc}") from exc
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-10:]
        raise ConnectException(
            f"{executable} --discover exited with code {done.returncode}: " + "\n".join(tail)
        )
    try:
        catalog = json.loads(done.stdout)
    except ValueError:
        raise ConnectException(
            f"{executable} --discover printed no JSON catalog: {preview(done.stdout[:400])!r}"
        ) from None
    if not isinstance(catalog, dict):
        raise ConnectException(f"{executable} --discover printed no JSON catalog")
    return catalog


class SingerSourceConnector(SourceConnector):
    """Reads the streams of a Singer tap into `<topic.prefix>.<tap_stream_id>`, exactly once for
    INCREMENTAL streams.

    `singer.tap` names the tap, `singer.config` its config (JSON), `singer.streams` the streams
    (all when empty). The connector runs `--discover`, selects the streams and sets their
    replication (see `singer_catalog`); tasks run syncs with `--config`, `--catalog` (or
    `--properties`) and `--state`. SCHEMA messages give the value schemas (Structs, or schemaless
    JSON), key properties the record keys; every STATE closes a transaction (with
    `transaction.boundary=connector`) and is what a restarted tap resumes from. A FULL_TABLE
    stream is read whole at every sync, its records carrying the sync's id
    (`eosconnect.sync.id`) and the tap's table version (`singer.version`). One task: a tap's
    state is one object for all its streams.
    """

    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConfigDef:
        return cfg.CONFIG_DEF

    def start(self, config: dict[str, str]) -> None:
        values = cfg.CONFIG_DEF.parse(config)
        self._config = dict(config)
        executable = resolve_executable(values[cfg.TAP], values[cfg.VENV_DIR], cfg.TAP)
        catalog = discover(executable, _config_json(values))
        self._catalog = cfg.select_streams(catalog, values[cfg.STREAMS], values[cfg.REPLICATION_KEYS])

    def task_class(self) -> type[SourceTask]:
        return SingerSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{**self._config, cfg.TASK_CATALOG: json.dumps(self._catalog), cfg.TASK_INDEX: "0"}]

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        if str(config.get("transaction.boundary", "poll")).lower() != "connector":
            return ExactlyOnceSupport.UNSUPPORTED
        return ExactlyOnceSupport.SUPPORTED

    def can_define_transaction_boundaries(self, config: Mapping[str, str]) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED


class _Ties:
    """The keys of a stream's records delivered with its latest replication key value."""

    def __init__(self) -> None:
        self.value: Any = None
        self.keys: list[Any] = []

    def add(self, value: Any, key: Any) -> None:
        if value != self.value:
            self.value, self.keys = value, []
        if len(self.keys) < MAX_TIES:
            self.keys.append(key)


class SingerSourceTask(HostedSourceTask):
    """Runs syncs of the tap (see `SingerSourceConnector`)."""

    offset_prefix = "singer"
    task_index_key = cfg.TASK_INDEX

    def version(self) -> str:
        return VERSION

    def setup(self, config: dict[str, str]) -> None:
        values = cfg.CONFIG_DEF.parse(config)
        self.executable = resolve_executable(values[cfg.TAP], values[cfg.VENV_DIR], cfg.TAP)
        self.tap_config = _config_json(values)
        self.topic_prefix = values[cfg.TOPIC_PREFIX]
        self.schemaless = values[cfg.SCHEMALESS]
        self.batch_size = values[cfg.BATCH_SIZE]
        self.sync_interval_s = values[cfg.SYNC_INTERVAL] / 1000
        self.catalog_flag = values[cfg.CATALOG_FLAG]
        self.catalog = json.loads(config[cfg.TASK_CATALOG])
        self.replication_keys: dict[str, str] = {}
        for entry in self.catalog["streams"]:
            selected = cfg.Selected(entry)
            self.streams[selected.stream_id] = StreamSchema(selected.stream_id, entry.get("schema") or {})
            self.primary_keys[selected.stream_id] = [[k] for k in selected.key_properties]
            if selected.incremental and selected.replication_key:
                self.replication_keys[selected.stream_id] = selected.replication_key
            else:
                self.full_refresh.add(selected.stream_id)
        self._ties: dict[str, _Ties] = {}
        self._skip: dict[str, tuple[Any, set[str]]] = {}
        self._version: dict[str, Any] = {}

    def start(self, config: dict[str, str]) -> None:
        super().start(config)
        self._arm_skips()

    def _arm_skips(self) -> None:
        """The records a resumed sync repeats: delivered with their stream's bookmark value."""
        body = self.checkpoints.latest.get("GLOBAL") or {}
        self._skip = {
            stream: (tie.get("value"), {json.dumps(k, sort_keys=True) for k in tie.get("keys", [])})
            for stream, tie in (body.get("delivered") or {}).items()
        }

    def _start_sync(self) -> Any:
        self._arm_skips()
        self._ties = {}
        return super()._start_sync()

    def sync_files(self, state: Any) -> dict[str, Any]:
        files: dict[str, Any] = {"config": self.tap_config, "catalog": self.catalog}
        body = self.checkpoints.latest.get("GLOBAL")
        if body is not None and body.get("value") is not None:
            files["state"] = body["value"]
        return files

    def sync_argv(self, paths: Mapping[str, str]) -> list[str]:
        argv = [self.executable, "--config", paths["config"], self.catalog_flag, paths["catalog"]]
        if "state" in paths:
            argv += ["--state", paths["state"]]
        return argv

    def interpret(self, line: str, where: str) -> Event:
        try:
            message = json.loads(line)
        except ValueError as exc:
            raise ConnectException(
                f"{where} printed a line that is not JSON ({exc}): {preview(line)!r}"
            ) from None
        kind = message.get("type") if isinstance(message, dict) else None
        if kind not in KNOWN:
            raise ConnectException(
                f"{where} printed a line that is not a Singer message (type {kind!r}): {preview(line)!r}"
            )
        if kind == "RECORD":
            return self._record_event(message, where, line)
        if kind == "STATE":
            return self._state_event(message)
        if kind == "SCHEMA":
            self._schema(message, where, line)
        elif kind == "ACTIVATE_VERSION":
            self.log.info(
                "%s: stream %s activates table version %s",
                self.label,
                message.get("stream"),
                message.get("version"),
            )
        return None

    def _schema(self, message: Mapping[str, Any], where: str, line: str) -> None:
        stream = message.get("stream")
        if not isinstance(stream, str) or not isinstance(message.get("schema"), dict):
            raise ConnectException(
                f"{where} printed a SCHEMA without a stream and a schema: {preview(line)!r}"
            )
        if stream not in self.streams:
            return
        self.streams[stream] = StreamSchema(stream, message["schema"])
        keys = message.get("key_properties")
        if isinstance(keys, list) and keys:
            self.primary_keys[stream] = [[str(k)] for k in keys]
        self._key_schemas[stream] = self._key_schema(stream)

    def _record_event(self, message: Mapping[str, Any], where: str, line: str) -> Event:
        stream, data = message.get("stream"), message.get("record")
        if not isinstance(stream, str) or not isinstance(data, dict):
            raise ConnectException(
                f"{where} printed a RECORD without a stream and a record object: {preview(line)!r}"
            )
        self._version[stream] = message.get("version")
        column = self.replication_keys.get(stream)
        if column is not None:
            key = [data.get(k) for k in (p[0] for p in self.primary_keys.get(stream) or [])]
            skip = self._skip.get(stream)
            if skip is not None:
                if data.get(column) == skip[0] and json.dumps(key, sort_keys=True) in skip[1]:
                    return None  # delivered with the committed bookmark; the tap resumes inclusively
                del self._skip[stream]
            self._ties.setdefault(stream, _Ties()).add(data.get(column), key)
        return RecordData(stream, data, None)

    def _state_event(self, message: Mapping[str, Any]) -> StateMessage:
        value = message.get("value")
        bookmarks = (value or {}).get("bookmarks", {}) if isinstance(value, dict) else {}
        delivered = {}
        for stream, bookmark in bookmarks.items():
            tie = self._ties.get(stream)
            if (
                isinstance(bookmark, dict)
                and tie is not None
                and bookmark.get("replication_key_value") == tie.value
            ):
                delivered[stream] = {"value": tie.value, "keys": tie.keys}
            elif stream in self._skip:  # nothing new of it in this sync: what it skips still holds
                delivered[stream] = {
                    "value": self._skip[stream][0],
                    "keys": [json.loads(k) for k in self._skip[stream][1]],
                }
        return StateMessage("GLOBAL", None, {"value": value, "delivered": delivered}, None)

    def headers(self, stream: str) -> list[tuple[str, str]] | None:
        headers = super().headers(stream)
        version = self._version.get(stream)
        if headers is not None and version is not None:
            headers.append(("singer.version", str(version)))
        return headers
