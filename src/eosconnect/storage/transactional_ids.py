"""Task producers' transactional ids: how they are named, and fencing them out (KIP-618, docs/architecture.md
section 4).

Kafka client primitives used by the task loops (runtime/: a task's producer takes its id), by the
fencing round (storage/fencing_round.py) and by the herder (cluster/: fencing a stopped connector's
last generation before its offsets are altered); they live in storage/, the lowest of those layers.

librdkafka has no `fenceProducers` admin call, so an id is fenced the way the broker defines it:
a producer with that `transactional.id` calls `init_transactions()`, which bumps the epoch and rolls
back whatever transaction the previous holder left open; the producer is then closed unused.
Ids are fenced in parallel, one thread per id: librdkafka retries an `InitProducerId` answered with
CONCURRENT_TRANSACTIONS (the broker is still rolling back the zombie's transaction) only every
500 ms, so each id costs at least that much waiting, and waiting in batches would multiply it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import KafkaException, Producer

log = logging.getLogger(__name__)

#: Producers alive at once during a fencing round; each is mostly waiting on the broker.
MAX_PARALLEL_FENCES = 128


class FencingError(RuntimeError):
    """One or more ids could not be fenced; the message lists each id and why."""


def task_transactional_id(group_id: str, connector: str, task: int) -> str:
    return f"{group_id}-{connector}-{task}"


def fence_transactional_ids(
    producer_config: Mapping[str, Any], transactional_ids: Sequence[str], timeout_s: float = 30.0
) -> None:
    """Fence every id in parallel with the caller's client settings (the connector's principal)."""
    base = {k: v for k, v in producer_config.items() if k != "transactional.id"}

    def fence(tid: str) -> str | None:
        producer = Producer({**base, "transactional.id": tid})
        try:
            producer.init_transactions(timeout_s)
            return None
        except KafkaException as exc:
            return f"{tid}: {exc.args[0].str() if exc.args else exc}"
        finally:
            producer.flush(0)

    if not transactional_ids:
        return
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_FENCES, len(transactional_ids))) as pool:
        failures = [f for f in pool.map(fence, transactional_ids) if f]
    if failures:
        raise FencingError(
            f"could not fence {len(failures)} of {len(transactional_ids)} transactional ids "
            f"(check that the connector's producer settings reach the cluster and its principal may "
            f"write transactional ids): " + "; ".join(failures[:5])
        )
    log.info("fenced %d transactional ids: %s", len(transactional_ids), ", ".join(transactional_ids[:8]))
