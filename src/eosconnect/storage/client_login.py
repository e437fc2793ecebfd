"""A transactional producer that cannot log in fails at once, naming who it logs in as and where.

librdkafka retries a refused SASL login for ever: `init_transactions()` then only times out
(`_TIMED_OUT`, after 60 s), and why is said only to the client's error callback, as an
`_AUTHENTICATION` error ("SASL authentication error: Authentication failed during authentication
due to invalid credentials ..."), which a producer hears only when it is polled. So the call is
made in short steps (librdkafka resumes it where it was, as its documentation allows after a
timeout), the error callback is served between them, and a login refused for `GRACE_S` (not a
broker that was restarting a moment ago) fails with a message that names the principal, the
settings its credentials came from and how to fix them, never the password itself.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from eosconnect.api.errors import ConnectException
from eosconnect.storage.acls import principal_of

__all__ = ["GRACE_S", "LoginFailed", "LoginWatch", "init_transactions", "librdkafka_detail"]

#: librdkafka's codes for a refused login: the client's own (SASL/SSL handshake) and the broker's.
AUTHENTICATION_ERRORS = frozenset({KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED})
#: How long logins must keep being refused before the call gives up: a user created a moment ago
#: or a broker still loading its metadata can refuse a login briefly.
GRACE_S = 5.0
#: The steps `init_transactions` waits in, serving the error callback between them.
STEP_S = 1.0


class LoginFailed(ConnectException):
    """The client's credentials are refused by the brokers; the message says what to fix."""


class LoginWatch:
    """An `error_cb` for a client's config that keeps librdkafka's authentication failures.

    `origin` maps client keys to the settings the user wrote (`ClientConfig.origin`), so the message
    says `producer.override.sasl.password` rather than `sasl.password`. `then` is called with every
    error as well (an error callback the caller had already).
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        origin: Mapping[str, str] | None = None,
        *,
        client: str = "producer",
        then: Callable[[KafkaError], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.origin = dict(origin if origin is not None else getattr(config, "origin", {}))
        self.client = client
        self.then = then
        self.clock = clock
        self.first: float | None = None
        self.last: str = ""

    def __call__(self, error: KafkaError) -> None:
        if error.code() in AUTHENTICATION_ERRORS:
            if self.first is None:
                self.first = self.clock()
            self.last = error.str()
        if self.then is not None:
            self.then(error)

    def refused(self) -> bool:
        """Logins have been refused for at least `GRACE_S`."""
        return self.first is not None and self.clock() - self.first >= GRACE_S

    def check(self, doing: str) -> None:
        """Raise `LoginFailed` if logins have been refused for `GRACE_S`."""
        if self.refused():
            raise LoginFailed(self.message(doing))

    def message(self, doing: str) -> str:
        principal = principal_of(self.config)
        servers = self.config.get("bootstrap.servers", "<bootstrap.servers>")
        user = str(self.config.get("sasl.username") or "<user>")
        mechanism = str(self.config.get("sasl.mechanism") or "SCRAM-SHA-512").upper()
        grant = (
            f"kafka-configs.sh --bootstrap-server {servers} --alter --add-config "
            f"'{mechanism}=[password=<the password>]' --entity-type users --entity-name {user}"
            if mechanism.startswith("SCRAM")
            else f"the brokers' {mechanism} user list"
        )
        return (
            f"{doing} failed: the {self.client} cannot log in to the Kafka brokers at {servers} as "
            f"{principal}: {librdkafka_detail(self.last)}. Its credentials come from {self._settings()}: "
            "correct the user name or password there (librdkafka clients take sasl.username and "
            "sasl.password where Kafka's Java clients take sasl.jaas.config), or give "
            f"{principal} that password on the brokers: {grant}"
        )

    def _settings(self) -> str:
        """Where the login came from, in the user's names: `producer.override.sasl.username and
        producer.override.sasl.password (the connector's config)`, or the worker's settings."""
        keys = [k for k in ("sasl.username", "sasl.password") if k in self.config]
        named = [self.origin.get(k, k) for k in keys] or ["sasl.username", "sasl.password"]
        owners = {"the connector's config" if _own(n) else "the worker's settings" for n in named}
        return f"{' and '.join(named)} ({' and '.join(sorted(owners))})"


def _own(name: str) -> bool:
    """`producer.override.sasl.password`, `target.cluster.sasl.password`: a connector's own setting."""
    return ".override." in name or name.startswith(("target.cluster.", "source.cluster."))


def librdkafka_detail(text: str) -> str:
    """librdkafka's error text without the broker prefix and the state suffix:
    "sasl_ssl://127.0.0.1:9092/bootstrap: SASL authentication error: ... (after 9ms in state AUTH_REQ)"
    -> "SASL authentication error: ..."."""
    text = re.sub(r"\s*\(after \d+ms in state \w+\)$", "", text)
    return re.sub(r"^\S+/(bootstrap|\d+): ", "", text)


def init_transactions(producer: Any, timeout_s: float, watch: LoginWatch, doing: str) -> None:
    """`producer.init_transactions(timeout_s)` that fails with `LoginFailed` as soon as `watch`
    (the producer's `error_cb`) has seen its logins refused for `GRACE_S`. Retriable errors are
    retried until `timeout_s`; any other failure, and the last error at `timeout_s`, is raised as
    `init_transactions` raises it."""
    deadline = watch.clock() + timeout_s
    while True:
        step = max(0.1, min(STEP_S, deadline - watch.clock()))
        try:
            producer.init_transactions(step)
            return
        except KafkaException as exc:
            # A timeout, or what the call resumed with (COORDINATOR_LOAD_IN_PROGRESS, which one
            # long call would have retried inside librdkafka): librdkafka says call again.
            error = exc.args[0] if exc.args else None
            resumable = isinstance(error, KafkaError) and (
                error.code() == KafkaError._TIMED_OUT or error.retriable()
            )
            if not resumable or watch.clock() >= deadline:
                raise
        producer.poll(0)  # serves the error callback
        watch.check(doing)
