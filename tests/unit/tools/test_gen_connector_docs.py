"""docs/connectors.md is generated from the connectors' ConfigDefs and must be kept up to date."""

from __future__ import annotations

from eosconnect.plugins.loading import BUILTIN_CONNECTORS
from eosconnect.tools.gen_connector_docs import DEFAULT_OUTPUT, main, render_connectors_doc


def test_generated_reference_is_up_to_date() -> None:
    assert DEFAULT_OUTPUT.read_text(encoding="utf-8") == render_connectors_doc(), (
        "docs/connectors.md is stale: run python -m eosconnect.tools.gen_connector_docs"
    )
    assert main(["--check"]) == 0


def test_every_builtin_connector_and_setting_is_documented() -> None:
    text = render_connectors_doc()
    for name in ("SequenceSource", "FileStreamSource", "JdbcSource", "PostgresCdcSource"):
        assert f"## {name}\n" in text and name in BUILTIN_CONNECTORS
    for setting in ("`connection.url`", "`heartbeat.interval.ms`", "`batch.size`", "`records.per.task`"):
        assert setting in text


def test_check_mode_reports_a_stale_file(tmp_path) -> None:
    stale = tmp_path / "connectors.md"
    stale.write_text("old")
    assert main(["--check", "--output", str(stale)]) == 1
    assert main(["--output", str(stale)]) == 0 and stale.read_text() == render_connectors_doc()


def test_every_transformation_and_predicate_is_documented() -> None:
    text = render_connectors_doc()
    for name in (
        "Cast",
        "DropHeaders",
        "ExtractField",
        "Filter",
        "Flatten",
        "HeaderFrom",
        "HoistField",
        "InsertField",
        "InsertHeader",
        "MaskField",
        "RegexRouter",
        "ReplaceField",
        "SetSchemaMetadata",
        "TimestampConverter",
        "TimestampRouter",
        "ValueToKey",
    ):
        assert f"org.apache.kafka.connect.transforms.{name}" in text
    for name in ("TopicNameMatches", "HasHeaderKey", "RecordIsTombstone"):
        assert f"org.apache.kafka.connect.transforms.predicates.{name}" in text
    assert "### TimestampConverter\n" in text and "`unix.precision`" in text


def test_every_converter_and_its_kafka_name_is_documented() -> None:
    from eosconnect.converters.resolution import CONVERTER_ALIASES

    text = render_connectors_doc()
    assert "# Converters\n" in text
    for name in CONVERTER_ALIASES:
        assert f"`{name}`" in text, name
    for setting in ("`schemas.enable`", "`schemas.cache.size`", "`decimal.format`", "`schema.content`"):
        assert setting in text


def test_the_schema_registry_converters_and_their_settings_are_documented() -> None:
    from eosconnect.converters.resolution import CONVERTER_PATHS

    text = render_connectors_doc()
    for name in CONVERTER_PATHS:
        assert f"`{name}`" in text, name
    assert "## Schema Registry converters (AvroConverter, JsonSchemaConverter, ProtobufConverter)" in text
    for setting in ("`schema.registry.url`", "`auto.register.schemas`", "`use.latest.version`"):
        assert setting in text
