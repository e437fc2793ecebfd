"""A refused login fails a transactional producer's start at once (storage/client_login.py): the
message names the principal, the settings the credentials came from and the fix, never the
password; a refusal shorter than the grace time (a broker still loading its users) is waited out."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from eosconnect.storage.client_login import GRACE_S, LoginFailed, LoginWatch, init_transactions
from eosconnect.storage.clients import client_config

REFUSED = (
    "sasl_ssl://127.0.0.1:9093/bootstrap: SASL authentication error: Authentication failed during "
    "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 "
    "(after 9ms in state AUTH_REQ)"
)
WORKER = {
    "bootstrap.servers": "127.0.0.1:9093",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "worker",
    "sasl.password": "worker-secret",
}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class StuckProducer:
    """init_transactions() times out (resumably) while `watch` hears refused logins on poll()."""

    def __init__(self, watch: LoginWatch | None, clock: Clock, error: KafkaError) -> None:
        self.watch, self.clock, self.error, self.calls = watch, clock, error, 0

    def init_transactions(self, timeout: float) -> None:
        self.calls += 1
        self.clock.now += timeout
        raise KafkaException(
            KafkaError(KafkaError._TIMED_OUT, "Timed out, retry call to resume", retriable=True)
        )

    def poll(self, timeout: float) -> int:
        if self.watch is not None:
            self.watch(self.error)
        return 0


def test_the_message_names_the_connector_override_principal_and_fix_without_the_password():
    config = client_config(
        "producer",
        WORKER,
        {"producer.override.sasl.username": "seq-producer", "producer.override.sasl.password": "wrong-pw"},
    )
    watch = LoginWatch(config, client="transactional producer")
    watch(KafkaError(KafkaError._AUTHENTICATION, REFUSED))
    text = watch.message("seq-0: initialising the transactional producer")
    assert text.startswith(
        "seq-0: initialising the transactional producer failed: the transactional producer"
    )
    assert "as User:seq-producer: SASL authentication error: Authentication failed" in text
    assert "(after 9ms" not in text and "sasl_ssl://" not in text
    assert (
        "producer.override.sasl.username and producer.override.sasl.password (the connector's config)" in text
    )
    assert "sasl.jaas.config" in text
    assert (
        "kafka-configs.sh --bootstrap-server 127.0.0.1:9093 --alter --add-config "
        "'SCRAM-SHA-512=[password=<the password>]' --entity-type users --entity-name seq-producer" in text
    )
    assert "wrong-pw" not in text and "worker-secret" not in text


def test_the_message_names_the_worker_settings_when_the_connector_overrides_nothing():
    watch = LoginWatch(client_config("producer", WORKER, {}))
    watch(KafkaError(KafkaError._AUTHENTICATION, REFUSED))
    text = watch.message("doing")
    assert "as User:worker:" in text
    assert "sasl.username and sasl.password (the worker's settings)" in text


def test_a_refused_login_fails_after_the_grace_time_not_the_call_timeout():
    clock = Clock()
    watch = LoginWatch(client_config("producer", WORKER), clock=clock)
    producer = StuckProducer(watch, clock, KafkaError(KafkaError._AUTHENTICATION, REFUSED))
    started = clock.now
    with pytest.raises(LoginFailed, match=r"cannot log in .* as User:worker"):
        init_transactions(producer, 60, watch, "initialising")
    assert GRACE_S <= clock.now - started <= GRACE_S + 2  # fake time: 1 s steps, not 60 s


def test_other_errors_on_the_error_callback_still_time_out_as_before():
    clock = Clock()
    seen: list[KafkaError] = []
    watch = LoginWatch(client_config("producer", WORKER), clock=clock, then=seen.append)
    producer = StuckProducer(watch, clock, KafkaError(KafkaError._TRANSPORT, "connection refused"))
    with pytest.raises(KafkaException) as raised:
        init_transactions(producer, 3, watch, "initialising")
    assert raised.value.args[0].code() == KafkaError._TIMED_OUT
    assert seen and not watch.refused()  # the caller's own callback heard every error


def test_a_login_refused_only_briefly_is_waited_out():
    clock = Clock()
    watch = LoginWatch(client_config("producer", WORKER), clock=clock)
    watch(KafkaError(KafkaError._AUTHENTICATION, REFUSED))
    clock.now += GRACE_S / 2
    watch.check("doing")  # not yet: a broker still loading its users refuses for a moment


def test_a_non_timeout_failure_is_raised_at_once():
    class Fenced(StuckProducer):
        def init_transactions(self, timeout: float) -> None:
            raise KafkaException(KafkaError(KafkaError.PRODUCER_FENCED, "fenced"))

    clock = Clock()
    watch = LoginWatch(client_config("producer", WORKER), clock=clock)
    with pytest.raises(KafkaException, match="fenced"):
        init_transactions(
            Fenced(watch, clock, KafkaError(KafkaError._AUTHENTICATION, REFUSED)), 60, watch, "x"
        )


def test_a_retriable_error_the_resumed_call_returns_is_retried():
    """Resuming after a step's timeout can return what librdkafka retried inside one long call
    (COORDINATOR_LOAD_IN_PROGRESS while a coordinator loads): the call goes on."""

    class Loading(StuckProducer):
        def init_transactions(self, timeout: float) -> None:
            self.calls += 1
            self.clock.now += timeout
            if self.calls < 3:
                raise KafkaException(
                    KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS, "load", retriable=True)
                )

    clock = Clock()
    watch = LoginWatch(client_config("producer", WORKER), clock=clock)
    producer = Loading(None, clock, KafkaError(KafkaError._TRANSPORT, "x"))
    init_transactions(producer, 60, watch, "initialising")
    assert producer.calls == 3
