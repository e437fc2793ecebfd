"""Session keys: HMAC signatures on internal worker-to-worker requests (KIP-507, used by KIP-618).

The fencing endpoint (`PUT /connectors/<c>/fence`) lets any caller make the leader fence producers
and write to the config topic, so it must only obey other workers. Workers share a secret, the
*session key*, which the leader generates and distributes through the config topic (record
`session-key`, the same JSON as Kafka Connect writes: base64 `key`, `algorithm`, `creation-timestamp`)
and rotates periodically. A request is signed with it and the receiver checks the signature.

Signature scheme (ours; Kafka Connect signs the body only, which lets a captured request be replayed
forever and against any endpoint):

    message   = b"eosconnect-v1\\n" + METHOD + b"\\n" + path + b"\\n" + timestamp_ms + b"\\n" + body
    signature = base64(HMAC-SHA256(key, message))

and the request carries three headers:

- `X-Connect-Authorization`: the signature;
- `X-Connect-Request-Signature-Algorithm`: `HmacSHA256` (Kafka Connect's header, so its tooling and
  logs recognise the request);
- `X-Connect-Request-Signature-Timestamp`: the signing time in ms since the epoch.

The method, path and timestamp are single-line strings (a path containing a line break is refused),
so the message is unambiguous. Binding the path stops a signature for one connector's fencing being
reused for another's; binding the timestamp bounds replays to `max_age_ms`. The receiver compares
signatures in constant time (`hmac.compare_digest`) against every key it accepts, the current one and
the previous one, because a request signed just before a rotation may arrive just after it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "ALGORITHM",
    "AUTHORIZATION_HEADER",
    "DEFAULT_MAX_AGE_MS",
    "SIGNATURE_ALGORITHM_HEADER",
    "TIMESTAMP_HEADER",
    "ReplayGuard",
    "SessionKey",
    "SessionKeyError",
    "SessionKeyFailure",
    "sign_request",
    "verify_request",
]

#: The only algorithm supported: Kafka Connect's default `inter.worker.signature.algorithm`.
ALGORITHM = "HmacSHA256"
AUTHORIZATION_HEADER = "X-Connect-Authorization"
SIGNATURE_ALGORITHM_HEADER = "X-Connect-Request-Signature-Algorithm"
TIMESTAMP_HEADER = "X-Connect-Request-Signature-Timestamp"
#: A random value per request, covered by the signature: two requests never share a signature, so
#: a receiver can refuse one it has seen (replay) without refusing a twin sent in the same millisecond.
NONCE_HEADER = "X-Eosconnect-Request-Nonce"
#: How old (or, for skewed clocks, how far in the future) a signed request may be.
DEFAULT_MAX_AGE_MS = 5 * 60 * 1000
#: 256 bits, the JVM's default key size for HmacSHA256 and the hash's block-independent strength.
KEY_BYTES = 32
_DOMAIN = b"eosconnect-v1"


@dataclass(frozen=True)
class SessionKey:
    """A shared HMAC key plus when the leader created it (for rotation after a TTL)."""

    key: bytes = field(repr=False)
    creation_timestamp_ms: int
    algorithm: str = ALGORITHM

    @classmethod
    def generate(cls, now_ms: int | None = None, size: int = KEY_BYTES) -> SessionKey:
        """A fresh random key from the OS's CSPRNG."""
        if size < 16:
            raise ValueError(f"a session key needs at least 16 bytes, got {size}")
        created = int(time.time() * 1000) if now_ms is None else now_ms
        return cls(secrets.token_bytes(size), created)

    def expired(self, now_ms: int, ttl_ms: int) -> bool:
        """True once the key is `ttl_ms` old: the leader then distributes a new one."""
        return now_ms - self.creation_timestamp_ms >= ttl_ms

    def to_record(self) -> dict[str, Any]:
        """The config-topic value, exactly as Kafka Connect writes it."""
        return {
            "key": base64.b64encode(self.key).decode("ascii"),
            "algorithm": self.algorithm,
            "creation-timestamp": self.creation_timestamp_ms,
        }

    @classmethod
    def from_record(cls, value: Mapping[str, Any]) -> SessionKey:
        """Parse a config-topic value; raises ValueError naming the wrong field."""
        key, algorithm, created = value.get("key"), value.get("algorithm"), value.get("creation-timestamp")
        if not isinstance(key, str):
            raise ValueError(f"'key' should be a base64 string but is {type(key).__name__}")
        if not isinstance(algorithm, str):
            raise ValueError(f"'algorithm' should be a string but is {type(algorithm).__name__}")
        if not isinstance(created, int) or isinstance(created, bool):
            raise ValueError(f"'creation-timestamp' should be an integer but is {type(created).__name__}")
        try:
            raw = base64.b64decode(key, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"'key' is not valid base64: {exc}") from exc
        if not raw:
            raise ValueError("'key' is empty")
        return cls(raw, created, algorithm)


