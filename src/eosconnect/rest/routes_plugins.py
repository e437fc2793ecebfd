"""`/connector-plugins/...`: the plugin list, config definitions and config validation."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query
from starlette.responses import JSONResponse, Response

from eosconnect.cluster.herder_api import BadRequestError
from eosconnect.rest.deps import CONNECTOR_CLASS, HerderDep, error_responses
from eosconnect.rest.masking import mask_config, secret_keys
from eosconnect.rest.models import ConfigInfos, ConfigKeyInfo, ConnectorConfig, PluginInfo

router = APIRouter(prefix="/connector-plugins", tags=["connector-plugins"])

_ALIAS_SUFFIX = "Connector"


def _normalized(plugin: str) -> str:
    """Full and short names alike, without a trailing "Connector" (Kafka Connect's aliases)."""
    if plugin.endswith(_ALIAS_SUFFIX) and len(plugin) > len(_ALIAS_SUFFIX):
        return plugin[: -len(_ALIAS_SUFFIX)]
    return plugin


def plugin_matches(included: str, requested: str) -> bool:
    """`connector.class` names the plugin of the path: `a.b.FooConnector` matches `Foo`, `FooConnector`
    and `a.b.FooConnector`; `module:Class` paths are compared with the colon read as a dot."""
    inc = _normalized(included.strip().replace(":", "."))
    req = _normalized(requested.strip().replace(":", "."))
    return inc == req or inc.endswith("." + req)


@router.get(
    "",
    summary="List installed plugins",
    description=(
        "Source and sink connectors; with `connectorsOnly=false` also transformations, predicates "
        "and converters."
    ),
    responses={200: {"model": list[PluginInfo]}},
    response_model=None,
)
def list_plugins(
    herder: HerderDep,
    connectors_only: Annotated[
        bool, Query(alias="connectorsOnly", description="List only connectors (default) or every plugin")
    ] = True,
) -> Response:
    return JSONResponse(herder.connector_plugins(connectors_only))


@router.get(
    "/{plugin}/config",
    summary="Get a plugin's configuration definitions",
    responses={200: {"model": list[ConfigKeyInfo]}, **error_responses(404)},
    response_model=None,
)
def plugin_config(
    plugin: str,
    herder: HerderDep,
    version: Annotated[
        str | None,
        Query(description="A version or Maven range of the plugin (KIP-891); default: the default"),
    ] = None,
) -> Response:
    return JSONResponse(herder.plugin_config(plugin, version))


@router.put(
    "/{plugin}/config/validate",
    summary="Validate a connector configuration",
    description=(
        "Answers 200 with Kafka Connect's ConfigInfos (per-field errors, `error_count`) whether or not "
        "the configuration is valid. A `connector.class` naming another plugin than the path, or none, "
        "is a 400 (as in Kafka Connect)."
    ),
    responses={200: {"model": ConfigInfos}, **error_responses(400, 404, 500)},
    response_model=None,
)
def validate_config(
    plugin: str,
    config: Annotated[ConnectorConfig, Body(description="The configuration to check")],
    herder: HerderDep,
) -> Response:
    config = dict(config)
    included = config.get(CONNECTOR_CLASS)
    if included is not None and not plugin_matches(included, plugin):
        raise BadRequestError(f"Included connector type {included} does not match request type {plugin}")
    if not (included or "").strip():
        shown = mask_config(config, secret_keys({**config, CONNECTOR_CLASS: plugin}))
        raise BadRequestError(
            f"Connector config {shown} contains no connector type: set {CONNECTOR_CLASS} (to {plugin} for "
            "this endpoint)",
            {
                CONNECTOR_CLASS: [
                    f'Missing required configuration "{CONNECTOR_CLASS}" which has no default value.'
                ]
            },
        )
    return JSONResponse(herder.validate_connector_config(plugin, config))
