"""Offsets of STOPPED connectors: read, alter, reset (KIP-875).

Source offsets live in the worker's offsets topic (and the connector's own one, if it has one);
sink offsets are the connector's consumer group's. Altering or resetting them needs the connector
STOPPED (a request right after `PUT /stop` waits for the tasks to be down, as Kafka Connect's herder
finishes the stop before it serves the next request). On an exactly-once worker the connector's last
generation is fenced before offsets are written, so a zombie cannot commit over them. The connector
has its say first (`SourceConnector.alter_offsets`, the sink connector's hook), and may refuse (400).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from eosconnect.api.errors import ConfigException, ConnectException
from eosconnect.api.records import SourceOffset, SourcePartition, TopicPartition
from eosconnect.api.source import SourceConnector
from eosconnect.cluster.connector_kinds import (
    alter_sink_connector_offsets,
    fencing_producer_config,
    kind_of_config,
)
from eosconnect.cluster.herder_api import BadRequestError
from eosconnect.cluster.herder_state import TICK_S, HerderState
from eosconnect.plugins.loading import connector_class_of
from eosconnect.runtime.config import sink_consumer_group
from eosconnect.storage import sink_offsets
from eosconnect.storage.clients import client_config
from eosconnect.storage.config_state import ConfigSnapshot, TargetState
from eosconnect.storage.offsets import (
    ConnectorOffsetView,
    OffsetsTopicPlacement,
    offsets_topic_for,
    write_offsets,
)
from eosconnect.storage.transactional_ids import fence_transactional_ids, task_transactional_id


class OffsetsAdmin(HerderState):
    """The `/connectors/<c>/offsets` requests (leader only, except reading)."""

    def _stopped_connector(self, name: str) -> tuple[ConfigSnapshot, OffsetsTopicPlacement]:
        snapshot = self._snapshot_with(name)
        if snapshot.target_state(name) == TargetState.STOPPED:
            self._wait_for_run_to_end(name)
        if snapshot.target_state(name) != TargetState.STOPPED or name in self._runs:
            raise BadRequestError(
                f"Connectors must be in the STOPPED state before their offsets can be modified. This can be "
                "done for the specified connector by issuing a 'PUT' request to the "
                f"'/connectors/{name}/stop' endpoint"
            )
        config = dict(snapshot.connector_config(name) or {})
        return snapshot, offsets_topic_for(name, config, self.worker.originals)

    def _wait_for_run_to_end(self, name: str) -> None:
        """A stop is accepted before the tasks are down: they see it on their next heartbeat, report
        STOPPED, and the herder reaps their Spark job a tick later. Kafka Connect's herder finishes
        the stop before it serves the next request, so an offsets request right after PUT /stop (or
        once the status says STOPPED) succeeds there; wait for the run here instead of refusing.
        Bounded: a run still there after the graceful shutdown timeout is abandoned (leaves _runs)."""
        graceful_s = self.worker.task_shutdown_graceful_timeout_ms / 1000
        deadline = time.monotonic() + graceful_s + 4 * TICK_S
        while name in self._runs and time.monotonic() < deadline:
            self._wake()
            time.sleep(0.05)

    def _sink_admin_config(self, snapshot: ConfigSnapshot, name: str) -> dict[str, Any] | None:
        """The admin settings for a sink connector's consumer group; None for a source connector."""
        config = snapshot.connector_config(name)
        if not kind_of_config(config).is_sink:
            return None
        return client_config("admin", self.worker.originals, config)

    def connector_offsets(self, name: str) -> dict[str, Any]:
        snapshot = self._snapshot_with(name)
        sink_admin = self._sink_admin_config(snapshot, name)
        if sink_admin is not None:
            return {"offsets": sink_offsets.read_sink_offsets(sink_admin, sink_consumer_group(name))}
        placement = offsets_topic_for(
            name, dict(snapshot.connector_config(name) or {}), self.worker.originals
        )
        view = ConnectorOffsetView.create(name, placement)
        return {
            "offsets": [
                {"partition": partition.to_dict(), "offset": offset.to_dict()}
                for partition, offset in view.snapshot().items()
            ]
        }

    def _write_offsets_of_stopped(
        self, name: str, offsets: dict[SourcePartition, SourceOffset | None]
    ) -> None:
        self._require_leader()
        snapshot, placement = self._stopped_connector(name)
        if self.worker.exactly_once_enabled:
            self._fence_last_generation(snapshot, name)
        write_offsets(
            placement.client if placement.separate else placement.global_producer_config,
            placement.topic,
            name,
            offsets,
        )
        if placement.separate:
            write_offsets(placement.global_producer_config, placement.global_topic, name, offsets)

    def _fence_last_generation(self, snapshot: ConfigSnapshot, name: str) -> None:
        """Zombies of the last generation could still commit offsets over the user's: fence them."""
        count = max(snapshot.task_count_record(name) or 0, snapshot.task_count(name))
        fence_transactional_ids(
            fencing_producer_config(self.worker.originals, snapshot.connector_config(name) or {}),
            [task_transactional_id(self.worker.group_id, name, t) for t in range(count)],
        )

    def _sink_offsets_of_stopped(
        self, name: str, offsets: Mapping[TopicPartition, int] | None
    ) -> dict[str, Any] | None:
        """For a STOPPED sink connector: its own say first (KIP-875's hook, e.g. an exactly-once
        mirror's target-side offsets, after fencing its zombies), then the admin settings for its
        consumer group. None for a source connector."""
        self._require_leader()
        sink_admin = self._sink_admin_config(self._snapshot_with(name), name)
        if sink_admin is not None:
            snapshot, _ = self._stopped_connector(name)  # raises unless STOPPED (waiting for a stop)
            config = snapshot.connector_config(name) or {}
            if self._uses_fencing(config):
                self._fence_last_generation(snapshot, name)
            try:
                alter_sink_connector_offsets(config, offsets)
            except ConfigException as exc:
                raise BadRequestError(str(exc), exc.errors) from None
        return sink_admin

    def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        self._require_leader()
        if self._sink_admin_config(self._snapshot_with(name), name) is not None:
            try:
                parsed_sink = sink_offsets.parse_sink_offsets(offsets)
            except ConfigException as exc:
                raise BadRequestError(str(exc), exc.errors) from None
            wanted = {TopicPartition(tp.topic, tp.partition): tp.offset for tp in parsed_sink}
            sink_admin = self._sink_offsets_of_stopped(name, wanted)
            assert sink_admin is not None
            sink_offsets.alter_sink_offsets(sink_admin, sink_consumer_group(name), parsed_sink)
            return "The offsets for this connector have been altered successfully"
        parsed: dict[SourcePartition, SourceOffset | None] = {}
        for i, entry in enumerate(offsets):
            try:
                partition = SourcePartition.of(entry["partition"])
                offset = entry.get("offset")
                parsed[partition] = None if offset is None else SourceOffset.of(offset)
            except (KeyError, TypeError, ValueError) as exc:
                raise BadRequestError(
                    f'offsets[{i}] must be {{"partition": {{...}}, "offset": {{...}}}}: {exc}'
                ) from None
        self._require_leader()
        self._stopped_connector(name)  # 400 unless STOPPED, before the connector is asked
        self._source_alter_offsets(name, parsed)
        self._write_offsets_of_stopped(name, parsed)
        return "The offsets for this connector have been altered successfully"

    def _source_alter_offsets(self, name: str, offsets: dict[SourcePartition, SourceOffset | None]) -> None:
        """KIP-875: the source connector has its say before anything is written (400 if it refuses)."""
        config = dict(self._snapshot_with(name).connector_config(name) or {})
        try:
            connector = connector_class_of(config)()
        except (ConfigException, TypeError):
            return  # a class that cannot load has no say; the stored config still names it
        if not isinstance(connector, SourceConnector):
            return
        try:
            connector.alter_offsets(config, offsets)
        except (ConfigException, ValueError, TypeError, ConnectException) as exc:
            raise BadRequestError(f"Failed to alter offsets of connector {name}: {exc}") from None

    def reset_connector_offsets(self, name: str) -> str:
        sink_admin = self._sink_offsets_of_stopped(name, None)
        if sink_admin is not None:
            sink_offsets.reset_sink_offsets(sink_admin, sink_consumer_group(name))
            return "The offsets for this connector have been reset successfully"
        current = self.connector_offsets(name)["offsets"]
        tombstones: dict[SourcePartition, SourceOffset | None] = {
            SourcePartition.of(o["partition"]): None for o in current
        }
        self._stopped_connector(name)  # 400 unless STOPPED, before the connector is asked
        self._source_alter_offsets(name, tombstones)
        self._write_offsets_of_stopped(name, tombstones)
        return "The offsets for this connector have been reset successfully"
