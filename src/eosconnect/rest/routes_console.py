"""`/console`: the operator's web page, served by the worker on the REST listener (same auth).

The page (rest/console/index.html, console.js, console.css: static files shipped with the
package, no build step) calls the REST API for everything it changes (pause, resume, stop,
restart, delete, offsets) and two JSON routes of its own for what it shows: `GET
/console/api/state` (rest/console_state.py) and `GET /console/api/series`, the last hour of
throughput and lag (rest/console_samples.py). Left out of the OpenAPI document: they are the
page's, not an API clients should build on.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from eosconnect.rest.console_samples import ConsoleSamples
from eosconnect.rest.console_state import console_state
from eosconnect.rest.deps import HerderDep

router = APIRouter(prefix="/console", include_in_schema=False)

#: The page's files and their media types; nothing else under /console is served from disk.
ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}


def _asset(name: str) -> Response:
    body = resources.files("eosconnect.rest").joinpath("console", name).read_bytes()
    return Response(body, media_type=ASSETS[name], headers={"cache-control": "no-cache"})


def _samples(request: Request) -> ConsoleSamples:
    samples: ConsoleSamples = request.app.state.console_samples
    samples.start()
    return samples


@router.get("")
def page(request: Request) -> Response:
    _samples(request)
    return _asset("index.html")


@router.get("/api/state")
def state(request: Request, herder: HerderDep) -> Response:
    return JSONResponse(console_state(herder, _samples(request), request.app.state.version))


@router.get("/api/series")
def series(request: Request) -> Response:
    return JSONResponse(_samples(request).series())


@router.get("/{asset}")
def asset(asset: str) -> Response:
    if asset not in ASSETS:
        return JSONResponse({"error_code": 404, "message": f"no console file {asset}"}, 404)
    return _asset(asset)
