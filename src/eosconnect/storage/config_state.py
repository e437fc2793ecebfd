"""The config topic's records and the state they add up to, without any Kafka I/O.

Records are Kafka Connect's (JSON without schemas), so `kcat` users and Java workers read the same
topic: `connector-<c>`, `task-<c>-<i>`, `commit-<c>`, `tasks-fencing-<c>`, `target-state-<c>`,
`session-key`. This module turns a sequence of (key, value) pairs into an immutable `ConfigSnapshot`
following Kafka's rules, so the rules can be unit-tested and the store only moves bytes:

- Task configs are *held back* until a `commit-<c>` record closes the set. A set is written as
  several records, and applying half of a new set next to half of the old one would assign a source
  partition to two tasks. A commit whose set is incomplete (compaction removed a record, or the
  writer died half way) makes the connector *inconsistent*: its task configs must not be used until
  a complete set is committed.
- Each commit starts a new *generation* of task configs (0 for the first one read) and makes the
  connector *pending fencing* until a `tasks-fencing-<c>` (task-count) record follows it (KIP-618):
  only then may tasks of that generation start.
- A null value for `connector-<c>` deletes the connector and its task configs. Generation counters
  and task-count records survive, as in Kafka: if the connector comes back, its old task producers
  must still be fenced and its generations keep increasing.
- A record that is not JSON, or has the wrong shape, is skipped with a WARNING naming its key and
  offset. One bad record (a hand-written `kcat -P`, a newer format) must not stop a worker.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from eosconnect.storage.session_key import SessionKey

__all__ = [
    "COMMIT_PREFIX",
    "CONNECTOR_PREFIX",
    "SESSION_KEY_KEY",
    "TARGET_STATE_PREFIX",
    "TASK_COUNT_PREFIX",
    "TASK_PREFIX",
    "ConfigSnapshot",
    "ConfigStateBuilder",
    "TargetState",
    "build_snapshot",
    "commit_key",
    "connector_key",
    "encode_commit",
    "encode_connector_config",
    "encode_session_key",
    "encode_target_state",
    "encode_task_config",
    "encode_task_count",
    "target_state_key",
    "task_count_key",
    "task_key",
]

log = logging.getLogger(__name__)

CONNECTOR_PREFIX = "connector-"
TASK_PREFIX = "task-"
COMMIT_PREFIX = "commit-"
TASK_COUNT_PREFIX = "tasks-fencing-"
TARGET_STATE_PREFIX = "target-state-"
SESSION_KEY_KEY = "session-key"
#: Kafka Connect record types this runtime does not act on; skipped quietly (they are not garbage).
FOREIGN_PREFIXES = ("restart-connector-",)
#: KIP-976: `logger-cluster-<namespace>` = `{"level": "DEBUG"}`, applied by every worker.
LOGGER_CLUSTER_PREFIX = "logger-cluster-"

Props = Mapping[str, str]


class TargetState(StrEnum):
    """What the operator wants a connector to do (`target-state-<c>`)."""

    STARTED = "STARTED"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"


# ------------------------------------------------------------------------------------- encoding


def connector_key(connector: str) -> str:
    return CONNECTOR_PREFIX + connector


def task_key(connector: str, task: int) -> str:
    return f"{TASK_PREFIX}{connector}-{task}"


def commit_key(connector: str) -> str:
    return COMMIT_PREFIX + connector


def task_count_key(connector: str) -> str:
    return TASK_COUNT_PREFIX + connector


def target_state_key(connector: str) -> str:
    return TARGET_STATE_PREFIX + connector


def _json(value: Mapping[str, Any]) -> bytes:
    # Compact like Java's JsonConverter; non-ASCII stays UTF-8 as Jackson writes it.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _check_props(what: str, props: Mapping[str, Any]) -> dict[str, str]:
    bad = [k for k, v in props.items() if not isinstance(k, str) or not isinstance(v, str)]
    if bad:
        raise ValueError(f"{what} must map strings to strings; wrong entries: {bad[:5]}")
    return dict(props)


def encode_connector_config(props: Mapping[str, str]) -> bytes:
    return _json({"properties": _check_props("a connector config", props)})


def encode_task_config(props: Mapping[str, str]) -> bytes:
    return _json({"properties": _check_props("a task config", props)})


def encode_commit(task_count: int) -> bytes:
    return _json({"tasks": _count("task count", task_count)})


def encode_task_count(task_count: int) -> bytes:
    return _json({"task-count": _count("task count", task_count)})


def encode_target_state(state: TargetState | str) -> bytes:
    """Kafka 3.5+'s shape: `state.v2` holds the state; `state` says PAUSED for STOPPED for older readers."""
    st = TargetState(state)
    return _json({"state": TargetState.PAUSED if st is TargetState.STOPPED else st, "state.v2": st})


