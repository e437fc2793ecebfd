"""A worker out of its group does not ask the brokers for the leader (cluster/election.py): its
coordinator may be unreachable, and librdkafka 2.16's DescribeConsumerGroups can abort the process
when such a request fails (librdkafka issue 4605)."""

from __future__ import annotations

import time

from eosconnect.cluster.election import STATS_INTERVAL_MS, LeaderElection
from eosconnect.worker_config import WorkerConfig


def test_a_worker_whose_consumer_is_out_of_the_group_answers_no_leader_without_asking() -> None:
    # Nothing listens on the discard port: the consumer never finds its coordinator.
    worker = WorkerConfig.parse(
        {
            "bootstrap.servers": "127.0.0.1:9",
            "group.id": "election-unit",
            "config.storage.topic": "election-unit-configs",
            "offset.storage.topic": "election-unit-offsets",
            "status.storage.topic": "election-unit-status",
        }
    )
    election = LeaderElection(worker, "http://127.0.0.1:1", lambda: None, lambda: None)
    election.start()
    try:
        time.sleep(2 * STATS_INTERVAL_MS / 1000 + 0.5)  # its statistics have said where it is
        began = time.monotonic()
        assert election.leader_url(max_age_s=0) is None
        # Asking would have waited for the describe request's timeout (5 s).
        assert time.monotonic() - began < 1.0
        assert not election.is_leader
    finally:
        election.stop()
