"""What the console shows, in one JSON body: the cluster, every connector with its tasks, their
exactly-once health, dead letter counts and masked configs (`GET /console/api/state`).

Built from the same `Herder` calls the REST API answers (status, config, metrics view), so the page
shows what `GET /connectors/{c}/status` and `/metrics` would; secrets are masked as the REST API
masks them (rest/masking.py). The workers listed are this one, the leader, and every worker a
connector or task runs on: the workers the status topic knows of.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eosconnect.cluster.herder_api import Herder, HerderError
from eosconnect.rest.console_samples import ConsoleSamples, task_counters
from eosconnect.rest.masking import mask_config, mask_status

__all__ = ["console_state"]

#: Task snapshot entries the console's exactly-once panel shows, under the console's names.
_TASK_FIELDS = {
    "transactions-committed": "commits",
    "transactions-aborted": "aborts",
    "transaction-open-age-ms": "open_transaction_age_ms",
    "transaction-size-avg": "transaction_size_avg",
    "offset-commit-avg-time-ms": "offset_commit_avg_ms",
    "offset-commit-completion-total": "offset_commits",
    "sink-record-lag-max": "lag",
    "deadletterqueue-produce-requests": "dead_letters",
    "total-record-errors": "record_errors",
    "total-records-skipped": "records_skipped",
}


def _task_entry(
    task: Mapping[str, Any], snapshot: Mapping[str, Any] | None, rates: Mapping[str, float] | None
) -> dict[str, Any]:
    entry = dict(task)
    if snapshot is None:
        entry["metrics"] = None
        return entry
    metrics: dict[str, Any] = {name: snapshot.get(key) for key, name in _TASK_FIELDS.items()}
    metrics["records"] = task_counters(snapshot).records
    metrics.update(rates or {})
    entry["metrics"] = metrics
    return entry


def _connector_entry(
    herder: Herder,
    name: str,
    snapshots: Mapping[tuple[str, int], Mapping[str, Any]],
    rates: Mapping[tuple[str, int], Mapping[str, float]],
    fencing_rounds: Mapping[str, int],
) -> dict[str, Any] | None:
    try:
        config = herder.connector_config(name)
        status = mask_status(herder.connector_status(name), config)
    except HerderError:  # deleted between the list and now
        return None
    tasks = [
        _task_entry(t, snapshots.get((name, int(t["id"]))), rates.get((name, int(t["id"]))))
        for t in status.get("tasks") or []
    ]
    return {
        "name": name,
        "type": status.get("type"),
        "connector": status.get("connector") or {},
        "tasks": tasks,
        "config": mask_config(config),
        "dead_letter_topic": config.get("errors.deadletterqueue.topic.name") or None,
        "fencing_rounds": fencing_rounds.get(name),
        "exactly_once": str(config.get("exactly.once.support", "")).lower() != "disabled"
        if status.get("type") == "source"
        else None,
    }


def _workers(herder: Herder, leader: str | None, connectors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    counts: dict[str, int] = {herder.worker_id: 0}
    leader_id = leader.split("://", 1)[-1].rstrip("/") if leader else None
    if leader_id:
        counts.setdefault(leader_id, 0)
    for connector in connectors:
        for task in connector["tasks"]:
            worker = task.get("worker_id")
            if worker:
                counts[worker] = counts.get(worker, 0) + 1
        owner = connector["connector"].get("worker_id")
        if owner:
            counts.setdefault(owner, 0)
    return [
        {"id": worker, "leader": worker == leader_id, "this": worker == herder.worker_id, "tasks": tasks}
        for worker, tasks in sorted(counts.items())
    ]


def console_state(herder: Herder, samples: ConsoleSamples, version: str) -> dict[str, Any]:
    """The body of `GET /console/api/state`."""
    view = herder.metrics_view()
    snapshots = {(str(s.get("connector")), int(s.get("task", 0))): s for s in view.task_snapshots}
    rates = samples.task_rates()
    connectors = [
        entry
        for name in herder.connectors()
        if (entry := _connector_entry(herder, name, snapshots, rates, view.fencing_rounds)) is not None
    ]
    try:
        leader = herder.leader_url()
    except Exception:
        leader = None
    return {
        "worker": {
            "id": herder.worker_id,
            "url": herder.rest_url,
            "version": version,
            "leader": herder.is_leader(),
            "leader_url": leader,
            "kafka_cluster_id": herder.kafka_cluster_id(),
        },
        "workers": _workers(herder, leader, connectors),
        "connectors": connectors,
        "metrics_here": bool(view.task_snapshots) or herder.is_leader(),
    }
