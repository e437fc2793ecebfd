"""JSON text as Jackson writes it: strings with Jackson's escapes and numbers as Java prints them
(`1.0E7`, `1.0E-4`, float32 values with float32 precision), so JSON written here is byte-identical
to Kafka's `JsonConverter` output.
"""

from __future__ import annotations

import decimal
import math
import re
import struct as _binary
from collections.abc import Callable
from json.encoder import encode_basestring

__all__ = ["STRING_TEXTS", "float32", "jackson_escapes", "java_double_text", "java_float_text", "json_string"]


_CONTROL = re.compile("[\x00-\x1f]")
_SHORT_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_JACKSON_ESCAPES = str.maketrans(
    {
        '"': '\\"',
        "\\": "\\\\",
        **{chr(c): _SHORT_ESCAPES.get(chr(c), f"\\u{c:04X}") for c in range(0x20)},
    }
)


def json_string(text: str) -> str:
    """A JSON string as Jackson writes it: UTF-8 kept, control characters escaped with upper-case
    hex (`\\u001F`), where Python's encoder writes lower case."""
    if _CONTROL.search(text) is None:
        return encode_basestring(text)
    return '"' + text.translate(_JACKSON_ESCAPES) + '"'


class _StringTexts(dict[str, str]):
    """Short strings' JSON texts, remembered: most string fields of a stream repeat (a CDC event's
    connector, database, schema, table and op), and a dict lookup costs a tenth of writing one."""

    MAX_ENTRIES, MAX_LENGTH = 10_000, 64

    def __missing__(self, text: str) -> str:
        written = json_string(text)
        if len(text) <= self.MAX_LENGTH and len(self) < self.MAX_ENTRIES:
            self[text] = written
        return written


STRING_TEXTS = _StringTexts()


_LOWER_HEX_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u00([0-9a-f][0-9a-f])")


def jackson_escapes(json_text: str) -> str:
    """JSON text from Python's encoder with its `\\u00xx` escapes in Jackson's upper case."""
    if "\\u00" not in json_text:
        return json_text
    return _LOWER_HEX_ESCAPE.sub(lambda m: m.group(1) + "\\u00" + m.group(2).upper(), json_text)


# --- numbers as Java prints them ------------------------------------------------------------------


def _java_scientific(digits: str, exponent: int) -> str:
    """`d.dddE<exponent>` as Java's Double.toString writes outside [1e-3, 1e7)."""
    return f"{digits[0]}.{digits[1:] or '0'}E{exponent}"


def _shortest_digits(text: str) -> tuple[str, int]:
    """The significant digits of a shortest repr (no trailing zeros) and the decimal exponent of the
    first one: "1000000.0" -> ("1", 6), "0.00125" -> ("125", -3)."""
    _, digit_tuple, exp = decimal.Decimal(text).as_tuple()
    significant = "".join(map(str, digit_tuple)).lstrip("0")
    return significant.rstrip("0") or "0", len(significant) - 1 + int(exp)


def java_double_text(value: float) -> str:
    """The JSON Jackson writes for a Java double: `Double.toString` (Java 19+, the shortest digits
    that read back as the same double), non-finite values quoted."""
    if not math.isfinite(value):
        return '"NaN"' if value != value else ('"Infinity"' if value > 0 else '"-Infinity"')
    return _java_number(value, repr(value), float)


def java_float_text(value: float) -> str:
    """The JSON Jackson writes for a Java float: `Float.toString` of the value rounded to 32 bits."""
    try:
        f32 = _binary.unpack("f", _binary.pack("f", value))[0]
    except OverflowError:
        f32 = math.copysign(math.inf, value)
    if not math.isfinite(f32):
        return java_double_text(f32)
    for precision in range(1, 10):  # the shortest text that reads back as the same float32
        text = f"{f32:.{precision}g}"
        if _binary.unpack("f", _binary.pack("f", float(text)))[0] == f32:
            break
    return _java_number(f32, text, float32)


def _java_number(value: float, shortest: str, reads_as: Callable[[float], float]) -> str:
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    digits, exponent = _shortest_digits(shortest)
    if len(digits) == 1:
        # Java always prints two digits (d.d); where one suffices it takes the two-digit decimal
        # closest to the exact value, which differs from d.0 only for the smallest subnormals
        # (Float.MIN_VALUE is 1.4E-45, not 1.0E-45).
        two = decimal.Decimal(value).scaleb(-exponent).quantize(decimal.Decimal("0.1"))
        candidate = "".join(map(str, two.as_tuple().digits)).rstrip("0") or "0"
        if (
            len(candidate) <= 2
            and abs(two) < 10
            and reads_as(float(f"{candidate[0]}.{candidate[1:] or 0}e{exponent}")) == abs(value)
        ):
            digits = candidate
    sign = "-" if value < 0 else ""
    if 1e-3 <= abs(value) < 1e7:
        if exponent >= 0:
            whole = digits[: exponent + 1].ljust(exponent + 1, "0")
            frac = digits[exponent + 1 :] or "0"
        else:
            whole = "0"
            frac = "0" * (-exponent - 1) + digits
        return f"{sign}{whole}.{frac}"
    return sign + _java_scientific(digits, exponent)


def float32(value: float) -> float:
    """`value` rounded to float32 (Java's `(float)`), infinite beyond its range."""
    try:
        return _binary.unpack("f", _binary.pack("f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)