def encode_session_key(key: SessionKey) -> bytes:
    return _json(key.to_record())


def _count(what: str, n: int) -> int:
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"{what} must be a non-negative integer, got {n!r}")
    return n


# ------------------------------------------------------------------------------------- snapshot


def _frozen(d: Mapping[Any, Any]) -> Mapping[Any, Any]:
    return MappingProxyType(dict(d))


@dataclass(frozen=True, eq=False)
class ConfigSnapshot:
    """An immutable view of the config topic up to `offset` (the next offset to read)."""

    offset: int = 0
    connector_configs: Mapping[str, Props] = field(default_factory=dict)
    target_states: Mapping[str, TargetState] = field(default_factory=dict)
    #: Latest committed task configs, exactly `task_count(c)` of them (empty while inconsistent).
    committed_task_configs: Mapping[str, tuple[Props, ...]] = field(default_factory=dict)
    task_counts: Mapping[str, int] = field(default_factory=dict)
    task_count_records: Mapping[str, int] = field(default_factory=dict)
    generations: Mapping[str, int] = field(default_factory=dict)
    connectors_pending_fencing: frozenset[str] = frozenset()
    #: Connectors whose latest commit closed an incomplete set of task configs: do not run them.
    inconsistent: frozenset[str] = frozenset()
    #: Connectors with task configs read but not (yet) committed: held back, not in use.
    uncommitted: frozenset[str] = frozenset()
    session_key: SessionKey | None = None
    #: The key before the latest rotation, if this reader saw one: verify against both.
    previous_session_key: SessionKey | None = None
    #: Records skipped as garbage so far (each was logged).
    skipped: int = 0
    #: Cluster-wide logger levels (KIP-976), namespace -> (level, offset of the record).
    logger_levels: Mapping[str, tuple[str, int]] = field(default_factory=dict)

    def connectors(self) -> list[str]:
        return sorted(self.connector_configs)

    def contains(self, connector: str) -> bool:
        return connector in self.connector_configs

    def connector_config(self, connector: str) -> Props | None:
        return self.connector_configs.get(connector)

    def target_state(self, connector: str) -> TargetState | None:
        """The stored state; STARTED for a connector without one (Kafka's default); None if unknown."""
        state = self.target_states.get(connector)
        if state is None and connector in self.connector_configs:
            return TargetState.STARTED
        return state

    def task_configs(self, connector: str) -> tuple[Props, ...]:
        return self.committed_task_configs.get(connector, ())

    def task_config(self, connector: str, task: int) -> Props | None:
        configs = self.task_configs(connector)
        return configs[task] if 0 <= task < len(configs) else None

    def task_count(self, connector: str) -> int:
        """Number of tasks in the latest commit (0 if none, or the connector was deleted)."""
        return self.task_counts.get(connector, 0)

    def task_count_record(self, connector: str) -> int | None:
        """The latest `tasks-fencing-<c>` value: how many task producers a new round must fence."""
        return self.task_count_records.get(connector)

    def generation(self, connector: str) -> int | None:
        """0 after the first `commit-<c>` read, +1 per further commit; None before any commit."""
        return self.generations.get(connector)

    def pending_fencing(self, connector: str) -> bool:
        """True when the latest commit is not yet followed by a task-count record."""
        return connector in self.connectors_pending_fencing

    def is_inconsistent(self, connector: str) -> bool:
        return connector in self.inconsistent

    def has_uncommitted_task_configs(self, connector: str) -> bool:
        return connector in self.uncommitted

    def session_keys(self) -> list[SessionKey]:
        """The keys to accept on internal requests: current first, then the previous one."""
        return [k for k in (self.session_key, self.previous_session_key) if k is not None]


