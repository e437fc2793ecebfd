"""`GET /`, `GET /health`, `GET /metrics` and `/admin/loggers`."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.responses import JSONResponse, Response

from eosconnect.cluster.herder_api import BadRequestError, NotFoundError
from eosconnect.rest.deps import HerderDep, error_responses
from eosconnect.rest.loggers import LoggerLevels, parse_level
from eosconnect.rest.metrics import render_metrics_view
from eosconnect.rest.models import Health, LoggerLevel, ServerInfo

log = logging.getLogger("eosconnect.rest")

router = APIRouter()


@router.get(
    "/",
    summary="Worker version, commit and Kafka cluster id",
    tags=["worker"],
    responses={200: {"model": ServerInfo}},
    response_model=None,
)
def server_info(request: Request, herder: HerderDep) -> Response:
    state = request.app.state
    return JSONResponse(
        {"version": state.version, "commit": state.commit, "kafka_cluster_id": herder.kafka_cluster_id()}
    )


@router.get(
    "/health",
    summary="Whether the worker has started and can serve requests (KIP-1017)",
    description="200 healthy; 503 starting (config topic not read or no leader known yet); 500 unhealthy.",
    tags=["worker"],
    responses={
        200: {"model": Health},
        500: {"model": Health, "description": "Unhealthy"},
        503: {"model": Health, "description": "Starting"},
    },
    response_model=None,
)
def health(herder: HerderDep) -> Response:
    try:
        status_code, status, message = herder.health()
    except Exception as exc:
        log.warning("health check failed: %s", exc)
        status_code, status, message = 500, "unhealthy", f"Worker cannot serve requests: {exc}"
    return JSONResponse({"status": status, "message": message}, status_code)


@router.get(
    "/metrics",
    summary="Prometheus metrics of every connector and task",
    tags=["worker"],
    responses={
        200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}, "description": "Metrics"}
    },
    response_model=None,
)
def metrics(herder: HerderDep) -> Response:
    return Response(content=render_metrics_view(herder.metrics_view()), media_type=CONTENT_TYPE_LATEST)


def _levels(request: Request) -> LoggerLevels:
    return request.app.state.logger_levels


@router.get(
    "/admin/loggers",
    summary="List the loggers with an explicit level, and the root logger",
    tags=["admin"],
    responses={200: {"model": dict[str, LoggerLevel]}},
    response_model=None,
)
def list_loggers(request: Request) -> Response:
    return JSONResponse(_levels(request).all_levels())


@router.get(
    "/admin/loggers/{logger}",
    summary="Get a logger's (effective) level",
    tags=["admin"],
    responses={200: {"model": LoggerLevel}, **error_responses(404)},
    response_model=None,
)
def get_logger(logger: str, request: Request) -> Response:
    level = _levels(request).level(logger)
    if level is None:
        raise NotFoundError(f"Logger {logger} not found.")
    return JSONResponse(level)


@router.put(
    "/admin/loggers/{logger}",
    summary="Set a logger's level (and its descendants'); returns the loggers changed",
    description=(
        'Body `{"level": "DEBUG"}`. Python and log4j level names are accepted. `scope=worker` (the '
        "default) sets it here and answers the loggers changed; `scope=cluster` (KIP-976) has every "
        "worker of the group set it and answers 204. A missing level is a 400 and an unknown level a "
        "404, as in Kafka Connect."
    ),
    tags=["admin"],
    responses={
        200: {"model": list[str]},
        204: {"description": "Set on every worker"},
        **error_responses(400, 404),
    },
    response_model=None,
)
def set_logger(
    logger: str,
    request: Request,
    body: Annotated[dict[str, Any], Body(description='{"level": "DEBUG"}')],
    scope: Annotated[str, Query(description="worker (default) or cluster (every worker)")] = "worker",
) -> Response:
    if any(ord(c) < 32 or ord(c) == 127 for c in logger):
        # Logger names end up in log lines and in the config topic (scope=cluster): a newline or
        # an escape sequence there forges log lines or corrupts terminals.
        raise BadRequestError(
            f"Logger name {logger!r} contains a control character; logger names are dotted module "
            "names such as eosconnect.runtime"
        )
    raw = body.get("level")
    if raw is None:
        raise BadRequestError("Desired 'level' parameter was not specified in request.")
    if not isinstance(raw, str) or parse_level(raw) is None:
        raise NotFoundError(f"invalid log level '{raw}'.")
    if scope.lower() == "cluster":
        setter = getattr(request.app.state.herder, "set_cluster_logger_level", None)
        if setter is None:
            raise BadRequestError("this worker cannot set cluster-wide logger levels; use scope=worker")
        setter(logger, raw.upper())
        log.info("set the level of logger %s to %s on every worker (scope=cluster)", logger, raw.upper())
        return Response(status_code=204)
    if scope.lower() != "worker":
        log.warning(
            "Received invalid scope '%s' in request to adjust logging level; will default to worker", scope
        )
    level = parse_level(raw)
    assert level is not None
    affected = _levels(request).set_level(logger, level)
    log.info("set the level of logger %s to %s (%d loggers)", logger, raw.upper(), len(affected))
    return JSONResponse(affected)
