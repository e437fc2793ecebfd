"""The config store on a real broker: record round trips, the leader's transactional writer."""

from __future__ import annotations

import contextlib
import json
import logging
import warnings
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaException, Producer

from eosconnect.storage.config_store import ConfigStore, TargetState
from eosconnect.storage.config_writers import LeaderFencedError, WritePrivilegeError, leader_producer_config
from eosconnect.storage.session_key import SessionKey
from eosconnect.worker_config import WorkerConfig

pytestmark = pytest.mark.kafka

WorkerFactory = Callable[..., WorkerConfig]


@pytest.fixture
def make_worker(worker_props, topic_name) -> WorkerFactory:
    """WorkerConfigs of one group sharing one config topic (a second call = another worker)."""
    topic = topic_name("configs")

    group = topic_name("group")

    def _make(mode: str = "enabled", **extra: str) -> WorkerConfig:
        props = worker_props(mode, config_storage_topic=topic, config_storage_replication_factor="1", **extra)
        props["group.id"] = group
        return WorkerConfig.parse(props)

    return _make


@pytest.fixture
def stores():
    opened: list[ConfigStore] = []

    def _open(worker: WorkerConfig) -> ConfigStore:
        store = ConfigStore(worker, read_timeout_s=30, write_timeout_s=20)
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.close()


def _raw(read_committed, topic: str) -> list[tuple[str, object]]:
    return [
        (r.key.decode(), json.loads(r.value) if r.value is not None else None) for r in read_committed(topic)
    ]


@pytest.mark.parametrize("mode", ["enabled", "disabled"])
def test_round_trip_of_every_record_type(make_worker, stores, read_committed, admin, mode):
    store = stores(make_worker(mode))
    assert store.transactional is (mode == "enabled")
    store.start()
    config = admin.describe_configs([_topic_resource(store.topic)])[_topic_resource(store.topic)].result(30)
    assert config["cleanup.policy"].value == "compact"
    assert len(admin.list_topics(store.topic, timeout=30).topics[store.topic].partitions) == 1

    store.claim_write_privileges()
    key = SessionKey.generate()
    store.put_connector_config("c", {"name": "c", "tasks.max": "2"}, target_state=TargetState.PAUSED)
    store.put_task_configs("c", [{"task": "0"}, {"task": "1"}])
    store.put_task_count_record("c", 2)
    store.put_target_state("c", TargetState.STOPPED)
    store.put_session_key(key)
    store.put_connector_config("gone", {"name": "gone"})
    last = store.delete_connector("gone")
    assert last > 0

    fresh = stores(make_worker(mode)).read_to_end()  # another worker reading from scratch
    for snap in (fresh, store.read_to_end()):
        assert snap.connectors() == ["c"]
        assert snap.connector_config("c") == {"name": "c", "tasks.max": "2"}
        assert snap.target_state("c") is TargetState.STOPPED
        assert [dict(t) for t in snap.task_configs("c")] == [{"task": "0"}, {"task": "1"}]
        assert snap.generation("c") == 0 and snap.task_count("c") == 2
        assert snap.task_count_record("c") == 2 and not snap.pending_fencing("c")
        assert snap.session_key == key
        assert snap.skipped == 0
        assert snap.offset > last

    assert _raw(read_committed, store.topic) == [
        ("target-state-c", {"state": "PAUSED", "state.v2": "PAUSED"}),
        ("connector-c", {"properties": {"name": "c", "tasks.max": "2"}}),
        ("task-c-0", {"properties": {"task": "0"}}),
        ("task-c-1", {"properties": {"task": "1"}}),
        ("commit-c", {"tasks": 2}),
        ("tasks-fencing-c", {"task-count": 2}),
        ("target-state-c", {"state": "PAUSED", "state.v2": "STOPPED"}),
        ("session-key", key.to_record()),
        ("connector-gone", {"properties": {"name": "gone"}}),
        ("connector-gone", None),
        ("target-state-gone", None),
    ]


def _close_quietly(producer: Producer) -> None:
    """Close a fenced producer (its close() complains that the abort failed: the broker did it)."""
    with warnings.catch_warnings(), contextlib.suppress(KafkaException):
        warnings.simplefilter("ignore", RuntimeWarning)
        producer.close()


def _topic_resource(topic: str):
    from confluent_kafka.admin import ConfigResource, ResourceType

    return ConfigResource(ResourceType.TOPIC, topic)


