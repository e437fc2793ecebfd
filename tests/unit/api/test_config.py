"""ConfigDef: typed parsing, defaults, validators, and error messages that name the setting and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from eosconnect.api import (
    NO_DEFAULT,
    ConfigDef,
    ConfigException,
    ConfigType,
    Importance,
    NonEmptyString,
    Password,
    Range,
    Validator,
    ValidList,
    ValidString,
)


def connector_def() -> ConfigDef:
    return (
        ConfigDef()
        .define(
            "tasks.max", ConfigType.INT, 1, Importance.HIGH, "Maximum number of tasks.", Range.at_least(1)
        )
        .define("topic", ConfigType.STRING, importance=Importance.HIGH, documentation="Topic to write to.")
        .define("mode", ConfigType.STRING, "poll", validator=ValidString.in_("poll", "interval", "connector"))
        .define("ratio", ConfigType.DOUBLE, 0.5, validator=Range.between(0, 1))
        .define("enabled", ConfigType.BOOLEAN, True)
        .define("tables", ConfigType.LIST, "a,b")
        .define("big", ConfigType.LONG, 2**40)
        .define("secret", ConfigType.PASSWORD, None)
        .define("impl", ConfigType.CLASS, None)
    )


def test_parse_fills_defaults_types_values_and_passes_unknown_keys_through() -> None:
    parsed = connector_def().parse(
        {"topic": " orders ", "tables": "x , y,z", "secret": "pw", "extra.key": "kept"}
    )
    assert parsed == {
        "tasks.max": 1,
        "topic": "orders",
        "mode": "poll",
        "ratio": 0.5,
        "enabled": True,
        "tables": ["x", "y", "z"],
        "big": 2**40,
        "secret": Password("pw"),
        "impl": None,
        "extra.key": "kept",
    }


@pytest.mark.parametrize(
    ("config_type", "raw", "expected"),
    [
        (ConfigType.INT, " 42 ", 42),
        (ConfigType.INT, "-7", -7),
        (ConfigType.LONG, "9223372036854775807", 2**63 - 1),
        (ConfigType.DOUBLE, "2.5", 2.5),
        (ConfigType.DOUBLE, 3, 3.0),
        (ConfigType.BOOLEAN, "TRUE", True),
        (ConfigType.BOOLEAN, "false", False),
        (ConfigType.LIST, "", []),
        (ConfigType.LIST, "a", ["a"]),
        (ConfigType.CLASS, "pkg.mod.Cls", "pkg.mod.Cls"),
        (ConfigType.CLASS, ConfigDef, "eosconnect.api.config.ConfigDef"),
    ],
)
def test_type_parsing(config_type: ConfigType, raw: Any, expected: Any) -> None:
    assert ConfigDef().define("x", config_type).parse({"x": raw})["x"] == expected


@pytest.mark.parametrize(
    ("config_type", "raw"),
    [
        (ConfigType.INT, "1.5"),
        (ConfigType.INT, "2147483648"),  # INT is 32-bit, as in Kafka
        (ConfigType.INT, True),
        (ConfigType.LONG, "9223372036854775808"),
        (ConfigType.DOUBLE, "x"),
        (ConfigType.BOOLEAN, "yes"),
        (ConfigType.CLASS, "has space"),
        (ConfigType.STRING, 5),
    ],
)
def test_type_errors_name_the_setting(config_type: ConfigType, raw: Any) -> None:
    with pytest.raises(ConfigException) as info:
        ConfigDef().define("the.setting", config_type).parse({"the.setting": raw})
    assert list(info.value.errors) == ["the.setting"]
    assert '"the.setting": must be' in str(info.value)
    assert "Set the.setting to" in str(info.value)


def test_every_bad_setting_is_reported_with_its_fix() -> None:
    props = {"tasks.max": "abc", "mode": "foo", "ratio": "2", "enabled": "yes"}
    with pytest.raises(ConfigException) as info:
        connector_def().parse(props)
    exc = info.value
    assert set(exc.errors) == {"tasks.max", "topic", "mode", "ratio", "enabled"}
    assert exc.errors["tasks.max"] == [
        "must be an integer >= 1, got 'abc'. Set tasks.max to a whole number such as 1."
    ]
    assert exc.errors["topic"][0].startswith("is required and has no default. Set topic to a string.")
    assert "Topic to write to." in exc.errors["topic"][0]
    assert exc.errors["mode"] == [
        "must be one of 'poll', 'interval', 'connector', got 'foo'. "
        "Set mode to one of poll, interval, connector."
    ]
    assert exc.errors["ratio"] == [
        "must be a number between 0 and 1, got '2'. Set ratio to a number such as 0."
    ]
    assert exc.errors["enabled"] == ["must be true or false, got 'yes'. Set enabled to true or false."]
    text = str(exc)
    assert text.startswith("Invalid configuration, 5 problems to fix:")
    assert (
        "\"tasks.max\": must be an integer >= 1, got 'abc'. Set tasks.max to a whole number such as 1."
        in text
    )


def test_single_problem_message_and_value_below_range() -> None:
    with pytest.raises(ConfigException) as info:
        connector_def().parse({"topic": "t", "tasks.max": "0"})
    assert str(info.value) == (
        "Invalid configuration: \"tasks.max\": must be an integer >= 1, got '0'. "
        "Set tasks.max to a whole number such as 1."
    )


def test_validate_reports_per_field_results_like_kafka_config_infos() -> None:
    results = {v.name: v for v in connector_def().validate({"tasks.max": "0", "topic": "t"})}
    assert list(results) == [
        "tasks.max",
        "topic",
        "mode",
        "ratio",
        "enabled",
        "tables",
        "big",
        "secret",
        "impl",
    ]
    assert results["tasks.max"].errors and results["tasks.max"].value == "0"
    assert results["topic"].errors == [] and results["topic"].value == "t"
    assert results["mode"].recommended_values == ["poll", "interval", "connector"]
    assert all(v.visible for v in results.values())


def test_validate_with_prefix_names_full_settings() -> None:
    config_def = ConfigDef().define("field", ConfigType.STRING)
    [value] = config_def.validate({}, prefix="transforms.x.")
    assert value.name == "transforms.x.field"
    assert "Set transforms.x.field to" in value.errors[0]


def test_passwords_never_leak() -> None:
    config_def = ConfigDef().define(
        "pw", ConfigType.PASSWORD, validator=Validator.of(lambda p: False, "good")
    )
    with pytest.raises(ConfigException) as info:
        config_def.parse({"pw": "hunter2"})
    assert "hunter2" not in str(info.value)
    [value] = config_def.validate({"pw": "hunter2"})
    assert "hunter2" not in repr(value)
    parsed = ConfigDef().define("pw", ConfigType.PASSWORD).parse({"pw": "hunter2"})["pw"]
    assert str(parsed) == "[hidden]" and "hunter2" not in repr(parsed) and parsed.value == "hunter2"


def test_validators_on_their_own() -> None:
    assert Range.between(1, 3).is_valid(2) and not Range.between(1, 3).is_valid(4)
    assert not Range.at_least(0).is_valid(True)
    assert Range.at_most(5).is_valid(-1)
    assert ValidString.in_("A", "b", case_sensitive=False).is_valid("a")
    assert not ValidString.in_("A").is_valid("a")
    assert NonEmptyString().is_valid("x") and not NonEmptyString().is_valid("  ")
    assert ValidList.in_("a", "b").is_valid(["a", "b"]) and not ValidList.in_("a").is_valid(["c"])
    with pytest.raises(ConfigException, match='"n": must be a value >= 1, got 0'):
        Range.at_least(1)("n", 0)
    with pytest.raises(ValueError):
        Range.between(3, 1)


def test_non_empty_string_and_custom_callable_validators() -> None:
    def no_localhost(name: str, value: str) -> None:
        if "localhost" in value:
            raise ValueError(f"{name} must be reachable from executors; {value!r} is not. Use a host name.")

    config_def = (
        ConfigDef()
        .define("name", ConfigType.STRING, validator=NonEmptyString)  # the class itself is accepted
        .define("host", ConfigType.STRING, "db", validator=no_localhost)
        .define("even", ConfigType.INT, 2, validator=Validator.of(lambda v: v % 2 == 0, "an even integer", 2))
    )
    with pytest.raises(ConfigException) as info:
        config_def.parse({"name": " ", "host": "localhost:5432", "even": "3"})
    assert info.value.errors == {
        "name": ["must be a non-empty string, got ' '. Set name to a non-empty string."],
        "host": ["host must be reachable from executors; 'localhost:5432' is not. Use a host name."],
        "even": ["must be an even integer, got '3'. Set even to a whole number such as 2."],
    }


def test_define_checks_defaults_and_misuse_early() -> None:
    with pytest.raises(ConfigException, match="invalid default for 'n'"):
        ConfigDef().define("n", ConfigType.INT, 0, validator=Range.at_least(1))
    with pytest.raises(ValueError, match="defined twice"):
        ConfigDef().define("n", ConfigType.INT).define("n", ConfigType.INT)
    with pytest.raises(TypeError, match="argument order"):
        ConfigDef().define("n", ConfigType.INT, 1, Range.at_least(1))  # type: ignore[arg-type]


def test_optional_none_default_and_required_marker() -> None:
    config_def = ConfigDef().define("opt", ConfigType.INT, None).define("req", "int", NO_DEFAULT)
    assert config_def.parse({"req": "1"}) == {"opt": None, "req": 1}
    assert [k.required for k in config_def] == [False, True]


def test_describe_gives_definitions_for_docs_and_rest() -> None:
    info = {k.name: k for k in connector_def().describe()}
    assert info["tasks.max"].type is ConfigType.INT and info["tasks.max"].default_value == "1"
    assert info["tasks.max"].importance is Importance.HIGH
    assert info["tasks.max"].documentation == "Maximum number of tasks."
    assert info["topic"].required and info["topic"].default_value is None
    assert info["enabled"].default_value == "true" and info["tables"].default_value == "a,b"
    assert info["mode"].recommended_values == ["poll", "interval", "connector"]


def test_merge_combines_definitions() -> None:
    base = ConfigDef().define("a", ConfigType.INT, 1)
    merged = base.merge(ConfigDef().define("b", ConfigType.STRING, "x"))
    assert merged.names() == ["a", "b"] and base.names() == ["a"]
    with pytest.raises(ValueError):
        base.merge(ConfigDef().define("a", ConfigType.STRING, "other"))
