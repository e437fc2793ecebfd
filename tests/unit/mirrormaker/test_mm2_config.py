"""mm2.properties as MirrorMaker 2 users write it: flows, per-cluster clients, KIP-656's type."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from eosconnect.launch import load_properties
from eosconnect.mirrormaker.config import MirrorMakerConfigError, plan

MM2 = r"""
# an MM2 file with Java escapes
clusters = A, B
A.bootstrap.servers = a-kafka\:9092
B.bootstrap.servers: b-kafka:9092
A->B.enabled = true
A->B.topics = orders.*, payments
topics.exclude = .*\.internal, test-.*
B->A.enabled = true
B->A.connector.type = sink
B->A.transaction.producer = true
B.exactly.once.source.support = enabled
A.consumer.fetch.min.bytes = 1
sync.group.offsets.enabled = true
emit.checkpoints.interval.seconds = 5
replication.factor = 3
tasks.max = 4
A.group.id\ with\ space = x\u00e9
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mm2.properties"
    path.write_text(text)
    return path


def test_java_properties_escapes(tmp_path: Path) -> None:
    props = load_properties(write(tmp_path, MM2))
    assert props["A.bootstrap.servers"] == "a-kafka:9092"
    assert props["B.bootstrap.servers"] == "b-kafka:9092"
    assert props["A.group.id with space"] == "xé"


def test_flows_become_one_worker_per_target(tmp_path: Path) -> None:
    props = load_properties(write(tmp_path, MM2))
    props.pop("A.group.id with space")
    result = plan(props)
    assert [str(f) for f in result.flows] == ["A->B", "B->A"]
    b = result.targets["B"]
    assert b.worker_props["bootstrap.servers"] == "b-kafka:9092"
    assert b.worker_props["exactly.once.source.support"] == "enabled"
    source = b.connectors["MirrorSourceConnector-A-B"]
    assert source["connector.class"] == "MirrorSource"
    assert source["source.cluster.bootstrap.servers"] == "a-kafka:9092"
    assert source["source.cluster.fetch.min.bytes"] == "1"  # A.consumer.* reaches A's consumer
    assert source["target.topic.replication.factor"] == "3" and source["tasks.max"] == "4"
    pattern = re.compile(source["topics.regex"])
    assert pattern.fullmatch("orders-eu") and pattern.fullmatch("payments")
    assert not pattern.fullmatch("test-orders") and not pattern.fullmatch("B.orders")  # no cycles
    checkpoint = b.connectors["MirrorCheckpointConnector-A-B"]
    assert checkpoint["sync.group.offsets.enabled"] == "true"
    assert checkpoint["emit.checkpoints.interval.seconds"] == "5"
    assert "MirrorHeartbeatConnector-A-B" in b.connectors
    # KIP-656: the sink type runs on the target's worker, consuming the source cluster.
    a = result.targets["A"]
    sink = a.connectors["MirrorSinkConnector-B-A"]
    assert sink["connector.class"] == "MirrorSink" and sink["transaction.producer"] == "true"
    assert sink["consumer.override.bootstrap.servers"] == "b-kafka:9092"
    assert sink["target.cluster.bootstrap.servers"] == "a-kafka:9092"
    assert a.worker_props["exactly.once.source.support"] == "enabled"  # needed by transaction.producer
    assert list(plan(props, ["A"]).targets) == ["A"]


@pytest.mark.parametrize(
    ("extra", "name"),
    [
        ("B->A.source.consumer.isolation.level = read_uncommitted", "B->A.source.consumer.isolation.level"),
        ("A.ssl.truststore.location = /etc/ks.jks", "A.ssl.truststore.location"),
        ("sync.topic.acls.enabled = true", "sync.topic.acls.enabled"),
        ("offset-syncs.topic.location = source", "offset-syncs.topic.location"),
        ("A->B.no.such.setting = 1", "A->B.no.such.setting"),
        ("A->C.enabled = true", "A->C.enabled"),
        ("A->B.connector.type = both", "A->B.connector.type"),
        ("A->B.transaction.producer = true", "A->B.transaction.producer"),
        ("value.converter = org.apache.kafka.connect.json.JsonConverter", "value.converter"),
    ],
)
def test_settings_are_honoured_or_rejected_never_ignored(tmp_path: Path, extra: str, name: str) -> None:
    props = load_properties(write(tmp_path, MM2 + extra + "\n"))
    props.pop("A.group.id with space")
    with pytest.raises(MirrorMakerConfigError) as info:
        plan(props)
    assert name in (info.value.errors or {}), info.value.errors


def test_source_type_honours_read_uncommitted_by_saying_it_is_not_exactly_once(tmp_path: Path) -> None:
    props = load_properties(
        write(tmp_path, MM2 + "A->B.source.consumer.isolation.level = read_uncommitted\n")
    )
    props.pop("A.group.id with space")
    source = plan(props).targets["B"].connectors["MirrorSourceConnector-A-B"]
    # MirrorSource reports exactly-once support only with read_committed, and the worker asks for it.
    assert source["source.cluster.isolation.level"] == "read_uncommitted"
    assert source["exactly.once.support"] == "required"


NO_SYNCS = """
clusters = A, B
A.bootstrap.servers = a-kafka:9092
B.bootstrap.servers = b-kafka:9092
A->B.enabled = true
A->B.topics = orders
"""
EOS_FIX = "B.exactly.once.source.support=enabled"


