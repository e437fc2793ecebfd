"""The status board answers from memory and never makes the herder wait for Kafka."""

from __future__ import annotations

import threading
import time

from eosconnect.cluster.status_board import StatusBoard
from eosconnect.storage.status_store import ConnectState, Status, StatusStateBuilder


class SlowStore:
    """A status store whose Kafka hangs until `release` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.written: list[tuple[str, object]] = []
        self.snapshot = StatusStateBuilder().snapshot()

    def put_connector_status(self, name: str, status: Status) -> bool:
        self.release.wait(30)
        self.written.append((f"connector-{name}", status.state))
        return True

    def put_task_status(self, name: str, task: int, status: Status) -> bool:
        self.release.wait(30)
        self.written.append((f"task-{name}-{task}", status.state))
        return True

    def delete_connector_status(self, name: str) -> None:
        self.written.append((f"connector-{name}", None))

    def delete_task_status(self, name: str, task: int) -> None:
        self.written.append((f"task-{name}-{task}", None))

    def read_to_end(self, timeout: float | None = None) -> object:
        self.release.wait(timeout)
        return self.snapshot


def test_published_statuses_are_answered_at_once_and_written_in_order() -> None:
    store = SlowStore()
    board = StatusBoard(store)  # type: ignore[arg-type]
    board.start()
    began = time.monotonic()
    board.put_task("c", 0, Status(ConnectState.UNASSIGNED, "w1", 3, "launched"))
    board.put_task("c", 0, Status(ConnectState.RUNNING, "w1", 3))
    board.put_connector("c", Status(ConnectState.RUNNING, "w1"))
    assert time.monotonic() - began < 0.5, "publishing waited for Kafka"
    task = board.published("c", 0)
    assert task is not None and task.state is ConnectState.RUNNING
    assert board.published("c") is not None and board.published("other", 0) is None

    store.release.set()
    board.stop()
    assert store.written == [
        ("task-c-0", ConnectState.UNASSIGNED),
        ("task-c-0", ConnectState.RUNNING),
        ("connector-c", ConnectState.RUNNING),
    ]


def test_delete_and_losing_leadership_forget_what_was_published() -> None:
    store = SlowStore()
    store.release.set()
    board = StatusBoard(store)  # type: ignore[arg-type]
    board.start()
    board.put_task("c", 0, Status(ConnectState.RUNNING, "w1", 1))
    board.put_task("d", 0, Status(ConnectState.RUNNING, "w1", 1))
    board.delete("c", 1)
    assert board.published("c", 0) is None and board.published("d", 0) is not None
    board.forget_published()
    assert board.published("d", 0) is None
    board.stop()
    assert ("connector-c", None) in store.written and ("task-c-0", None) in store.written
