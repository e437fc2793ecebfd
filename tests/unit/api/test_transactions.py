"""RequestedTransactionContext: how connector-defined transaction boundaries reach the runtime."""

from __future__ import annotations

import threading

import pytest

from eosconnect.api import (
    RequestedTransactionContext,
    SourceRecord,
    TransactionContext,
    TransactionRequestConflict,
)


def rec(n: int) -> SourceRecord:
    return SourceRecord({"p": 0}, {"n": n}, "t", {"n": n})


def test_batch_requests_are_answered_once() -> None:
    ctx = RequestedTransactionContext()
    assert isinstance(ctx, TransactionContext)
    assert not ctx.should_commit_batch() and not ctx.should_abort_batch()
    ctx.commit_transaction()
    assert ctx.has_pending_requests()
    assert not ctx.should_abort_batch()
    assert ctx.should_commit_batch()
    assert not ctx.should_commit_batch()  # consumed
    ctx.abort_transaction()
    assert ctx.should_abort_batch() and not ctx.has_pending_requests()


def test_record_requests_match_by_identity() -> None:
    ctx = RequestedTransactionContext()
    first, twin = rec(1), rec(1)
    assert first == twin  # equal, but not the same object
    ctx.commit_transaction(first)
    ctx.abort_transaction(rec(2))
    assert not ctx.should_commit_on(twin)
    assert ctx.should_commit_on(first)
    assert not ctx.should_commit_on(first)
    assert not ctx.should_abort_on(first)


def test_commit_and_abort_of_the_same_record_fails_the_task() -> None:
    ctx = RequestedTransactionContext()
    record = rec(3)
    ctx.commit_transaction(record)
    ctx.abort_transaction(record)  # the task itself is not interrupted...
    assert ctx.conflict is not None and "same record" in ctx.conflict and "'t'" in ctx.conflict
    for ask in (ctx.check, ctx.should_commit_batch, lambda: ctx.should_commit_on(record)):
        with pytest.raises(TransactionRequestConflict, match="both a commit and an abort"):
            ask()  # ...but every runtime query raises until cleared
    ctx.clear()
    assert ctx.conflict is None and not ctx.should_commit_on(record)


def test_commit_and_abort_of_the_same_batch_fails_the_task() -> None:
    ctx = RequestedTransactionContext()
    ctx.abort_transaction()
    ctx.commit_transaction()
    with pytest.raises(TransactionRequestConflict, match="same batch"):
        ctx.should_abort_batch()


def test_different_records_do_not_conflict() -> None:
    ctx = RequestedTransactionContext()
    a, b = rec(1), rec(2)
    ctx.commit_transaction(a)
    ctx.abort_transaction(b)
    ctx.check()
    assert ctx.should_abort_on(b) and ctx.should_commit_on(a)


def test_requests_from_other_threads() -> None:
    ctx = RequestedTransactionContext()
    records = [rec(i) for i in range(200)]
    threads = [threading.Thread(target=ctx.commit_transaction, args=(r,)) for r in records]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(ctx.should_commit_on(r) for r in records)
