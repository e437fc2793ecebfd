"""Internal worker-to-worker and task-to-worker endpoints, signed with the session key.

- `PUT /connectors/{c}/fence`: a starting exactly-once task asks the leader to fence the previous
  generation's producers (KIP-618). 204 when done. The optional body `{"generation": N}` names the
  task's generation, so that the leader can answer from memory once that round is done.
- `PUT /connectors/{c}/tasks/{t}/heartbeat`: a task running on a Spark executor reports its state
  and metrics and learns whether to keep running, pause or stop (Spark has no driver-to-task channel).
- `PUT /internal/hosts/{h}/heartbeat`: a slot host (several connector tasks in one Spark task)
  reports its tasks' heartbeats in one request and learns their directives and the tasks to start.

They answer 403 unless the request carries a valid signature (`X-Connect-Authorization`,
`X-Connect-Request-Signature-Timestamp`) made with the current or the previous session key within
the allowed age; basic authentication does not apply to them.
"""

from __future__ import annotations

import json
from typing import TypeVar

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ValidationError
from starlette.responses import JSONResponse, Response

from eosconnect.cluster.herder_api import BadRequestError
from eosconnect.rest.deps import HerderDep, SignedDep, error_responses, verify_signature
from eosconnect.rest.errors import validation_error_message
from eosconnect.rest.forwarding import request_body
from eosconnect.rest.held_answers import HeldAnswers
from eosconnect.rest.models import FenceRequest, HeartbeatRequest, HeartbeatResponse

router = APIRouter(prefix="/connectors", tags=["internal"])

_DIRECTIVES = {"run", "pause", "stop"}
_Body = TypeVar("_Body", bound=BaseModel)


@router.put(
    "/{connector}/fence",
    status_code=204,
    summary="Internal: fence the zombie producers of a connector's previous generation",
    dependencies=[SignedDep],
    responses={204: {"description": "Fenced"}, **error_responses(403, 404, 409, 500)},
    response_model=None,
)
def fence_zombies(connector: str, request: Request, herder: HerderDep) -> Response:
    body = _parse(FenceRequest, request_body(request) or b"{}")
    herder.fence_zombies(connector, body.generation)
    return Response(status_code=204)


@router.put(
    "/{connector}/tasks/{task}/heartbeat",
    summary="Internal: a running task reports its state and metrics and gets its directive",
    dependencies=[SignedDep],
    responses={200: {"model": HeartbeatResponse}, **error_responses(400, 403, 404, 409)},
    response_model=None,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": HeartbeatRequest.model_json_schema()}},
        }
    },
)
def task_heartbeat(connector: str, task: int, request: Request, herder: HerderDep) -> Response:
    body = _parse(HeartbeatRequest, request_body(request) or b"null")
    report = body.model_dump(exclude={"generation"})
    directive = herder.task_heartbeat(connector, task, body.generation, report)
    if directive not in _DIRECTIVES:
        raise ValueError(f"the herder answered the unknown directive {directive!r}")
    return JSONResponse({"directive": directive})


def _parse(model: type[_Body], raw: bytes) -> _Body:
    """Bodies are parsed in the handler, after the signature check: an unsigned request gets 403
    whatever it holds."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e.get("loc", ()))} for e in exc.errors()]
        raise BadRequestError(validation_error_message(errors)) from None


internal_router = APIRouter(prefix="/internal", tags=["internal"])


def signed_unless_authenticated(request: Request, herder: HerderDep) -> None:
    """With basic auth on, the middleware has already checked the caller's credentials; without
    it, the request must carry a session-key signature like the other internal endpoints."""
    if not getattr(request.app.state, "basic_auth_enabled", False):
        verify_signature(request, herder)


@internal_router.get(
    "/tasks",
    summary="Internal: task instances this worker runs, with their pids",
    description="Needs basic auth (when enabled) or a session-key signature.",
    dependencies=[Depends(signed_unless_authenticated)],
    responses=error_responses(400, 401, 403),
)
def task_runtimes(herder: HerderDep) -> JSONResponse:
    return JSONResponse(herder.task_runtimes())


@internal_router.put(
    "/hosts/{host}/heartbeat",
    summary="Internal: a slot host reports its tasks' heartbeats and gets their directives and new tasks",
    dependencies=[SignedDep],
    responses=error_responses(400, 403),
)
async def host_heartbeat(host: str, request: Request) -> JSONResponse:
    """Held while there is nothing new for the host, up to the `hold_s` it asks for (see "held
    answers" in cluster/host_channel.py). Async, so a held request holds no thread of the server's
    pool: the app's `HeldAnswers` looks at every held request together (rest/held_answers.py)."""
    try:
        report = json.loads(request_body(request) or b"{}")
    except ValueError as exc:
        raise BadRequestError(f"the host heartbeat is not JSON: {exc}") from None
    if not isinstance(report, dict) or not isinstance(report.get("tasks", []), list):
        raise BadRequestError('the host heartbeat must be an object with a "tasks" list')
    held: HeldAnswers = request.app.state.held_answers
    return JSONResponse(await held.answer(host, report))
