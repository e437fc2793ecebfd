"""KIP-618 "Worker lag after being assigned source task but before instantiating producer".

A task passes the generation check (step 2), then blocks before creating its producer; meanwhile
the connector is reconfigured and the new generation's instance of the same task runs. When the
laggard wakes up it creates its producer (fencing the new instance's producer, which shares its
transactional id), re-reads the generation (step 5), sees it is superseded and abandons start-up
without writing. The fenced new instance fails and is restarted; the output has no duplicate and
no gap. The coordinator is the pluggable start-up interface, so the delay is injected there.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from eosconnect.connectors.sequence import parse_value
from eosconnect.runtime.control import Directive, TaskControl
from eosconnect.runtime.executor import run_source_task
from eosconnect.runtime.startup import LocalStartupCoordinator
from eosconnect.runtime.task import TASK_CLASS_KEY, TaskSpec, TaskState
from eosconnect.storage.offsets import read_offsets
from eosconnect.tools.verify import check_sequences

pytestmark = pytest.mark.kafka


class LaggingCoordinator(LocalStartupCoordinator):
    """Blocks after its first generation check until released; the generation is shared state."""

    def __init__(self, *args, generation_box: list[int], release: threading.Event, **kwargs):
        super().__init__(*args, **kwargs)
        self.generation_box = generation_box
        self.release = release
        self.checks = 0

    def ensure_latest_generation(self, connector: str, generation: int) -> None:
        self.generation = self.generation_box[0]
        super().ensure_latest_generation(connector, generation)
        self.checks += 1
        if self.checks == 1:
            assert self.release.wait(60)
            self.generation = self.generation_box[0]


class StopAfter(TaskControl):
    def __init__(self, polls: int) -> None:
        self.polls, self.calls = polls, 0

    def directive(self) -> Directive:
        self.calls += 1
        return Directive.STOP if self.calls > self.polls else Directive.RUN


def test_lagging_task_abandons_startup_without_duplicates(
    bootstrap, create_topic, topic_name, worker_props, read_committed
):
    data = create_topic(topic_name("data"))
    worker = worker_props("enabled")
    create_topic(worker["offset.storage.topic"], config={"cleanup.policy": "compact"})
    name = f"lag-{uuid.uuid4().hex[:6]}"
    connector = {
        "name": name,
        "connector.class": "SequenceSource",
        "topic": data,
        "records.per.task": "300",
        "batch.size": "10",
    }
    task_config = {
        **connector,
        "task.index": "0",
        TASK_CLASS_KEY: "eosconnect.connectors.sequence.SequenceSourceTask",
    }
    generation, release = [0], threading.Event()

    def spec(gen: int, coordinator, polls: int) -> TaskSpec:
        return TaskSpec(
            name, 0, task_config, connector, worker, StopAfter(polls), coordinator, generation=gen
        )

    laggard_coordinator = LaggingCoordinator(
        worker["group.id"], {"bootstrap.servers": bootstrap}, 1, generation_box=generation, release=release
    )
    outcomes: dict[str, object] = {}
    laggard = threading.Thread(
        target=lambda: outcomes.update(laggard=run_source_task(spec(0, laggard_coordinator, 30)))
    )
    laggard.start()
    while laggard_coordinator.checks == 0:
        time.sleep(0.05)

    generation[0] = 1  # the connector is reconfigured: generation 1 replaces generation 0
    successor_coordinator = LocalStartupCoordinator(
        worker["group.id"], {"bootstrap.servers": bootstrap}, 1, generation=1
    )
    successor = threading.Thread(
        target=lambda: outcomes.update(first=run_source_task(spec(1, successor_coordinator, 100)))
    )
    successor.start()
    deadline = time.monotonic() + 60
    while len(read_committed(data)) < 50 and time.monotonic() < deadline:
        time.sleep(0.2)
    release.set()
    laggard.join(60)
    successor.join(60)

    assert outcomes["laggard"].state is TaskState.SUPERSEDED  # type: ignore[attr-defined]
    # The laggard's producer creation fenced the successor (same transactional id): it fails
    # rather than write twice, and its restart resumes from the committed offsets.
    restart = run_source_task(spec(1, successor_coordinator, 100))
    assert restart.state is TaskState.STOPPED, restart.trace
    observed = [parse_value(r.value) for r in read_committed(data)]
    last = read_offsets({"bootstrap.servers": bootstrap}, worker["offset.storage.topic"])[name]
    (offset,) = last.values()
    report = check_sequences(observed, {0: int(offset["seq"]) + 1})
    assert report.ok, report.anomalies
    assert report.seen == 300