@pytest.mark.parametrize(
    ("extra", "name", "fix"),
    [
        # The finding: MirrorSource without exactly once writes no offset syncs.
        ("sync.group.offsets.enabled = true", "sync.group.offsets.enabled", EOS_FIX),
        ("A->B.emit.checkpoints.enabled = true", "A->B.emit.checkpoints.enabled", EOS_FIX),
        ("emit.offset-syncs.enabled = true", "emit.offset-syncs.enabled", EOS_FIX),
        (
            "A->B.connector.type = sink\nsync.group.offsets.enabled = true",
            "sync.group.offsets.enabled",
            "A->B.transaction.producer=true",
        ),
        (
            "B.exactly.once.source.support = enabled\nemit.offset-syncs.enabled = false\n"
            "sync.group.offsets.enabled = true",
            "sync.group.offsets.enabled",
            "remove emit.offset-syncs.enabled=false",
        ),
    ],
)
def test_asking_for_checkpoints_without_offset_syncs_is_refused(
    tmp_path: Path, extra: str, name: str, fix: str
) -> None:
    with pytest.raises(MirrorMakerConfigError) as info:
        plan(load_properties(write(tmp_path, NO_SYNCS + extra)))
    problems = (info.value.errors or {})[name]
    assert len(problems) == 1 and fix in problems[0] and "writes no offset syncs" in problems[0]


def test_default_checkpoints_without_offset_syncs_run_with_a_warning(tmp_path: Path) -> None:
    """MM2's defaults (checkpoints on) stay a working at-least-once mirror, said loudly at start-up."""
    b = plan(load_properties(write(tmp_path, NO_SYNCS))).targets["B"]
    assert "MirrorCheckpointConnector-A-B" in b.connectors
    [warning] = b.warnings
    assert "writes no offset syncs" in warning and "B.exactly.once.source.support=enabled" in warning
    exactly_once = plan(load_properties(write(tmp_path, NO_SYNCS + EOS_FIX.replace("=", " = "))))
    assert exactly_once.targets["B"].warnings == []
    off = plan(load_properties(write(tmp_path, NO_SYNCS + "emit.checkpoints.enabled = false")))
    assert off.targets["B"].warnings == []


def test_mirror_maker_refuses_it_at_start_up(tmp_path: Path) -> None:
    """The finding's file: exit status 2 before anything starts, naming the setting and the fix."""
    import subprocess
    import sys

    path = write(tmp_path, NO_SYNCS + "sync.group.offsets.enabled = true")
    done = subprocess.run(
        [sys.executable, "-m", "eosconnect.cli", "mirror-maker", str(path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "sync.group.offsets.enabled" in done.stderr
    assert "B.exactly.once.source.support=enabled" in done.stderr
    assert "Traceback" not in done.stderr


def test_rest_validation_refuses_offset_syncs_that_cannot_be_written() -> None:
    """Connectors created over REST: an explicit emit.offset-syncs.enabled=true on a mirror that
    copies at least once is refused by validation, naming the fix."""
    from eosconnect.cluster.validation import mirror_source_preflight
    from eosconnect.connectors.mirror import MirrorSinkConnector
    from eosconnect.connectors.mirror_source import MirrorSourceConnector
    from eosconnect.worker_config import WorkerConfig

    config = {"emit.offset-syncs.enabled": "true", "source.cluster.bootstrap.servers": "a:9092"}
    plain = WorkerConfig.parse({"bootstrap.servers": "b:9092"})
    [problem] = mirror_source_preflight(MirrorSourceConnector(), config, plain)["emit.offset-syncs.enabled"]
    assert "exactly.once.source.support=enabled" in problem
    eos = WorkerConfig.parse({"bootstrap.servers": "b:9092", "exactly.once.source.support": "enabled"})
    assert mirror_source_preflight(MirrorSourceConnector(), config, eos) == {}
    sink = {**config, "topics": "orders", "target.cluster.bootstrap.servers": "b:9092"}
    errors = {v.name: v.errors for v in MirrorSinkConnector().validate(sink) if v.errors}
    assert "transaction.producer=true" in errors["emit.offset-syncs.enabled"][0]
    transactional = {**sink, "transaction.producer": "true"}
    assert not [v for v in MirrorSinkConnector().validate(transactional) if v.errors]


def test_config_providers_at_the_top_level_are_honoured_and_never_resolved_into_configs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KIP-297 in mm2.properties, as MirrorMaker 2 declares them: every worker gets the providers,
    the connector configs keep the variables (resolved where clients are built), and a variable
    that cannot be resolved is named with why, at start-up."""
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "a.properties").write_text("password=a-secret\n")
    monkeypatch.setenv("B_PASSWORD", "b-secret")
    text = (
        MM2
        + "config.providers = file, env\n"
        + "config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider\n"
        + f"config.providers.file.param.allowed.paths = {secrets}\n"
        + "config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
        + "A.security.protocol = SASL_SSL\nA.sasl.mechanism = SCRAM-SHA-512\nA.sasl.username = a\n"
        + f"A.sasl.password = ${{file:{secrets}/a.properties:password}}\n"
        + "B.security.protocol = SASL_PLAINTEXT\nB.sasl.mechanism = SCRAM-SHA-512\nB.sasl.username = b\n"
        + "B.sasl.password = ${env:B_PASSWORD}\n"
    )
    props = load_properties(write(tmp_path, text))
    props.pop("A.group.id with space")
    result = plan(props)
    b = result.targets["B"]
    assert b.worker_props["config.providers"] == "file, env"
    assert b.worker_props["sasl.password"] == "${env:B_PASSWORD}"
    source = b.connectors["MirrorSourceConnector-A-B"]
    assert source["source.cluster.sasl.password"] == f"${{file:{secrets}/a.properties:password}}"
    everything = repr(result)
    assert "a-secret" not in everything and "b-secret" not in everything

    monkeypatch.delenv("B_PASSWORD")
    with pytest.raises(MirrorMakerConfigError) as info:
        plan(props)
    assert "${env:B_PASSWORD} cannot be resolved" in " ".join(info.value.errors["B.sasl.password"])
