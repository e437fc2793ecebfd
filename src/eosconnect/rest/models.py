"""Request and response bodies of the REST API (Kafka Connect's JSON shapes), as pydantic models.

Request models parse and check what clients send; response models document the answers in the
OpenAPI document (the routes return the herder's dicts as they are, so a field the herder adds
later is not dropped).

Connector configs are `Map<String, String>` in Kafka Connect, and its JSON mapper turns numbers
and booleans into strings (`"tasks.max": 1` works). We do the same: numbers become their decimal
text, booleans `"true"`/`"false"`; objects, arrays and (outside PATCH) nulls are refused with 400.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema, field_validator

__all__ = [
    "ActiveTopics",
    "ConfigInfos",
    "ConnectorConfig",
    "ConnectorConfigPatch",
    "ConnectorInfo",
    "ConnectorOffsets",
    "ConnectorStateInfo",
    "CreateConnectorRequest",
    "ErrorMessage",
    "Health",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "LoggerLevel",
    "LoggerLevelRequest",
    "Message",
    "PluginInfo",
    "ServerInfo",
    "TaskInfo",
    "TaskState",
    "config_value_text",
]

_JSON_TYPE: dict[type, str] = {dict: "an object", list: "an array"}


def config_value_text(key: str, value: Any, *, allow_null: bool = False) -> str | None:
    """One config value as Kafka Connect stores it: a string."""
    if value is None:
        if allow_null:
            return None
        raise ValueError(f"the value of {key!r} is null; leave the key out instead")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    kind = _JSON_TYPE.get(type(value), type(value).__name__)
    raise ValueError(f"the value of {key!r} must be a string (or a number or boolean), not {kind}")


def _strings(config: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in config.items():
        text = config_value_text(key, value)
        assert text is not None
        out[key] = text
    return out


def _strings_or_null(config: dict[str, Any]) -> dict[str, str | None]:
    return {key: config_value_text(key, value, allow_null=True) for key, value in config.items()}


ConnectorConfig = Annotated[
    dict[str, Any],
    AfterValidator(_strings),
    WithJsonSchema({"type": "object", "additionalProperties": {"type": "string"}}),
]
"""A connector configuration: string keys and string values (numbers and booleans accepted)."""

ConnectorConfigPatch = Annotated[
    dict[str, Any],
    AfterValidator(_strings_or_null),
    WithJsonSchema({"type": "object", "additionalProperties": {"type": ["string", "null"]}}),
]
"""A PATCH of a connector configuration: a null value removes the key."""


# ---------------------------------------------------------------- requests


class CreateConnectorRequest(BaseModel):
    """`POST /connectors`: `{"name", "config", "initial_state"?}`; any other field is a 400."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The connector's name (leading and trailing blanks are trimmed)")
    config: ConnectorConfig = Field(description="The connector configuration; must contain connector.class")
    initial_state: Literal["RUNNING", "PAUSED", "STOPPED"] | None = Field(
        default=None, description="The connector's target state when created (KIP-980); RUNNING by default"
    )

    @field_validator("initial_state", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value


class PartitionOffset(BaseModel):
    model_config = ConfigDict(extra="forbid")

    partition: dict[str, Any] = Field(description='The source partition, e.g. {"filename": "a.txt"}')
    offset: dict[str, Any] | None = Field(
        description="The source offset; null removes the partition's offset"
    )


class ConnectorOffsets(BaseModel):
    """`{"offsets": [{"partition": {...}, "offset": {...}}]}`."""

    model_config = ConfigDict(extra="forbid")

    offsets: list[PartitionOffset]


class LoggerLevelRequest(BaseModel):
    level: str | None = Field(
        default=None, description="DEBUG, INFO, WARNING (WARN), ERROR, CRITICAL (FATAL), ..."
    )


class FenceRequest(BaseModel):
    """A starting exactly-once task's fencing request (internal, signed); the body is optional."""

    generation: int | None = Field(
        default=None,
        description="The generation the task belongs to; lets the leader answer from memory when that "
        "generation's fencing round is already done",
    )


class HeartbeatRequest(BaseModel):
    """A running task's report to its worker (internal, signed)."""

    model_config = ConfigDict(extra="allow")

    generation: int = Field(description="The task's generation (set of task configs) it runs")
    state: str = Field(description="RUNNING, PAUSED, FAILED, ...")
    trace: str | None = Field(default=None, description="The failure's trace when FAILED")
    metrics: dict[str, Any] | None = Field(default=None, description="TaskMetrics.snapshot() of the task")
    instance: str | None = Field(
        default=None, description="The task's launch; an instance replaced by a newer one is told to stop"
    )
    confirm: bool = Field(
        default=False,
        description="Asks whether this instance is the task's current one, before it renews its producer; "
        "a leader in doubt answers 409",
    )


# ---------------------------------------------------------------- responses (documentation)


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ErrorMessage(BaseModel):
    error_code: int
    message: str


class Message(BaseModel):
    message: str


class ServerInfo(_Open):
    version: str
    commit: str
    kafka_cluster_id: str | None


class Health(_Open):
    status: str
    message: str


class ConnectorTaskId(_Open):
    connector: str
    task: int


class ConnectorInfo(_Open):
    name: str
    config: dict[str, str]
    tasks: list[ConnectorTaskId]
    type: str | None = None


class ConnectorState(_Open):
    state: str
    worker_id: str | None = None
    trace: str | None = None


class TaskState(_Open):
    id: int
    state: str
    worker_id: str | None = None
    trace: str | None = None


class ConnectorStateInfo(_Open):
    name: str
    connector: ConnectorState
    tasks: list[TaskState]
    type: str | None = None


class TaskInfo(_Open):
    id: ConnectorTaskId
    config: dict[str, Any]


class TopicsInfo(_Open):
    topics: list[str]


ActiveTopics = dict[str, TopicsInfo]


class PluginInfo(_Open):
    class_: str = Field(alias="class")
    type: str
    version: str | None = None


class ConfigKeyInfo(_Open):
    name: str
    type: str | None = None
    required: bool | None = None
    default_value: str | None = None
    importance: str | None = None
    documentation: str | None = None
    group: str | None = None
    order_in_group: int | None = None
    width: str | None = None
    display_name: str | None = None
    dependents: list[str] | None = None


class ConfigValueInfo(_Open):
    name: str
    value: str | None = None
    recommended_values: list[str] = []
    errors: list[str] = []
    visible: bool = True


class ConfigInfo(_Open):
    definition: ConfigKeyInfo | None
    value: ConfigValueInfo


class ConfigInfos(_Open):
    name: str
    error_count: int
    groups: list[str]
    configs: list[ConfigInfo]


class LoggerLevel(BaseModel):
    level: str
    last_modified: int | None = Field(description="When the level was last set through the API (ms), or null")


class HeartbeatResponse(BaseModel):
    directive: Literal["run", "pause", "stop"]
