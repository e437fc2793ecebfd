"""The worker's start-up checks, made before Spark starts, each failing as one line that names the
setting and the fix (a `UserError`: exit status 2, see cli_errors.py).

Starting Spark takes tens of seconds and prints a lot; a wrong address or a port in use found
after that, deep inside the herder, would end in a long traceback naming neither. So, in order:

1. `check_worker_settings`: the properties parse (a misspelt required setting names its near
   miss), settings that will have no effect are warned by name, as Kafka Connect does
   ("... was supplied but isn't a known config"), with the nearest known name, and client
   settings (`producer.*`, `consumer.*`, `admin.*`, `ssl.*`, ...) librdkafka does not know fail;
2. `check_brokers`: the brokers of `bootstrap.servers` answer within a few seconds;
3. `check_worker_acls`: on a cluster with an authorizer, the worker's principals may read and
   write its internal topics and read its group (storage/acl_check.py); a missing ACL is named with
   the `kafka-acls.sh` command that grants it, where the worker would hang or fail later;
4. `bind_listener`: the REST listener's socket is bound (and handed to the REST server later), so
   a port in use is found before Spark starts, not after the worker joined its group.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from eosconnect.api.errors import ConfigException
from eosconnect.cli_errors import UserError
from eosconnect.storage.client_login import librdkafka_detail
from eosconnect.storage.clients import KINDS, ClientConfigError, ClientKind, client_config
from eosconnect.worker_config import (
    WORKER_CONFIG_DEF,
    WorkerConfig,
    missing_required_near_misses,
    tasks_per_slot,
    unknown_worker_settings,
)

__all__ = [
    "BROKER_CHECK_TIMEOUT_S",
    "QUIET",
    "bind_listener",
    "check_brokers",
    "check_worker_acls",
    "check_worker_settings",
]

log = logging.getLogger(__name__)
#: Where librdkafka's own log lines go when a check or a command reports the problem itself.
QUIET = logging.getLogger("eosconnect.quiet.kafka")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False

#: How long the brokers may take to answer before the worker gives up (Kafka Connect fails its
#: start-up the same way when it cannot describe the cluster).
BROKER_CHECK_TIMEOUT_S = 10.0
#: A refused connection or an unknown host is final after this long (librdkafka retried by then).
FATAL_AFTER_S = 1.5
#: Errors after which waiting longer does not help.
_FATAL = {
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._RESOLVE,
    KafkaError._AUTHENTICATION,
    KafkaError._SSL,
}
#: Errors whose text says what went wrong with a broker ("Connect to ipv4#127.0.0.1:1 failed: ...").
_TELLING = {KafkaError._TRANSPORT, KafkaError._RESOLVE, KafkaError._AUTHENTICATION, KafkaError._SSL}


def _detail(error: KafkaError) -> str:
    """librdkafka's text without the broker prefix and the state suffix."""
    return librdkafka_detail(error.str())


def check_worker_settings(
    props: Mapping[str, str], source: str, *, warn_unknown: bool = True
) -> WorkerConfig:
    """The parsed worker settings; raises `UserError` naming the setting (and a near miss of a
    required one), and logs one warning per setting that will have no effect."""
    for required, near in missing_required_near_misses(props).items():
        doc = WORKER_CONFIG_DEF.keys[required].documentation
        raise UserError(
            f"{source}: '{near}' is not a worker setting; did you mean '{required}'? "
            f"({required} is required: {doc.rstrip('.')})"
        )
    try:
        worker = WorkerConfig.parse(props)
    except ConfigException as exc:
        problems = "; ".join(f"{name} {msg}" for name, msgs in exc.errors.items() for msg in msgs) or str(exc)
        raise UserError(f"{source}: {problems}") from exc
    try:
        tasks_per_slot(props)
    except ValueError as exc:
        raise UserError(f"{source}: {exc}") from None
    if warn_unknown:
        for note in unknown_worker_settings(props):
            log.warning("%s", note.message())
    unknown_client_settings = {
        name: problem
        for kind in KINDS
        for name, problem in _client_problems(kind, worker.originals).items()
        if "No such configuration property" in problem
    }
    if unknown_client_settings:
        problems = "; ".join(f"{name}: {problem}" for name, problem in unknown_client_settings.items())
        raise UserError(f"{source}: {problems}")
    return worker


def _client_problems(kind: ClientKind, originals: Mapping[str, str]) -> dict[str, str]:
    """What librdkafka refuses in the worker's settings for its `kind` clients (`producer.lingr.ms`
    would otherwise fail the first client the worker makes, after Spark started)."""
    try:
        client_config(kind, originals).validate()
    except ClientConfigError as exc:
        return {name: problems[0] for name, problems in exc.errors.items()}
    return {}


def check_brokers(
    originals: Mapping[str, Any],
    bootstrap_servers: str,
    timeout: float = BROKER_CHECK_TIMEOUT_S,
    *,
    setting: str = "bootstrap.servers",
) -> None:
    """Return once a broker of `bootstrap_servers` answers a metadata request; raise `UserError`
    naming `setting` (the worker's `bootstrap.servers`, a command's `-b`) and the address when none
    does within `timeout` seconds. `originals` carries the security settings (a worker's, or a
    command's client settings)."""
    errors: list[KafkaError] = []
    config = {**client_config("admin", originals, logger=QUIET), "error_cb": errors.append, "log_level": 0}
    admin = AdminClient(config)
    started = time.monotonic()
    last: str = "no answer"
    while True:
        try:
            admin.list_topics(timeout=0.5)
            return
        except KafkaException as exc:
            last = exc.args[0].str() if exc.args and isinstance(exc.args[0], KafkaError) else str(exc)
        admin.poll(0)
        elapsed = time.monotonic() - started
        fatal = any(e.code() in _FATAL for e in errors)
        if (fatal and elapsed >= FATAL_AFTER_S) or elapsed >= timeout:
            telling = [e for e in errors if e.code() in _TELLING]
            if telling:
                reason = _detail(telling[-1])
            else:
                reason = "no broker answers" if fatal else f"no answer within {timeout:.0f} s ({last})"
            raise UserError(
                f"cannot reach the Kafka brokers at {setting}={bootstrap_servers}: {reason}; "
                f"check {setting} (and the security settings) and that the brokers run"
            )


def check_worker_acls(originals: Mapping[str, Any], bootstrap_servers: str) -> None:
    """Raise `UserError` naming every ACL on the worker's internal topics and group that the broker
    says its principals lack, with the command that grants it. A check that cannot be made (an
    old broker, no answer) is skipped: the worker then fails where the ACL is used."""
    from eosconnect.storage.acl_check import missing_worker_acls
    from eosconnect.storage.acls import remediation

    try:
        missing = missing_worker_acls(originals)
    except Exception as exc:  # the check is a courtesy; never the reason a worker does not start
        log.debug("could not check the worker's ACLs: %s", exc)
        return
    if missing:
        raise UserError(
            f"the worker cannot use its internal topics or group: {len(missing)} ACL(s) missing. "
            + remediation(missing, bootstrap_servers)
        )


def bind_listener(host: str, port: int, listener: str) -> socket.socket:
    """A socket bound to the REST listener's address (port 0: a free one), not yet listening;
    raises `UserError` naming the port and `listeners` when it cannot be bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        reason = exc.strerror or str(exc)
        raise UserError(
            f"cannot listen on {host}:{port} (listeners={listener}): {reason}; another worker or program "
            "uses the port: stop it, or set listeners to a free port (port 0 picks one)"
        ) from exc
    return sock