class SessionKeyFailure(StrEnum):
    """Why a request was refused. The REST layer answers 403 for each; logs say which."""

    UNSIGNED = "unsigned"
    BAD_SIGNATURE = "bad_signature"
    REPLAYED = "replayed"
    EXPIRED = "expired"
    NO_KEY = "no_key"


class SessionKeyError(Exception):
    """An internal request failed verification; `reason` tells why (all map to HTTP 403)."""

    def __init__(self, reason: SessionKeyFailure, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _message(method: str, path: str, timestamp_ms: int, body: bytes, nonce: str | None = None) -> bytes:
    if any(c in path for c in "\r\n") or any(c in method for c in "\r\n"):
        raise ValueError("the method and path of a signed request must not contain line breaks")
    parts = [_DOMAIN, method.upper().encode("ascii"), path.encode("utf-8"), str(timestamp_ms).encode("ascii")]
    if nonce is not None:
        if any(c in nonce for c in "\r\n"):
            raise ValueError("a request nonce must not contain line breaks")
        parts.append(b"nonce=" + nonce.encode("ascii"))
    return b"\n".join(parts) + b"\n" + body


def _digest(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def _raw_key(key: SessionKey | bytes) -> bytes:
    if isinstance(key, SessionKey):
        if key.algorithm != ALGORITHM:
            raise ValueError(f"unsupported session key algorithm {key.algorithm!r}; only {ALGORITHM}")
        return key.key
    return key


def sign_request(
    key: SessionKey | bytes, method: str, path: str, body: bytes | None, now_ms: int | None = None
) -> dict[str, str]:
    """The headers to add to an internal request (`path` as sent, e.g. `/connectors/c/fence`)."""
    ts = int(time.time() * 1000) if now_ms is None else now_ms
    nonce = secrets.token_urlsafe(16)
    signature = _digest(_raw_key(key), _message(method, path, ts, body or b"", nonce))
    return {
        AUTHORIZATION_HEADER: base64.b64encode(signature).decode("ascii"),
        SIGNATURE_ALGORITHM_HEADER: ALGORITHM,
        TIMESTAMP_HEADER: str(ts),
        NONCE_HEADER: nonce,
    }


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """Case-insensitive lookup: HTTP header names are case-insensitive, plain dicts are not."""
    if name in headers:
        return headers[name]
    lower = name.lower()
    for k, v in headers.items():
        if k.lower() == lower:
            return v
    return None


class ReplayGuard:
    """Signed requests are accepted once: a signature seen within the allowed age is refused, so a
    captured request cannot be sent again (it would be refused as expired after that age anyway)."""

    def __init__(self, max_age_ms: int = DEFAULT_MAX_AGE_MS) -> None:
        self.max_age_ms = max_age_ms
        self._seen: dict[str | bytes, float] = {}
        self._lock = threading.Lock()

    def check(self, headers: Mapping[str, str], method: str, path: str) -> None:
        """Call after `verify_request` succeeded; raises SessionKeyError(REPLAYED) for a repeat.

        Keyed on the signature's bytes, not its text: base64 has several spellings of the same
        bytes (the unused low bits of the last character), and each would verify again."""
        text = _header(headers, AUTHORIZATION_HEADER) or ""
        try:
            signature: str | bytes = base64.b64decode(text, validate=True)
        except (ValueError, binascii.Error):
            signature = text
        now = time.monotonic()
        horizon = 2 * self.max_age_ms / 1000  # clocks may differ by max_age either way
        with self._lock:
            while self._seen:  # insertion order is time order: drop the expired from the front
                oldest, seen_at = next(iter(self._seen.items()))
                if seen_at >= now - horizon:
                    break
                del self._seen[oldest]
            if signature in self._seen:
                raise SessionKeyError(
                    SessionKeyFailure.REPLAYED,
                    f"internal request {method} {path} was already accepted once (a replayed request)",
                )
            self._seen[signature] = now


def verify_request(
    keys: SessionKey | bytes | Iterable[SessionKey | bytes | None] | None,
    headers: Mapping[str, str],
    method: str,
    path: str,
    body: bytes | None,
    now_ms: int | None = None,
    max_age_ms: int = DEFAULT_MAX_AGE_MS,
) -> None:
    """Return if the request is signed by one of `keys` within `max_age_ms`, else raise SessionKeyError.

    Pass the current and the previous session key (None entries are ignored) so requests signed
    across a rotation pass. Every key is tried, and compared with `hmac.compare_digest`, so the
    time taken does not reveal which key or how much of a signature matched.
    """
    if keys is None or isinstance(keys, SessionKey | bytes):
        candidates = [keys] if keys is not None else []
    else:
        candidates = [k for k in keys if k is not None]
    signature_b64 = _header(headers, AUTHORIZATION_HEADER)
    ts_text = _header(headers, TIMESTAMP_HEADER)
    if not signature_b64 or not ts_text:
        missing = [
            h for h, v in ((AUTHORIZATION_HEADER, signature_b64), (TIMESTAMP_HEADER, ts_text)) if not v
        ]
        raise SessionKeyError(
            SessionKeyFailure.UNSIGNED, f"internal request {method} {path} is not signed (missing {missing})"
        )
    if not candidates:
        raise SessionKeyError(
            SessionKeyFailure.NO_KEY,
            "no session key is known yet (the leader has not distributed one); cannot verify the request",
        )
    algorithm = _header(headers, SIGNATURE_ALGORITHM_HEADER) or ALGORITHM
    if algorithm != ALGORITHM:
        raise SessionKeyError(
            SessionKeyFailure.BAD_SIGNATURE,
            f"unsupported signature algorithm {algorithm!r}; only {ALGORITHM}",
        )
    try:
        ts = int(ts_text.strip())
        presented = base64.b64decode(signature_b64, validate=True)
        message = _message(method, path, ts, body or b"", _header(headers, NONCE_HEADER))
    except (ValueError, binascii.Error) as exc:
        raise SessionKeyError(SessionKeyFailure.BAD_SIGNATURE, f"malformed request signature: {exc}") from exc
    matched = False
    for key in candidates:
        # No short-circuit: every key costs the same, whichever matches.
        matched |= hmac.compare_digest(_digest(_raw_key(key), message), presented)
    if not matched:
        raise SessionKeyError(
            SessionKeyFailure.BAD_SIGNATURE,
            f"internal request {method} {path} has a wrong signature "
            "(tampered with, or signed with an unknown key)",
        )
    now = int(time.time() * 1000) if now_ms is None else now_ms
    if abs(now - ts) > max_age_ms:
        raise SessionKeyError(
            SessionKeyFailure.EXPIRED,
            f"internal request {method} {path} was signed {(now - ts) / 1000:.1f}s ago, more than the "
            f"allowed {max_age_ms / 1000:.0f}s (a replay, or clocks out of sync)",
        )