class _Skip(Exception):
    """A record is garbage; the message says why."""


class ConfigStateBuilder:
    """Applies config-topic records in order; `snapshot()` freezes the result.

    Not thread-safe: the store applies records under its read lock.
    """

    def __init__(self) -> None:
        self.offset = 0
        self.skipped = 0
        self._connectors: dict[str, Props] = {}
        self._target_states: dict[str, TargetState] = {}
        self._task_configs: dict[str, tuple[Props, ...]] = {}
        self._task_counts: dict[str, int] = {}
        self._deferred: dict[str, dict[int, Props]] = {}
        self._inconsistent: set[str] = set()
        self._task_count_records: dict[str, int] = {}
        self._generations: dict[str, int] = {}
        self._pending: set[str] = set()
        self._session_key: SessionKey | None = None
        self._previous_session_key: SessionKey | None = None
        self._logger_levels: dict[str, tuple[str, int]] = {}

    def snapshot(self) -> ConfigSnapshot:
        return ConfigSnapshot(
            offset=self.offset,
            connector_configs=_frozen({c: _frozen(p) for c, p in self._connectors.items()}),
            target_states=_frozen(self._target_states),
            committed_task_configs=_frozen(self._task_configs),
            task_counts=_frozen(self._task_counts),
            task_count_records=_frozen(self._task_count_records),
            generations=_frozen(self._generations),
            connectors_pending_fencing=frozenset(self._pending),
            inconsistent=frozenset(self._inconsistent),
            uncommitted=frozenset(c for c, d in self._deferred.items() if d),
            session_key=self._session_key,
            previous_session_key=self._previous_session_key,
            skipped=self.skipped,
            logger_levels=dict(self._logger_levels),
        )

    def apply(self, key: bytes | str | None, value: bytes | str | None, offset: int | None = None) -> None:
        """Apply one record; `offset` (default: the next one) advances the position."""
        self.offset = (offset if offset is not None else self.offset) + 1
        where = offset if offset is not None else self.offset - 1
        try:
            text_key = _decode_key(key)
            self._dispatch(text_key, _decode_value(value))
        except _Skip as exc:
            self.skipped += 1
            log.warning("Skipping config topic record with key %r at offset %s: %s", key, where, exc)

    # --------------------------------------------------------------------------------- dispatch
    def _dispatch(self, key: str, value: dict[str, Any] | None) -> None:
        if key.startswith(TARGET_STATE_PREFIX):
            self._target_state(key[len(TARGET_STATE_PREFIX) :], value)
        elif key.startswith(CONNECTOR_PREFIX):
            self._connector(key[len(CONNECTOR_PREFIX) :], value)
        elif key.startswith(TASK_PREFIX):
            self._task(key, value)
        elif key.startswith(COMMIT_PREFIX):
            self._commit(key[len(COMMIT_PREFIX) :], value)
        elif key.startswith(TASK_COUNT_PREFIX):
            self._task_count(key[len(TASK_COUNT_PREFIX) :], value)
        elif key == SESSION_KEY_KEY:
            self._session(value)
        elif key.startswith(LOGGER_CLUSTER_PREFIX):
            level = (value or {}).get("level")
            if isinstance(level, str) and key[len(LOGGER_CLUSTER_PREFIX) :]:
                self._logger_levels[key[len(LOGGER_CLUSTER_PREFIX) :]] = (level, self.offset - 1)
            else:
                log.debug("ignoring cluster logger record %r without a level", key)
        elif key.startswith(FOREIGN_PREFIXES):
            log.debug("ignoring config topic record %r: not used by eosconnect", key)
        else:
            raise _Skip("unknown key (not a Kafka Connect config record)")

    def _connector(self, connector: str, value: dict[str, Any] | None) -> None:
        if not connector:
            raise _Skip("empty connector name")
        if value is None:
            log.debug("connector %r deleted (tombstone in the config topic)", connector)
            self._connectors.pop(connector, None)
            self._task_configs.pop(connector, None)
            self._task_counts.pop(connector, None)
            self._deferred.pop(connector, None)
            self._inconsistent.discard(connector)
            return
        self._connectors[connector] = _props(value)

    def _target_state(self, connector: str, value: dict[str, Any] | None) -> None:
        if value is None:
            self._target_states.pop(connector, None)
            return
        raw = value.get("state.v2")
        if not isinstance(raw, str):
            raw = value.get("state")  # written by a worker older than Kafka 3.5
        if not isinstance(raw, str):
            raise _Skip("'state' should be a string")
        try:
            self._target_states[connector] = TargetState(raw)
        except ValueError as exc:
            raise _Skip(f"unknown target state {raw!r}") from exc

    def _task(self, key: str, value: dict[str, Any] | None) -> None:
        connector, sep, index = key[len(TASK_PREFIX) :].rpartition("-")
        if not sep or not connector or not index.isdigit():
            raise _Skip("not a task key (task-<connector>-<number>)")
        if value is None:
            raise _Skip("task configs are never deleted with a null value")
        self._deferred.setdefault(connector, {})[int(index)] = _frozen(_props(value))

    def _commit(self, connector: str, value: dict[str, Any] | None) -> None:
        count = _int_field(value, "tasks")
        deferred = self._deferred.pop(connector, {})
        # Only ids 0..count-1 must be present: compaction may leave stale higher ids, which are ignored.
        if all(i in deferred for i in range(count)):
            self._task_configs[connector] = tuple(deferred[i] for i in range(count))
            self._inconsistent.discard(connector)
        else:
            missing = [i for i in range(count) if i not in deferred]
            log.warning(
                "task configs of connector %r are inconsistent: the commit for %d tasks lacks tasks %s; "
                "they will not be used until the connector's task configs are written again",
                connector,
                count,
                missing[:10],
            )
            self._task_configs[connector] = ()
            self._inconsistent.add(connector)
        self._task_counts[connector] = count
        self._generations[connector] = self._generations.get(connector, -1) + 1
        self._pending.add(connector)

    def _task_count(self, connector: str, value: dict[str, Any] | None) -> None:
        self._task_count_records[connector] = _int_field(value, "task-count")
        self._pending.discard(connector)

    def _session(self, value: dict[str, Any] | None) -> None:
        if value is None:
            raise _Skip("the session key is never deleted with a null value")
        try:
            key = SessionKey.from_record(value)
        except ValueError as exc:
            raise _Skip(f"bad session key: {exc}") from exc
        if self._session_key is not None and self._session_key.key != key.key:
            self._previous_session_key = self._session_key
        self._session_key = key


