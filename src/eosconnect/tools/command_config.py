"""`--command-config FILE`: a command's client security settings in a properties file, as Kafka's
tools take them (`kafka-topics.sh --command-config client.properties`).

The file holds librdkafka settings (`security.protocol`, `sasl.mechanism`, `sasl.username`,
`sasl.password`, `ssl.ca.location`, ...), and may declare config providers (KIP-297) whose
variables its values use (`sasl.password=${file:/etc/secrets/kafka.properties:password}`), resolved
here as Kafka's clients resolve them. A file written for Kafka's Java tools works too where the
meaning is the same: `sasl.jaas.config` of the PLAIN or SCRAM login module becomes `sasl.username`
and `sasl.password`, and a PEM trust store (`ssl.truststore.type=PEM`) becomes `ssl.ca.location`.
Anything else librdkafka does not know is refused by name when the client is made.
"""

from __future__ import annotations

import re
from pathlib import Path

from eosconnect.api.errors import ConfigException
from eosconnect.cli_errors import UserError
from eosconnect.plugins.config_providers import PROVIDERS_KEY, resolve_config

__all__ = ["load_command_config"]

_JAAS = re.compile(
    r"^\s*org\.apache\.kafka\.common\.security\.(plain\.PlainLoginModule|scram\.ScramLoginModule)\s+"
    r"required\s+(?P<options>.*?);?\s*$",
    re.DOTALL,
)
_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def load_command_config(path: Path) -> dict[str, str]:
    """The librdkafka settings of `path`; `UserError` naming the file and the setting on a problem."""
    from eosconnect.launch import load_properties

    try:
        props = load_properties(path)
    except OSError as exc:
        raise UserError(f"--command-config {path}: {exc.strerror or exc}") from exc
    try:
        resolved = resolve_config(props, props)
    except ConfigException as exc:
        raise UserError(f"--command-config {path}: {exc}") from exc
    settings = {k: v for k, v in resolved.items() if not k.startswith(PROVIDERS_KEY)}
    jaas = settings.pop("sasl.jaas.config", None)
    if jaas is not None:
        match = _JAAS.match(jaas)
        options = dict(_OPTION.findall(match.group("options"))) if match else {}
        if not match or "username" not in options or "password" not in options:
            raise UserError(
                f"--command-config {path}: sasl.jaas.config is only understood for the PLAIN and SCRAM "
                "login modules with username and password; write sasl.username and sasl.password instead"
            )
        settings.setdefault("sasl.username", options["username"])
        settings.setdefault("sasl.password", options["password"])
    if settings.get("ssl.truststore.type", "").upper() == "PEM" and "ssl.truststore.location" in settings:
        settings.setdefault("ssl.ca.location", settings.pop("ssl.truststore.location"))
        settings.pop("ssl.truststore.type")
    return settings
