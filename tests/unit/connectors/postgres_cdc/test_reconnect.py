"""The retry budget of a lost replication connection (errors.max.retries, Debezium's meaning)."""

from __future__ import annotations

import pytest

from eosconnect.api.errors import ConnectException
from eosconnect.connectors.postgres_cdc.reconnect import Reconnection


def test_no_retries_fails_at_once_naming_the_setting():
    with pytest.raises(ConnectException, match=r"'s1' \(server closed\).*at once \(errors.max.retries=0\)"):
        Reconnection("s1", "server closed", 42, max_retries=0, wait_s=10)


def test_the_first_try_is_at_once_and_later_ones_wait():
    outage = Reconnection("s1", "server closed", 42, max_retries=-1, wait_s=30)
    assert outage.due()
    outage.failed("connection refused")
    assert not outage.due()
    outage.next_try = 0.0
    assert outage.due()


def test_the_last_allowed_try_gives_up_with_its_cause():
    outage = Reconnection("s1", "server closed", 42, max_retries=2, wait_s=0)
    outage.failed("connection refused")
    with pytest.raises(ConnectException, match=r"\(connection refused\).*after 2 retries"):
        outage.failed("connection refused")


def test_no_limit_keeps_trying():
    outage = Reconnection("s1", "server closed", 42, max_retries=-1, wait_s=0)
    for _ in range(1000):
        outage.failed("connection refused")
    assert outage.attempts == 1000 and outage.due()