def _decode_key(key: bytes | str | None) -> str:
    if key is None:
        raise _Skip("no key")
    if isinstance(key, str):
        return key
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Skip("key is not UTF-8") from exc


def _decode_value(value: bytes | str | None) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        parsed = json.loads(value)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _Skip(f"value is not JSON: {exc}") from exc
    if parsed is None:
        return None  # JSON `null` is how a schemaless converter writes a tombstone's payload
    if not isinstance(parsed, dict):
        raise _Skip(f"value should be a JSON object but is {type(parsed).__name__}")
    return parsed


def _props(value: dict[str, Any]) -> dict[str, str]:
    props = value.get("properties")
    if not isinstance(props, dict):
        raise _Skip("'properties' should be an object")
    out: dict[str, str] = {}
    for k, v in props.items():
        if v is None:
            continue  # Java Connect allows null values; they mean "not set"
        if not isinstance(v, str):
            raise _Skip(f"property {k!r} should be a string but is {type(v).__name__}")
        out[k] = v
    return out


def _int_field(value: dict[str, Any] | None, name: str) -> int:
    if value is None:
        raise _Skip("unexpected null value")
    n = value.get(name)
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise _Skip(f"{name!r} should be a non-negative integer but is {n!r}")
    return n


def build_snapshot(records: Iterable[tuple[bytes | str | None, bytes | str | None]]) -> ConfigSnapshot:
    """A snapshot from (key, value) pairs in topic order, offsets 0, 1, ... (for tests and tools)."""
    builder = ConfigStateBuilder()
    for key, value in records:
        builder.apply(key, value)
    return builder.snapshot()
