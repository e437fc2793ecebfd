"""The leader's zombie fencing rounds for a connector's new generation (KIP-618, docs/architecture.md).

Before tasks of a new generation produce, every producer an earlier generation may still hold is
fenced (storage/fencing_round.py does the round). Each task asks for the round in step 1 of its
exactly-once start-up (internal REST request); the leader also starts it as soon as it launches the
generation (`_fence_ahead`), so the tasks' requests mostly find it done and are answered at once.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from confluent_kafka import KafkaException

from eosconnect.cluster.connector_kinds import fencing_producer_config
from eosconnect.cluster.herder_api import ConflictError, HerderError, NotFoundError, NotLeaderError
from eosconnect.cluster.herder_state import HerderState
from eosconnect.storage.acls import fencing_authorization_hint
from eosconnect.storage.config_state import ConfigSnapshot
from eosconnect.storage.config_writers import FencingConflict, LeaderFencedError
from eosconnect.storage.fencing_round import perform_fencing_round
from eosconnect.storage.transactional_ids import FencingError

log = logging.getLogger(__name__)


class ZombieFencing(HerderState):
    """`fence_zombies` (the internal request) and fencing ahead of a launched generation."""

    def fence_zombies(self, name: str, generation: int | None = None) -> None:
        self._require_leader()
        if generation is not None and self._already_fenced(self.config_store.snapshot, name, generation):
            return  # every task of a generation asks; only the first needs a round
        lock = self._fence_locks.setdefault(name, threading.Lock())
        with lock:
            if generation is not None and self._already_fenced(self.config_store.snapshot, name, generation):
                return
            snapshot = self.config_store.read_to_end()
            if not snapshot.contains(name):
                raise NotFoundError(f"Connector {name} not found")
            # Fencing runs with the connector's producer settings. When they cannot reach the
            # cluster, init_transactions() only says "timed out"; the clients' error callbacks
            # say why (connection refused, authentication failed, ...): keep those for the answer.
            producer_config = fencing_producer_config(
                self.worker.originals, snapshot.connector_config(name) or {}
            )
            client_errors: list[str] = []

            def on_client_error(err: Any) -> None:
                text = str(err.str() if hasattr(err, "str") else err)
                if text not in client_errors and len(client_errors) < 5:
                    client_errors.append(text)

            producer_config["error_cb"] = on_client_error
            try:
                perform_fencing_round(self.config_store, snapshot, name, producer_config)
                self._fencing_rounds[name] = self._fencing_rounds.get(name, 0) + 1
            except FencingConflict as exc:
                raise ConflictError(
                    f"new task configs for connector {name} arrived during fencing: {exc}"
                ) from exc
            except FencingError as exc:
                servers = producer_config.get("bootstrap.servers")
                reported = f"; the producers reported: {'; '.join(client_errors)}" if client_errors else ""
                hint = fencing_authorization_hint(
                    f"{exc} {reported}", self.worker.originals, name, snapshot.connector_config(name) or {}
                )
                raise HerderError(
                    f"zombie fencing for connector {name} failed: {exc} (connector producer "
                    f"bootstrap.servers={servers}){reported}{f'. {hint}' if hint else ''}"
                ) from exc
            except LeaderFencedError as exc:
                raise NotLeaderError(self.election.leader_url(max_age_s=0)) from exc
            except KafkaException as exc:  # e.g. TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                hint = fencing_authorization_hint(
                    str(exc), self.worker.originals, name, snapshot.connector_config(name) or {}
                )
                raise HerderError(
                    f"zombie fencing for connector {name} failed: {exc}{f'. {hint}' if hint else ''}"
                ) from exc

    def _fence_ahead(self, name: str, generation: int) -> None:
        """Run the generation's fencing round while Spark launches its tasks, as Kafka Connect's
        leader fences before it assigns them: the tasks' own fence requests (step 1 of their
        start-up) then find it done and are answered at once. A failure here is only logged: the
        tasks ask again, and their request reports the error."""
        try:
            self.fence_zombies(name, generation)
        except Exception as exc:
            log.info("connector %s: fencing ahead of its tasks failed (they will ask again): %s", name, exc)

    @staticmethod
    def _already_fenced(snapshot: ConfigSnapshot, name: str, generation: int) -> bool:
        """The round for `generation` (or a later one) is done, as this leader last read the topic.

        Safe to answer from memory: only the leader writes task configs, so a newer generation than
        the one in memory cannot be fenced yet without this worker knowing; and the task re-checks
        its generation against the topic itself right after (docs/architecture.md, step 2)."""
        latest = snapshot.generation(name)
        return latest is not None and latest >= generation and not snapshot.pending_fencing(name)
