"""eosconnect.rest: the Kafka Connect-compatible REST API of a worker.

- `create_app(herder, *, basic_auth=None, ...)` (rest/app.py): the FastAPI app;
- `RestServer`, `RestServerConfig` (rest/server.py): uvicorn in a background thread, HTTP or HTTPS;
- `render_prometheus` (rest/metrics.py): task metric snapshots as Prometheus text;
"""

from eosconnect.rest.app import create_app
from eosconnect.rest.metrics import build_registry, render_prometheus
from eosconnect.rest.server import RestServer, RestServerConfig

__all__ = ["RestServer", "RestServerConfig", "build_registry", "create_app", "render_prometheus"]
