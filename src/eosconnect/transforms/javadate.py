"""Java's `SimpleDateFormat` patterns (in UTC, as Kafka's TimestampConverter and TimestampRouter use them).

Users bring patterns such as `yyyy-MM-dd'T'HH:mm:ss.SSSZ` or `yyyyMMdd` from their Java configs, so they
are read as Java reads them: quoted literals, counts that choose padding or text (MMM = Jan), and on
parsing, fixed widths where two numbers touch (yyyyMMdd) and trailing text ignored. Letters outside the
common set (week-based fields and the like) are refused when the transformation is configured.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_SUPPORTED = set("GyMdHkKhmsSEaDuZXz")
_NUMERIC = set("yMdHkKhmsSDu")


@dataclass(frozen=True)
class _Token:
    letter: str  # "" for literal text
    count: int
    text: str = ""


def _tokens(pattern: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "'":
            end = i + 1
            literal = ""
            while True:
                if end >= len(pattern):
                    raise ValueError(f"Unterminated quote in date pattern {pattern!r}")
                if pattern[end] == "'":
                    if end + 1 < len(pattern) and pattern[end + 1] == "'":
                        literal += "'"
                        end += 2
                        continue
                    break
                literal += pattern[end]
                end += 1
            tokens.append(_Token("", 0, literal if end > i + 1 else "'"))
            i = end + 1
        elif char.isascii() and char.isalpha():
            if char not in _SUPPORTED:
                raise ValueError(
                    f"Illegal or unsupported pattern character '{char}' in date pattern {pattern!r}"
                )
            end = i
            while end < len(pattern) and pattern[end] == char:
                end += 1
            tokens.append(_Token(char, end - i))
            i = end
        else:
            tokens.append(_Token("", 0, char))
            i += 1
    return tokens


class JavaDateFormat:
    """One compiled pattern: `format(millis)` and `parse(text) -> millis`, both in UTC."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.tokens = _tokens(pattern)

    def format(self, millis: int) -> str:
        moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=millis)
        return "".join(self._format_token(t, moment) for t in self.tokens)

    @staticmethod
    def _format_token(token: _Token, moment: datetime) -> str:
        letter, count = token.letter, token.count
        if not letter:
            return token.text
        number: int
        match letter:
            case "G":
                return "AD" if moment.year > 0 else "BC"
            case "y":
                return f"{moment.year % 100:02d}" if count == 2 else f"{moment.year:0{count}d}"
            case "M":
                if count >= 4:
                    return _MONTHS[moment.month - 1]
                if count == 3:
                    return _MONTHS[moment.month - 1][:3]
                number = moment.month
            case "d":
                number = moment.day
            case "H":
                number = moment.hour
            case "k":
                number = moment.hour or 24
            case "K":
                number = moment.hour % 12
            case "h":
                number = moment.hour % 12 or 12
            case "m":
                number = moment.minute
            case "s":
                number = moment.second
            case "S":
                number = moment.microsecond // 1000
            case "D":
                number = moment.timetuple().tm_yday
            case "u":
                number = moment.isoweekday()
            case "E":
                name = _DAYS[moment.weekday()]
                return name if count >= 4 else name[:3]
            case "a":
                return "AM" if moment.hour < 12 else "PM"
            case "Z":
                return "+0000"
            case "X":
                return "Z"
            case _:  # "z"
                return "Coordinated Universal Time" if count >= 4 else "UTC"
        return f"{number:0{count}d}"

    def _regex(self) -> re.Pattern[str]:
        parts = []
        for index, token in enumerate(self.tokens):
            letter, count = token.letter, token.count
            if not letter:
                parts.append(re.escape(token.text))
                continue
            following = self.tokens[index + 1] if index + 1 < len(self.tokens) else None
            touches_number = following is not None and following.letter in _NUMERIC and following.count < 3
            group = f"(?P<{letter}{index}>"
            if letter in _NUMERIC and not (letter == "M" and count >= 3):
                digits = rf"\d{{{count}}}" if touches_number else r"[+-]?\d+"
                parts.append(group + digits + ")")
            elif letter == "M":
                parts.append(group + "|".join(m if count >= 4 else m[:3] for m in _MONTHS) + ")")
            elif letter == "E":
                parts.append(group + "|".join(d if count >= 4 else d[:3] for d in _DAYS) + ")")
            elif letter == "a":
                parts.append(group + "AM|PM)")
            elif letter == "G":
                parts.append(group + "AD|BC)")
            else:  # time zones
                parts.append(group + r"Z|[+-]\d{2}:?\d{2}|[+-]\d{2}|UTC|GMT|Coordinated Universal Time)")
        return re.compile("".join(parts), re.IGNORECASE)

    def parse(self, text: str) -> int:
        """Milliseconds since the epoch; ValueError if `text` does not start with a match."""
        found = self._regex().match(text)
        if found is None:
            raise ValueError(text)
        fields = {"y": 1970, "M": 1, "d": 1, "H": 0, "m": 0, "s": 0, "S": 0}
        pm: bool | None = None
        hour12: int | None = None
        offset = 0
        day_of_year: int | None = None
        for name, raw in found.groupdict().items():
            letter = name[0]
            if letter == "M" and not raw.lstrip("+-").isdigit():
                fields["M"] = [m[:3].lower() for m in _MONTHS].index(raw[:3].lower()) + 1
            elif letter in ("y", "M", "d", "H", "m", "s", "S"):
                fields[letter] = int(raw)
                if letter == "y" and len(raw) <= 2 and self._count(name) <= 2:
                    fields["y"] = _two_digit_year(int(raw))
            elif letter == "k":
                fields["H"] = int(raw) % 24
            elif letter in ("h", "K"):
                hour12 = int(raw) % 12
            elif letter == "a":
                pm = raw.upper() == "PM"
            elif letter == "D":
                day_of_year = int(raw)
            elif letter in ("Z", "X", "z"):
                offset = _offset_minutes(raw)
        if hour12 is not None:
            fields["H"] = hour12 + (12 if pm else 0)
        elif pm and fields["H"] < 12:
            fields["H"] += 12
        base = datetime(fields["y"], 1, 1, tzinfo=UTC)
        if day_of_year is not None:
            days = day_of_year - 1
        else:
            days = _days_from_month(fields["y"], fields["M"]) + fields["d"] - 1
        moment = base + timedelta(
            days=days,
            hours=fields["H"],
            minutes=fields["m"] - offset,
            seconds=fields["s"],
            milliseconds=fields["S"],
        )
        return int((moment - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(milliseconds=1))

    def _count(self, group_name: str) -> int:
        return self.tokens[int(group_name[1:])].count


def _days_from_month(year: int, month: int) -> int:
    """Days from 1 January to the 1st of `month` (lenient, as Java's: month 13 is next January)."""
    extra_years, month_index = divmod(month - 1, 12)
    start = datetime(year + extra_years, month_index + 1, 1, tzinfo=UTC)
    return (start - datetime(year, 1, 1, tzinfo=UTC)).days


def _two_digit_year(value: int) -> int:
    """SimpleDateFormat's window: within 80 years before and 20 after now."""
    now = datetime.now(UTC).year
    year = now - now % 100 + value
    if year > now + 20:
        year -= 100
    elif year <= now - 80:
        year += 100
    return year


def _offset_minutes(raw: str) -> int:
    if raw.upper() in ("Z", "UTC", "GMT", "COORDINATED UNIVERSAL TIME"):
        return 0
    sign = -1 if raw[0] == "-" else 1
    digits = raw[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:] or 0)
    return sign * (hours * 60 + minutes)
