"""`/connectors/...`: Kafka Connect's ConnectorsResource (connectors, configs, status, tasks, offsets)."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query
from starlette.responses import JSONResponse, Response

from eosconnect.cluster.herder_api import BadRequestError, NotFoundError
from eosconnect.rest.deps import (
    HerderDep,
    check_and_put_name,
    check_connector_name,
    connector_location,
    error_responses,
    require_connector_class,
)
from eosconnect.rest.masking import mask_config, mask_info, mask_status, unmask
from eosconnect.rest.models import (
    ActiveTopics,
    ConnectorConfig,
    ConnectorConfigPatch,
    ConnectorInfo,
    ConnectorOffsets,
    ConnectorStateInfo,
    CreateConnectorRequest,
    Message,
    TaskInfo,
    TaskState,
)

log = logging.getLogger("eosconnect.rest")

router = APIRouter(prefix="/connectors", tags=["connectors"])

_PRIMITIVES = (str, int, float, bool, type(None))


@router.get(
    "",
    summary="List connectors",
    description=(
        "The names of all connectors. With `expand=status` and/or `expand=info` (repeatable), a map "
        'from each name to `{"status": ..., "info": ...}`; unknown expansions are ignored.'
    ),
    responses={
        200: {
            "description": "Connector names, or the expanded map",
            "content": {
                "application/json": {
                    "schema": {
                        "oneOf": [
                            {"type": "array", "items": {"type": "string"}},
                            {"type": "object", "additionalProperties": {"type": "object"}},
                        ]
                    }
                }
            },
        }
    },
    response_model=None,
)
def list_connectors(
    herder: HerderDep,
    expand: Annotated[
        list[str] | None, Query(description="status and/or info; repeat the parameter for both")
    ] = None,
) -> Response:
    names = herder.connectors()
    if expand is None:
        return JSONResponse(names)
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        entry: dict[str, Any] = {}
        try:
            for expansion in expand:
                if expansion == "status":
                    entry["status"] = _status(herder, name)
                elif expansion == "info":
                    entry["info"] = mask_info(herder.connector_info(name))
                else:
                    log.info("Ignoring unknown expansion type %s", expansion)
        except NotFoundError:
            # Deleted while we looked it up: leave it out, as Kafka Connect does.
            continue
        out[name] = entry
    return JSONResponse(out)


@router.post(
    "",
    status_code=201,
    summary="Create a connector",
    description='Body `{"name", "config", "initial_state"?}`. 409 if the connector exists.',
    responses={201: {"model": ConnectorInfo, "description": "Created"}, **error_responses(400, 409, 500)},
    response_model=None,
)
def create_connector(body: CreateConnectorRequest, herder: HerderDep) -> Response:
    name = body.name.strip()
    check_connector_name(name)
    config = dict(body.config)
    check_and_put_name(name, config, where="the request body")
    require_connector_class(config)
    if body.initial_state in (None, "RUNNING"):
        _, info = herder.put_connector_config(name, config, False)
    else:
        info = herder.create_connector(name, config, body.initial_state)
    return JSONResponse(mask_info(info), status_code=201, headers={"Location": connector_location(name)})


@router.get(
    "/{connector}",
    summary="Get a connector's name, config, tasks and type",
    responses={200: {"model": ConnectorInfo}, **error_responses(404, 500)},
    response_model=None,
)
def get_connector(connector: str, herder: HerderDep) -> Response:
    return JSONResponse(mask_info(herder.connector_info(connector)))


@router.delete(
    "/{connector}",
    status_code=204,
    summary="Delete a connector",
    responses={204: {"description": "Deleted"}, **error_responses(404, 409, 500)},
    response_model=None,
)
def delete_connector(connector: str, herder: HerderDep) -> Response:
    herder.delete_connector(connector)
    return Response(status_code=204)


@router.get(
    "/{connector}/config",
    summary="Get a connector's configuration",
    responses={
        200: {
            "content": {
                "application/json": {"schema": {"type": "object", "additionalProperties": {"type": "string"}}}
            }
        },
        **error_responses(404, 500),
    },
    response_model=None,
)
def get_connector_config(connector: str, herder: HerderDep) -> Response:
    """Secrets (PASSWORD settings, clients' passwords) answer `[hidden]`, as in Kafka (rest/masking.py)."""
    return JSONResponse(mask_config(herder.connector_config(connector)))


@router.put(
    "/{connector}/config",
    summary="Create or replace a connector's configuration",
    description="201 when the connector was created, 200 when an existing one was reconfigured.",
    responses={
        200: {"model": ConnectorInfo, "description": "Reconfigured"},
        201: {"model": ConnectorInfo, "description": "Created"},
        **error_responses(400, 409, 500),
    },
    response_model=None,
)
def put_connector_config(
    connector: str,
    config: Annotated[ConnectorConfig, Body(description="The full configuration")],
    herder: HerderDep,
) -> Response:
    config = unmask(dict(config), _stored_config(herder, connector))
    check_and_put_name(connector, config)
    require_connector_class(config)
    created, info = herder.put_connector_config(connector, config, True)
    if created:
        return JSONResponse(
            mask_info(info), status_code=201, headers={"Location": connector_location(connector)}
        )
    return JSONResponse(mask_info(info), status_code=200)


def _stored_config(herder: Any, connector: str) -> dict[str, str] | None:
    """The connector's stored config, to keep the secrets a config sent back as `[hidden]` has."""
    try:
        return dict(herder.connector_config(connector))
    except NotFoundError:
        return None


@router.patch(
    "/{connector}/config",
    summary="Patch a connector's configuration",
    description="Keys with values are set, keys with null values are removed; other keys stay.",
    responses={
        200: {"model": ConnectorInfo, "description": "Reconfigured"},
        **error_responses(400, 404, 409, 500),
    },
    response_model=None,
)
def patch_connector_config(
    connector: str,
    patch: Annotated[ConnectorConfigPatch, Body(description="The keys to change (null removes a key)")],
    herder: HerderDep,
) -> Response:
    stored = dict(herder.connector_config(connector))
    merged = dict(stored)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    merged = unmask(merged, stored)
    check_and_put_name(connector, merged)
    require_connector_class(merged)
    _, info = herder.put_connector_config(connector, merged, True)
    return JSONResponse(mask_info(info), status_code=200)


@router.get(
    "/{connector}/status",
    summary="Get a connector's and its tasks' states",
    responses={200: {"model": ConnectorStateInfo}, **error_responses(404)},
    response_model=None,
)
def get_connector_status(connector: str, herder: HerderDep) -> Response:
    return JSONResponse(_status(herder, connector))


@router.get(
    "/{connector}/topics",
    summary="Get the topics a connector has used",
    description='`{"<connector>": {"topics": [...]}}`; an unknown connector has none (200, as in Kafka).',
    responses={200: {"model": ActiveTopics}},
    response_model=None,
)
def get_connector_topics(connector: str, herder: HerderDep) -> Response:
    return JSONResponse({connector: {"topics": list(herder.connector_topics(connector))}})


@router.put(
    "/{connector}/topics/reset",
    status_code=202,
    summary="Reset the set of topics a connector has used (KIP-558)",
    responses={202: {"description": "Reset accepted (also for an unknown connector, as in Kafka)"}},
    response_model=None,
)
def reset_connector_topics(connector: str, herder: HerderDep) -> Response:
    herder.reset_connector_topics(connector)
    return Response(status_code=202)


@router.post(
    "/{connector}/restart",
    summary="Restart a connector (and optionally its tasks)",
    description=(
        "Without flags, restarts the connector only: 204. With `includeTasks` and/or `onlyFailed`, "
        "202 with the status the connector and tasks are restarted into."
    ),
    responses={
        202: {"model": ConnectorStateInfo, "description": "Restart accepted"},
        204: {"description": "Connector restarted"},
        **error_responses(404, 409, 500),
    },
    response_model=None,
)
def restart_connector(
    connector: str,
    herder: HerderDep,
    include_tasks: Annotated[bool, Query(alias="includeTasks", description="Also restart the tasks")] = False,
    only_failed: Annotated[
        bool, Query(alias="onlyFailed", description="Restart only the failed connector/tasks")
    ] = False,
) -> Response:
    result = herder.restart_connector(connector, include_tasks, only_failed)
    if not include_tasks and not only_failed:
        return Response(status_code=204)
    if result is None:
        result = herder.connector_status(connector)
    return JSONResponse(mask_status(result, _config(herder, connector)), status_code=202)


@router.put(
    "/{connector}/pause",
    status_code=202,
    summary="Pause a connector and its tasks",
    responses={202: {"description": "Pause accepted"}, **error_responses(404, 500)},
    response_model=None,
)
def pause_connector(connector: str, herder: HerderDep) -> Response:
    herder.pause_connector(connector)
    return Response(status_code=202)


@router.put(
    "/{connector}/resume",
    status_code=202,
    summary="Resume a paused or stopped connector",
    responses={202: {"description": "Resume accepted"}, **error_responses(404, 500)},
    response_model=None,
)
def resume_connector(connector: str, herder: HerderDep) -> Response:
    herder.resume_connector(connector)
    return Response(status_code=202)


@router.put(
    "/{connector}/stop",
    status_code=204,
    summary="Stop a connector: shut down its tasks and keep its config (offsets can then be changed)",
    responses={204: {"description": "Stopped"}, **error_responses(404, 409, 500)},
    response_model=None,
)
def stop_connector(connector: str, herder: HerderDep) -> Response:
    herder.stop_connector(connector)
    return Response(status_code=204)


@router.get(
    "/{connector}/acls",
    summary="The Kafka ACLs the worker and this connector need (eosconnect extension)",
    description="KIP-618's tables under the worker's current settings: each principal, operation, "
    "resource type and name, and the `kafka-acls.sh` commands that grant them.",
    responses={
        200: {"content": {"application/json": {"schema": {"type": "object"}}}},
        **error_responses(404),
    },
    response_model=None,
)
def get_connector_acls(connector: str, herder: HerderDep) -> Response:
    return JSONResponse(herder.connector_acls(connector))


@router.get(
    "/{connector}/tasks",
    summary="List a connector's tasks and their configurations",
    responses={200: {"model": list[TaskInfo]}, **error_responses(404, 409, 500)},
    response_model=None,
)
def get_task_configs(connector: str, herder: HerderDep) -> Response:
    configs = herder.task_configs(connector)
    return JSONResponse(mask_info(configs, herder.connector_config(connector)))


@router.get(
    "/{connector}/tasks/{task}/status",
    summary="Get a task's state",
    responses={200: {"model": TaskState}, **error_responses(404)},
    response_model=None,
)
def get_task_status(connector: str, task: int, herder: HerderDep) -> Response:
    return JSONResponse(mask_status(herder.task_status(connector, task), _config(herder, connector)))


@router.post(
    "/{connector}/tasks/{task}/restart",
    status_code=204,
    summary="Restart a task",
    responses={204: {"description": "Restarted"}, **error_responses(404, 409, 500)},
    response_model=None,
)
def restart_task(connector: str, task: int, herder: HerderDep) -> Response:
    herder.restart_task(connector, task)
    return Response(status_code=204)


@router.get(
    "/{connector}/offsets",
    summary="Get a connector's committed offsets",
    responses={200: {"model": ConnectorOffsets}, **error_responses(404, 500)},
    response_model=None,
)
def get_offsets(connector: str, herder: HerderDep) -> Response:
    return JSONResponse(herder.connector_offsets(connector))


@router.post(
    "/{connector}/signals",
    summary="Send a signal to a connector's running task (Debezium's signals)",
    description=(
        'Body `{"type": "execute-snapshot", "data": {"data-collections": ["public\\\\.orders"]}}`. '
        "The connector passes it to its task through its own channel (PostgresCdcSource: the signal "
        "table `signal.data.collection`, else the Kafka signal topic); 400 when it takes no signals "
        "or has no channel."
    ),
    responses={200: {"model": Message}, **error_responses(400, 404, 500)},
    response_model=None,
)
def post_signal(
    connector: str,
    herder: HerderDep,
    body: Annotated[dict[str, Any], Body(description='{"type": ..., "data": {...}}')],
) -> Response:
    from eosconnect.api.errors import ConfigException
    from eosconnect.api.source import AcceptsSignals
    from eosconnect.plugins.loading import resolve_connector_class

    config = herder.connector_config(connector)  # NotFoundError (404) for an unknown connector
    signal_type, data = body.get("type"), body.get("data")
    if not isinstance(signal_type, str) or not signal_type:
        raise BadRequestError('the body must be {"type": "<signal type>", "data": {...}}: type is missing')
    if data is not None and not isinstance(data, dict):
        raise BadRequestError(f"data must be a JSON object, not {data!r}")
    instance = resolve_connector_class(config.get("connector.class", ""))()
    if not isinstance(instance, AcceptsSignals):
        raise BadRequestError(f"connector {connector} ({config.get('connector.class')}) takes no signals")
    try:
        message = instance.signal(config, signal_type, data)
    except ConfigException as exc:
        raise BadRequestError(str(exc)) from exc
    log.info("connector %s: %s", connector, message)
    return JSONResponse({"message": message}, status_code=200)


def _check_primitive_map(where: str, values: dict[str, Any]) -> None:
    for key, value in values.items():
        if not isinstance(value, _PRIMITIVES):
            raise BadRequestError(
                f"{where} values must be primitives (string, number, boolean or null); "
                f"{key!r} is {type(value).__name__}"
            )


@router.patch(
    "/{connector}/offsets",
    summary="Alter the offsets of a STOPPED connector",
    description='Body `{"offsets": [{"partition": {...}, "offset": {...} | null}]}`; null removes one.',
    responses={200: {"model": Message}, **error_responses(400, 404, 409, 500)},
    response_model=None,
)
def alter_offsets(connector: str, body: ConnectorOffsets, herder: HerderDep) -> Response:
    if not body.offsets:
        raise BadRequestError("Partitions / offsets need to be provided for an alter offsets request")
    entries = []
    for item in body.offsets:
        _check_primitive_map("Partition", item.partition)
        if item.offset is not None:
            _check_primitive_map("Offset", item.offset)
        entries.append({"partition": item.partition, "offset": item.offset})
    message = herder.alter_connector_offsets(connector, entries)
    return JSONResponse({"message": message}, status_code=200)


@router.delete(
    "/{connector}/offsets",
    summary="Reset (delete) all offsets of a STOPPED connector",
    responses={200: {"model": Message}, **error_responses(400, 404, 409, 500)},
    response_model=None,
)
def reset_offsets(connector: str, herder: HerderDep) -> Response:
    return JSONResponse({"message": herder.reset_connector_offsets(connector)}, status_code=200)


def _config(herder: Any, connector: str) -> dict[str, Any]:
    """The connector's stored config, for masking its traces (empty when it cannot be read)."""
    try:
        return dict(herder.connector_config(connector) or {})
    except Exception:  # the status answer does not depend on it
        return {}


def _status(herder: Any, connector: str) -> Any:
    """The connector's status with its traces scrubbed of secrets (`mask_status`)."""
    return mask_status(herder.connector_status(connector), _config(herder, connector))