def test_incremental_reads_continue_where_they_stopped(make_worker, stores):
    store = stores(make_worker())
    store.start()
    store.claim_write_privileges()
    store.put_connector_config("a", {"name": "a"})
    first = store.read_to_end()
    assert first.connectors() == ["a"]
    store.put_connector_config("b", {"name": "b"})
    store.put_task_configs("b", [{"x": "1"}])
    second = store.read_to_end()
    assert second.connectors() == ["a", "b"] and second.generation("b") == 0
    assert second.offset > first.offset
    assert first.connectors() == ["a"]  # earlier snapshots do not change
    assert store.read_to_end().offset == second.offset  # nothing new: nothing read


def test_garbage_records_are_skipped(make_worker, stores, bootstrap, caplog):
    store = stores(make_worker("disabled"))
    store.start()
    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value in [
        (b"connector-x", b"{not json"),
        (b"commit-x", b'{"tasks": "many"}'),
        (b"mystery", b"{}"),
    ]:
        producer.produce(store.topic, key=key, value=value)
    producer.flush(10)
    producer.close()
    store.put_connector_config("ok", {"name": "ok"})
    with caplog.at_level(logging.WARNING, logger="eosconnect.storage.config_state"):
        snap = store.read_to_end()
    assert snap.connectors() == ["ok"] and snap.skipped == 3
    assert any("'connector-x'" in r.getMessage() and "offset 0" in r.getMessage() for r in caplog.records)


def test_multi_partition_config_topic_is_refused(make_worker, stores, create_topic):
    worker = make_worker()
    create_topic(
        str(worker.values["config.storage.topic"]), partitions=2, config={"cleanup.policy": "compact"}
    )
    with pytest.raises(ValueError, match="exactly one"):
        stores(worker).ensure_topic()


def test_transactional_writes_need_leadership(make_worker, stores, read_committed):
    store = stores(make_worker("preparing"))
    store.start()
    with pytest.raises(WritePrivilegeError):
        store.put_connector_config("c", {"name": "c"})
    # Target states may be written by any worker (Kafka Connect's rule), without the leader's writer.
    store.put_target_state("c", "PAUSED")
    assert store.read_to_end().target_states["c"] is TargetState.PAUSED


def test_user_transactional_id_is_ignored_with_a_warning(make_worker, caplog):
    worker = make_worker(**{"producer.transactional.id": "mine"})
    with caplog.at_level(logging.WARNING):
        config = leader_producer_config(worker)
    assert config["transactional.id"] == f"connect-cluster-{worker.group_id}"
    assert any("producer.transactional.id" in r.getMessage() for r in caplog.records)


def test_new_leader_fences_the_previous_one(make_worker, stores, read_committed):
    old = stores(make_worker())
    old.start()
    old.claim_write_privileges()
    old.put_connector_config("c", {"name": "c", "v": "old-leader"})

    new = stores(make_worker())  # another worker of the group is elected
    new.start()
    new.claim_write_privileges()

    with pytest.raises(LeaderFencedError, match="another worker became the leader"):
        old.put_task_configs("c", [{"zombie": "yes"}])
    assert not old.has_write_privileges
    with pytest.raises(WritePrivilegeError):
        old.put_task_count_record("c", 1)

    new.put_connector_config("c", {"name": "c", "v": "new-leader"})
    keys = [r.key for r in read_committed(new.topic)]
    assert b"task-c-0" not in keys and b"commit-c" not in keys  # the zombie's write never landed
    snap = old.read_to_end()  # the old leader steps down and re-reads
    assert snap.connector_config("c") == {"name": "c", "v": "new-leader"}
    assert snap.generation("c") is None


def test_a_stalled_leaders_open_transaction_is_aborted_by_the_next(
    make_worker, stores, bootstrap, read_committed
):
    worker = make_worker()
    store = stores(worker)
    store.start()
    # The old leader stalled in the middle of a write: its transaction is open.
    stalled = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"connect-cluster-{worker.group_id}"}
    )
    stalled.init_transactions(20)
    stalled.begin_transaction()
    stalled.produce(store.topic, key=b"tasks-fencing-c", value=b'{"task-count":1}')
    stalled.flush(10)

    store.claim_write_privileges()  # becoming leader aborts it
    store.put_connector_config("c", {"name": "c"})
    with pytest.raises(KafkaException) as info:
        stalled.commit_transaction(10)
    assert info.value.args[0].fatal()
    _close_quietly(stalled)
    assert [r.key for r in read_committed(store.topic)] == [b"connector-c"]
    assert store.read_to_end(timeout=10).task_count_record("c") is None
