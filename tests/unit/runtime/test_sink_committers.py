"""Where a sink's consumed positions go: the source group is the truth, except for KIP-656 sinks."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaError, KafkaException

from eosconnect.api import OffsetAndMetadata, TopicPartition
from eosconnect.runtime.sink_consumer import ConsumerGroupCommitter, InformationalGroupCommitter


class _UnreachableSourceCluster:
    """A consumer whose commit fails as it does while the source cluster's coordinator is away."""

    def commit(self, **_kwargs: object) -> None:
        raise KafkaException(KafkaError(KafkaError.COORDINATOR_NOT_AVAILABLE))


def test_transactional_sinks_source_commit_is_information_only(caplog: pytest.LogCaptureFixture) -> None:
    """KIP-656: the target's offsets are the truth, so failing to copy them to the source group
    must not fail the task; it is a warning that says what the offsets are for."""
    log = logging.LoggerAdapter(logging.getLogger("test"), {})
    committer = InformationalGroupCommitter(_UnreachableSourceCluster(), log)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING):
        committer.commit({TopicPartition("t", 0): OffsetAndMetadata(5)})
    assert "only to show lag" in caplog.text and "COORDINATOR_NOT_AVAILABLE" in caplog.text
    with pytest.raises(KafkaException):
        ConsumerGroupCommitter(_UnreachableSourceCluster()).commit(  # type: ignore[arg-type]
            {TopicPartition("t", 0): OffsetAndMetadata(5)}
        )
