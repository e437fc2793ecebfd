"""A source task fenced while the leader says it is the task's current instance renews its producer
and sends its open transaction again (issue 25).

The chaos soak found the cause: a replaced instance frozen with SIGSTOP and thawed after its
successor started still had a transaction to abort; its librdkafka producer asked the coordinator
for an epoch bump (KIP-360) with its producer id and old epoch, and because the successor's
transaction was open, the coordinator aborted that transaction and bumped the epoch before it
checked the zombie's epoch. The successor, the task's current instance, was fenced, failed with an
ERROR and stayed FAILED. Here the same fence comes from a second producer with the task's
transactional id (a real broker, a real fence); the leader's answers come from a scripted control,
which says what the leader says in that case: this instance is the current one.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer

from eosconnect.connectors.sequence import parse_value
from eosconnect.runtime.task import TaskState
from eosconnect.storage.offsets import read_offsets
from eosconnect.storage.transactional_ids import task_transactional_id
from eosconnect.tools.verify import check_sequences
from support import fence_at_commit
from support.scripted_leader import ScriptedLeader, source_task_thread

pytestmark = pytest.mark.kafka

TOTAL = 600


def test_a_source_task_fenced_while_current_renews_its_producer_and_sends_again(
    bootstrap, create_topic, topic_name, worker_props, read_committed
):
    data = create_topic(topic_name("data"))
    worker = worker_props("enabled")
    create_topic(worker["offset.storage.topic"], config={"cleanup.policy": "compact"})
    name = f"fenced-current-{uuid.uuid4().hex[:6]}"
    task, control, outcome = source_task_thread(
        bootstrap,
        worker,
        name,
        data,
        "eosconnect.connectors.sequence.SequenceSourceTask",
        TOTAL,
        **{
            "rate.per.task": "100",
            # transactions open for a second at a time: a fence almost always finds one open
            "transaction.boundary": "interval",
            "transaction.boundary.interval.ms": "1000",
        },
    )
    task.start()

    deadline = time.monotonic() + 60
    while len(read_committed(data)) < 100 and time.monotonic() < deadline:
        time.sleep(0.2)
    # What the zombie's epoch bump did: the task's transactional id gets a newer epoch while the
    # task's transaction is open; the coordinator aborts that transaction.
    fencer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": task_transactional_id(worker["group.id"], name, 0),
        }
    )
    fencer.init_transactions(30)
    fencer.flush(0)

    deadline = time.monotonic() + 120
    while task.is_alive() and time.monotonic() < deadline:
        observed = read_committed(data, timeout=10)
        if len(observed) >= TOTAL:
            break
        time.sleep(0.5)
    control.stop.set()
    task.join(60)

    result = outcome["result"]
    assert result.state is TaskState.STOPPED, result.trace  # type: ignore[attr-defined]
    assert control.asked_superseded >= 1 and control.asked_current >= 1  # it asked before it renewed
    observed = [parse_value(r.value) for r in read_committed(data)]
    (offset,) = read_offsets({"bootstrap.servers": bootstrap}, worker["offset.storage.topic"])[name].values()
    report = check_sequences(observed, {0: int(offset["seq"]) + 1})
    assert report.ok, report.anomalies
    assert report.seen == TOTAL


def test_a_source_task_fenced_right_before_its_commit_while_current_sends_it_again(
    bootstrap, create_topic, topic_name, worker_props, read_committed, caplog
):
    """The fence lands once every record of the transaction was delivered, right before its offsets
    and its commit go out (the chaos soak's seed 1412404671 met such a fence after a broker kill;
    the test above met it at the commit itself in a CI run). librdkafka reports it on the offsets'
    produce request (the usual case here) or as the commit's answer, which does not say whether the
    transaction committed; either way the task, confirmed current, renews its producer and sends
    the transaction again (at the commit only after reading its offsets back and finding them
    missing): every record exactly once, the task never FAILED."""
    data = create_topic(topic_name("data"))
    worker = worker_props("enabled")
    create_topic(worker["offset.storage.topic"], config={"cleanup.policy": "compact"})
    name = f"fenced-commit-{uuid.uuid4().hex[:6]}"
    task_class = f"{fence_at_commit.__name__}.FenceAtCommitTask"
    task, control, outcome = source_task_thread(
        bootstrap, worker, name, data, task_class, TOTAL, **{"rate.per.task": "200"}
    )
    fence_at_commit.HOLD.reset()
    fence_at_commit.OFFSETS_TOPIC["name"] = worker["offset.storage.topic"]
    caplog.set_level("INFO", logger="eosconnect")
    task.start()
    try:
        deadline = time.monotonic() + 60
        while len(read_committed(data)) < 100 and time.monotonic() < deadline:
            time.sleep(0.2)
        fence_at_commit.HOLD.arm.set()
        assert fence_at_commit.HOLD.at_commit.wait(30), "no commit was held"
        transactional_id = task_transactional_id(worker["group.id"], name, 0)
        fencer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
        fencer.init_transactions(30)  # the task's transaction is open: the coordinator aborts it
        fencer.flush(0)
    finally:
        fence_at_commit.HOLD.released.set()

    deadline = time.monotonic() + 120
    while task.is_alive() and len(read_committed(data, timeout=10)) < TOTAL and time.monotonic() < deadline:
        time.sleep(0.5)
    control.stop.set()
    task.join(60)

    result = outcome["result"]
    assert result.state is TaskState.STOPPED, result.trace  # type: ignore[attr-defined]
    resent = [r.getMessage() for r in caplog.records if "sending them again from memory" in r.getMessage()]
    assert resent and all("fenced" in m for m in resent), resent
    observed = [parse_value(r.value) for r in read_committed(data)]
    (offset,) = read_offsets({"bootstrap.servers": bootstrap}, worker["offset.storage.topic"])[name].values()
    report = check_sequences(observed, {0: int(offset["seq"]) + 1})
    assert report.ok, report.anomalies
    assert report.seen == TOTAL


def test_an_instance_renewed_on_an_old_word_does_not_send_again_what_a_newer_one_committed(
    bootstrap, create_topic, topic_name, worker_props, read_committed, caplog
):
    """An instance told "current" by a leader whose word is already old: the chaos soak froze a slot
    host while one of its tasks renewed its producer, ran the task elsewhere meanwhile, and on SIGCONT
    the frozen renewal completed and committed its transaction from memory again (20 records the new
    instance had committed already). Here instance A is held at a commit while instance B of the same
    task starts (fencing A) and commits past A's position; A, released and confirmed current by its
    scripted leader (whose word then turns, as the real leader's would), renews its producer (fencing
    B), finds the stored offsets moved past its own and ends quietly without sending anything; B,
    fenced in turn and confirmed current, goes on. Every record exactly once."""
    data = create_topic(topic_name("data"))
    worker = worker_props("enabled")
    create_topic(worker["offset.storage.topic"], config={"cleanup.policy": "compact"})
    name = f"overtaken-{uuid.uuid4().hex[:6]}"
    settings = {"rate.per.task": "200"}
    first, first_control, first_outcome = _held_on_an_old_word(bootstrap, worker, name, data, settings)
    fence_at_commit.HOLD.reset()
    fence_at_commit.OFFSETS_TOPIC["name"] = worker["offset.storage.topic"]
    caplog.set_level("INFO", logger="eosconnect")
    first.start()
    second, second_control, second_outcome = source_task_thread(
        bootstrap, worker, name, data, "eosconnect.connectors.sequence.SequenceSourceTask", TOTAL, **settings
    )
    try:
        deadline = time.monotonic() + 60
        while len(read_committed(data)) < 100 and time.monotonic() < deadline:
            time.sleep(0.2)
        before = len(read_committed(data))
        fence_at_commit.HOLD.arm.set()
        assert fence_at_commit.HOLD.at_commit.wait(30), "no commit was held"
        # not read meanwhile: the held transaction holds read_committed readers back until B starts
        second.start()  # fences the held instance and goes on from the stored offsets
        deadline = time.monotonic() + 60
        while len(read_committed(data, timeout=10)) < before + 100 and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        fence_at_commit.HOLD.released.set()
    first.join(120)
    assert not first.is_alive(), "the overtaken instance did not end"
    _run_to_the_end_and_check(second, second_control, data, read_committed, bootstrap, worker, name)
    overtaken = first_outcome["result"]
    assert overtaken.state is TaskState.SUPERSEDED, overtaken.trace  # type: ignore[attr-defined]
    assert "another instance of this task committed meanwhile" in caplog.text
    assert first_control.asked_current >= 1  # it was told "current", renewed, and still held back
    assert second_outcome["result"].state is TaskState.STOPPED, second_outcome["result"].trace  # type: ignore[attr-defined]


def test_a_current_instance_overtaken_by_a_zombie_starts_again_from_the_stored_offsets(
    bootstrap, create_topic, topic_name, worker_props, read_committed, caplog
):
    """The other way round: the zombie commits first. Instance A is held at a commit; instance B of
    the same task starts (fencing A) and is held at its own first commit. A, released and told
    "current" on an old word, renews its producer (fencing B and ending B's open transaction), finds
    the stored offsets still its own and commits its transaction from memory. B, released, is fenced
    at its commit, confirmed current, renews in turn and finds the stored offsets moved past the ones
    it started from: what its SourceTask handed over no longer comes next. It restarts the task from
    the stored offsets instead of failing (before, it FAILED with an ERROR), and goes on to the end.
    Every record exactly once."""
    data = create_topic(topic_name("data"))
    worker = worker_props("enabled")
    create_topic(worker["offset.storage.topic"], config={"cleanup.policy": "compact"})
    name = f"zombie-first-{uuid.uuid4().hex[:6]}"
    settings = {"rate.per.task": "200"}
    zombie, zombie_control, zombie_outcome = _held_on_an_old_word(bootstrap, worker, name, data, settings)
    current, current_control, current_outcome = source_task_thread(
        bootstrap, worker, name, data, f"{fence_at_commit.__name__}.SecondHoldTask", TOTAL, **settings
    )
    fence_at_commit.HOLD.reset()
    fence_at_commit.SECOND_HOLD.reset()
    fence_at_commit.SECOND_HOLD.arm.set()  # its first commit
    fence_at_commit.OFFSETS_TOPIC["name"] = worker["offset.storage.topic"]
    caplog.set_level("INFO", logger="eosconnect")
    zombie.start()
    try:
        deadline = time.monotonic() + 60
        while len(read_committed(data)) < 100 and time.monotonic() < deadline:
            time.sleep(0.2)
        fence_at_commit.HOLD.arm.set()
        assert fence_at_commit.HOLD.at_commit.wait(30), "the zombie's commit was not held"
        current.start()  # fences the held zombie, starts from the stored offsets
        assert fence_at_commit.SECOND_HOLD.at_commit.wait(60), "the current instance's commit was not held"
        # (no read_committed read meanwhile: the held transaction holds readers back)
        fence_at_commit.HOLD.released.set()  # the zombie renews, fencing the current instance
        zombie_control.stop.set()  # its loop sees it once its transaction is sent again
        zombie.join(90)
        assert not zombie.is_alive(), "the zombie did not end"
    finally:
        fence_at_commit.HOLD.released.set()
        fence_at_commit.SECOND_HOLD.released.set()
    # the zombie's transaction, sent again from memory, committed past where the current one started
    assert zombie_outcome["result"].state is TaskState.STOPPED, zombie_outcome["result"].trace  # type: ignore[attr-defined]
    assert zombie_control.asked_current == 1
    _run_to_the_end_and_check(current, current_control, data, read_committed, bootstrap, worker, name)
    survivor = current_outcome["result"]
    assert survivor.state is TaskState.STOPPED, survivor.trace  # type: ignore[attr-defined]
    assert "restarting SecondHoldTask from the stored offsets" in caplog.text


def _run_to_the_end_and_check(
    task: threading.Thread,
    control: ScriptedLeader,
    data: str,
    read_committed: Callable[..., list[Any]],
    bootstrap: str,
    worker: dict[str, str],
    name: str,
) -> None:
    """Let the surviving instance write all `TOTAL` records (or end), stop it, and check that the
    data topic holds every record exactly once (read_committed) up to the stored offset."""
    deadline = time.monotonic() + 120
    while task.is_alive() and time.monotonic() < deadline:
        if len(read_committed(data, timeout=10)) >= TOTAL:
            break
        time.sleep(0.5)
    control.stop.set()
    task.join(60)
    observed = [parse_value(r.value) for r in read_committed(data)]
    (offset,) = read_offsets({"bootstrap.servers": bootstrap}, worker["offset.storage.topic"])[name].values()
    report = check_sequences(observed, {0: int(offset["seq"]) + 1})
    assert report.ok, report.anomalies
    assert report.seen == TOTAL


def _held_on_an_old_word(
    bootstrap: str, worker: dict[str, str], name: str, data: str, settings: dict[str, str]
) -> tuple[threading.Thread, ScriptedLeader, dict[str, object]]:
    """An instance whose commit `fence_at_commit.HOLD` can hold, and whose leader answers "not
    superseded" and "current" to the two questions before it renews, "replaced" after."""
    return source_task_thread(
        bootstrap,
        worker,
        name,
        data,
        f"{fence_at_commit.__name__}.FenceAtCommitTask",
        TOTAL,
        current_for=2,
        **settings,
    )
