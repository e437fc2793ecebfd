"""The worker's own principal on a secured cluster: without one of its ACLs on the internal topics
or its group it fails at start, before Spark, with one line naming the principal, the operation,
the resource and the `kafka-acls.sh` command that grants it (it used to hang or fail later)."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from eosconnect.devkafka import LocalKafkaCluster
from support.secured import create_topics, internal_topics, kip618_worker_acls, worker_settings

pytestmark = [pytest.mark.kafka, pytest.mark.secured]

MISSING = {
    "read-configs": ("Read", "Topic", "{group}-configs"),
    "write-configs": ("Write", "Topic", "{group}-configs"),
    "read-offsets": ("Read", "Topic", "{group}-offsets"),
    "write-offsets": ("Write", "Topic", "{group}-offsets"),
    "read-status": ("Read", "Topic", "{group}-status"),
    "write-status": ("Write", "Topic", "{group}-status"),
    "read-group": ("Read", "Group", "{group}"),
    # the config topic not made by an administrator, and the worker may not create it
    "create-configs": ("Create", "Topic", "{group}-configs"),
}


@pytest.mark.parametrize("case", sorted(MISSING))
def test_a_worker_without_one_of_its_acls_fails_at_start_naming_it(
    secured_kafka: LocalKafkaCluster, tmp_path: Path, case: str
):
    group = f"wacl-{uuid.uuid4().hex[:6]}"
    operation, rtype, pattern = MISSING[case]
    resource = pattern.format(group=group)
    topics = [t for t in internal_topics(group).values() if (operation, t) != ("Create", resource)]
    create_topics(secured_kafka, dict.fromkeys(topics, 1), set(topics))
    worker = f"{group}-worker"
    client = secured_kafka.create_user(worker)
    acls = kip618_worker_acls(worker, group)
    secured_kafka.grant(
        [a for a in acls if (a.operation, a.resource_type, a.resource_name) != (operation, rtype, resource)]
    )
    props = tmp_path / "worker.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in worker_settings(client, group).items()))
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "eosconnect.cli", "worker", str(props)],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    took = time.monotonic() - started
    errors = [line for line in run.stderr.splitlines() if line.startswith("Error:")]
    assert run.returncode == 2 and len(errors) == 1, (run.returncode, run.stdout, run.stderr)
    assert "Traceback" not in run.stderr + run.stdout and "starting Spark" not in run.stdout
    assert took < 45, f"took {took:.1f}s"
    flag = "--topic" if rtype == "Topic" else "--group"
    line = errors[0]
    assert f"User:{worker} needs {operation} on {rtype} '{resource}'" in line, line
    command = (
        f"kafka-acls.sh --bootstrap-server {secured_kafka.bootstrap_servers} --add --allow-principal "
        f"User:{worker} --operation {operation} {flag} {resource}"
    )
    assert command in line, line
    assert line.count(" needs ") == 1, line  # exactly the missing one, not the whole table
    assert client["sasl.password"] not in run.stderr + run.stdout


def test_a_leader_without_its_transactional_id_acl_is_told_which_and_how(
    secured_kafka: LocalKafkaCluster, tmp_path: Path
):
    """The leader's TransactionalId connect-cluster-<group.id> cannot be checked at start (asking
    would fence the current leader): claiming the config topic's write privileges names it and the
    kafka-acls.sh command that grants it (it said only TRANSACTIONAL_ID_AUTHORIZATION_FAILED)."""
    from eosconnect.storage.config_store import ConfigStore
    from eosconnect.storage.config_writers import ConfigWriteError
    from eosconnect.worker_config import WorkerConfig

    group = f"wtid-{uuid.uuid4().hex[:6]}"
    topics = internal_topics(group).values()
    create_topics(secured_kafka, dict.fromkeys(topics, 1), set(topics))
    worker = f"{group}-worker"
    client = secured_kafka.create_user(worker)
    secured_kafka.grant(
        [a for a in kip618_worker_acls(worker, group) if a.resource_type != "TransactionalId"]
    )
    store = ConfigStore(WorkerConfig.parse(worker_settings(client, group)), write_timeout_s=20)
    try:
        with pytest.raises(ConfigWriteError) as refused:
            store.claim_write_privileges()
    finally:
        store.close()
    command = (
        f"kafka-acls.sh --bootstrap-server {secured_kafka.bootstrap_servers} --add --allow-principal "
        f"User:{worker} --operation Write --transactional-id connect-cluster-{group}"
    )
    text = str(refused.value)
    assert f"User:{worker} needs Write on TransactionalId 'connect-cluster-{group}'" in text, text
    assert command in text, text
