"""Zombie fencing rounds against real transactional producers."""

from __future__ import annotations

import contextlib
import warnings

import pytest
from confluent_kafka import KafkaException, Producer

from eosconnect.storage.config_store import ConfigStore
from eosconnect.storage.config_writers import FENCED_CODES, FencingConflict
from eosconnect.storage.fencing_round import fencing_plan, perform_fencing_round
from eosconnect.worker_config import WorkerConfig

pytestmark = pytest.mark.kafka


@pytest.fixture
def leader(worker_props, topic_name):
    worker = WorkerConfig.parse(
        worker_props(
            "enabled", config_storage_topic=topic_name("configs"), config_storage_replication_factor="1"
        )
    )
    store = ConfigStore(worker, read_timeout_s=30, write_timeout_s=20)
    store.start()
    store.claim_write_privileges()
    yield store
    store.close()


def _generation(store: ConfigStore, connector: str, n: int, tag: str) -> None:
    store.put_task_configs(connector, [{"task": str(i), "tag": tag} for i in range(n)])


def _zombie(bootstrap: str, transactional_id: str, topic: str, count: int) -> Producer:
    """A task producer of an old generation that hangs with an open transaction and records in it."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(20)
    producer.begin_transaction()
    for i in range(count):
        producer.produce(topic, key=f"zombie-{i}".encode(), value=b"duplicate")
    assert producer.flush(10) == 0
    return producer


def _producer_config(bootstrap: str) -> dict[str, str]:
    return {"bootstrap.servers": bootstrap}


def test_first_round_writes_the_record_without_fencing(leader):
    leader.put_connector_config("c", {"name": "c"})
    _generation(leader, "c", 3, "g0")
    snap = leader.read_to_end()
    assert snap.pending_fencing("c")
    fenced: list[list[str]] = []
    after = perform_fencing_round(leader, snap, "c", fence=lambda cfg, ids, t: fenced.append(list(ids)))
    assert fenced == []
    assert not after.pending_fencing("c") and after.task_count_record("c") == 3
    # A second request for the same generation is answered at once.
    assert perform_fencing_round(leader, after, "c") is after


def test_round_three_to_two_fences_a_zombie_with_an_open_transaction(
    leader, bootstrap, create_topic, topic_name, read_committed
):
    data = create_topic(topic_name("data"))
    group = leader.worker.group_id
    leader.put_connector_config("c", {"name": "c", "tasks.max": "3"})
    _generation(leader, "c", 3, "g0")
    perform_fencing_round(leader, leader.read_to_end(), "c", _producer_config(bootstrap))

    zombie = _zombie(bootstrap, f"{group}-c-2", data, 5)  # task 2 of generation 0, never stopped
    _generation(leader, "c", 2, "g1")  # reconfigured to two tasks: nobody will reuse id -2
    snap = leader.read_to_end()
    plan = fencing_plan(snap, "c", group)
    assert plan.needed and plan.ids_to_fence == (f"{group}-c-0", f"{group}-c-1", f"{group}-c-2")

    after = perform_fencing_round(leader, snap, "c", _producer_config(bootstrap), expected_generation=1)
    assert after.generation("c") == 1
    assert after.task_count_record("c") == 2 and not after.pending_fencing("c")

    with pytest.raises(KafkaException) as info:
        zombie.commit_transaction(10)
    assert info.value.args[0].code() in FENCED_CODES, info.value.args[0]
    assert read_committed(data, timeout=20) == []  # its records never become visible
    with warnings.catch_warnings(), contextlib.suppress(KafkaException):  # the broker already aborted
        warnings.simplefilter("ignore", RuntimeWarning)
        zombie.close()


def test_new_task_configs_during_fencing_end_the_round_with_conflict(leader, bootstrap):
    leader.put_connector_config("c", {"name": "c"})
    _generation(leader, "c", 3, "g0")
    perform_fencing_round(leader, leader.read_to_end(), "c")
    _generation(leader, "c", 2, "g1")
    snap = leader.read_to_end()

    def reconfigure(stage: str) -> None:
        if stage == "fenced":  # the connector is reconfigured while producers are being fenced
            _generation(leader, "c", 4, "g2")

    with pytest.raises(FencingConflict) as info:
        perform_fencing_round(leader, snap, "c", _producer_config(bootstrap), on_stage=reconfigure)
    assert (info.value.expected_generation, info.value.found_generation) == (1, 2)
    after = leader.read_to_end()
    # No task-count record was written for the outdated generation: generation 2 still needs a round.
    assert after.task_count_record("c") == 3 and after.pending_fencing("c")

    after = perform_fencing_round(leader, after, "c", _producer_config(bootstrap))
    assert after.task_count_record("c") == 4 and not after.pending_fencing("c")


def test_task_configs_written_after_the_record_are_detected_on_read_back(leader, bootstrap):
    leader.put_connector_config("c", {"name": "c"})
    _generation(leader, "c", 2, "g0")
    snap = leader.read_to_end()

    def reconfigure(stage: str) -> None:
        if stage == "written":
            _generation(leader, "c", 2, "g1")

    with pytest.raises(FencingConflict):
        perform_fencing_round(leader, snap, "c", _producer_config(bootstrap), on_stage=reconfigure)
    after = leader.read_to_end()
    assert after.generation("c") == 1 and after.pending_fencing("c")  # the new generation still needs one


def test_a_request_for_an_outdated_generation_conflicts(leader):
    leader.put_connector_config("c", {"name": "c"})
    _generation(leader, "c", 1, "g0")
    _generation(leader, "c", 1, "g1")
    with pytest.raises(FencingConflict):
        perform_fencing_round(leader, leader.read_to_end(), "c", expected_generation=0)
