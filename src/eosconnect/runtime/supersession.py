"""Whether a task that lost its transactional id was replaced by design (KIP-618 zombie fencing).

A task instance is fenced when a newer instance of the same task initialises its producer: a
restart over REST, the leader relaunching tasks after it regained leadership, a new generation, a
later Spark attempt. The newer instance is started once the older one has ended or been abandoned
(it did not stop in time, say while a broker restart held up its commit), and its
`init_transactions()` is what makes the older one harmless: that is the design, not a failure.
The older instance then ends quietly at INFO (SUPERSEDED: no FAILED status, no ERROR line).

Only the leader can tell a replaced instance from one fenced for a reason of its own (its
transaction outlived `transaction.timeout.ms` and the broker aborted it while it was still the
task's current instance): the task asks it (`CurrentInstance.superseded`, through
`TaskControl.leader`); a task without a leader to ask (single-process runs) fails.
"""

from __future__ import annotations

from eosconnect.runtime.task import TaskSpec
from eosconnect.runtime.transactions.errors import (
    TaskFencedError,
    TransactionCallHung,
    TransactionTimedOutError,
)

#: Failures a replaced instance meets once its successor fenced it (a librdkafka call can also hang
#: then, when the broker that coordinated its group died meanwhile).
_REPLACED_SYMPTOMS = (TaskFencedError, TransactionTimedOutError, TransactionCallHung)

__all__ = ["replaced_by_design"]


def replaced_by_design(spec: TaskSpec, exc: BaseException) -> bool:
    """True if `exc` fenced this instance (or timed its transaction out, or hung its producer)
    while a newer instance of the task had taken over, as the leader confirms."""
    if not isinstance(exc, _REPLACED_SYMPTOMS):
        return False
    leader = spec.control.leader
    return leader is not None and leader.superseded()
