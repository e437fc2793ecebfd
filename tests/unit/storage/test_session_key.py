"""Signing and verifying internal requests with the session key."""

from __future__ import annotations

import pytest

from eosconnect.storage.session_key import (
    AUTHORIZATION_HEADER,
    NONCE_HEADER,
    SIGNATURE_ALGORITHM_HEADER,
    TIMESTAMP_HEADER,
    ReplayGuard,
    SessionKey,
    SessionKeyError,
    SessionKeyFailure,
    sign_request,
    verify_request,
)

NOW = 1_700_000_000_000
PATH = "/connectors/orders/fence"
BODY = b'{"generation": 3}'


@pytest.fixture
def key() -> SessionKey:
    return SessionKey.generate(NOW)


def reason(exc: pytest.ExceptionInfo[SessionKeyError]) -> SessionKeyFailure:
    return exc.value.reason


def test_generate_is_random_and_sized(key: SessionKey) -> None:
    other = SessionKey.generate(NOW)
    assert len(key.key) == 32 and key.key != other.key
    assert key.algorithm == "HmacSHA256" and key.creation_timestamp_ms == NOW
    assert SessionKey.from_record(key.to_record()) == key
    assert key.expired(NOW + 3_600_000, 3_600_000) and not key.expired(NOW + 1, 3_600_000)
    assert "key=" not in repr(key)  # the secret never reaches logs


def test_round_trip(key: SessionKey) -> None:
    headers = sign_request(key, "PUT", PATH, BODY, NOW)
    assert set(headers) == {AUTHORIZATION_HEADER, SIGNATURE_ALGORITHM_HEADER, TIMESTAMP_HEADER, NONCE_HEADER}
    verify_request(key, headers, "PUT", PATH, BODY, NOW + 1000)
    verify_request([key], {k.lower(): v for k, v in headers.items()}, "put", PATH, BODY, NOW)  # any case
    verify_request(key.key, headers, "PUT", PATH, BODY, NOW)  # raw bytes work too


def test_empty_body(key: SessionKey) -> None:
    headers = sign_request(key, "PUT", PATH, None, NOW)
    verify_request(key, headers, "PUT", PATH, b"", NOW)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", PATH, b'{"generation": 4}'),  # tampered body
        ("PUT", "/connectors/payments/fence", BODY),  # replayed against another connector
        ("POST", PATH, BODY),  # another method
    ],
)
def test_tampering_is_detected(key: SessionKey, method: str, path: str, body: bytes) -> None:
    headers = sign_request(key, "PUT", PATH, BODY, NOW)
    with pytest.raises(SessionKeyError) as exc:
        verify_request(key, headers, method, path, body, NOW)
    assert reason(exc) is SessionKeyFailure.BAD_SIGNATURE


def test_tampered_timestamp_is_a_bad_signature(key: SessionKey) -> None:
    headers = sign_request(key, "PUT", PATH, BODY, NOW - 3_600_000)
    headers[TIMESTAMP_HEADER] = str(NOW)  # an old captured request made to look fresh
    with pytest.raises(SessionKeyError) as exc:
        verify_request(key, headers, "PUT", PATH, BODY, NOW)
    assert reason(exc) is SessionKeyFailure.BAD_SIGNATURE


def test_wrong_key(key: SessionKey) -> None:
    headers = sign_request(SessionKey.generate(NOW), "PUT", PATH, BODY, NOW)
    with pytest.raises(SessionKeyError) as exc:
        verify_request(key, headers, "PUT", PATH, BODY, NOW)
    assert reason(exc) is SessionKeyFailure.BAD_SIGNATURE


def test_unsigned(key: SessionKey) -> None:
    with pytest.raises(SessionKeyError) as exc:
        verify_request(key, {}, "PUT", PATH, BODY, NOW)
    assert reason(exc) is SessionKeyFailure.UNSIGNED
    headers = sign_request(key, "PUT", PATH, BODY, NOW)
    del headers[TIMESTAMP_HEADER]
    with pytest.raises(SessionKeyError) as exc:
        verify_request(key, headers, "PUT", PATH, BODY, NOW)
    assert reason(exc) is SessionKeyFailure.UNSIGNED


@pytest.mark.parametrize(
    ("header", "value"),
    [
        (AUTHORIZATION_HEADER, "not base64!"),
        (TIMESTAMP_HEADER, "yesterday"),
        (SIGNATURE_ALGORITHM_HEADER, "HmacMD5"),
    ],
)
def test_malformed_headers_are_bad_signatures(key: SessionKey, header: str, value: str) -> None:
    headers = sign_request(key, "PUT", PATH, BODY, NOW)
    headers[header] = value
    with pytest.raises(SessionKeyError) as exc:
        verify_request(key, headers, "PUT", PATH, BODY, NOW)
    assert reason(exc) is SessionKeyFailure.BAD_SIGNATURE


def test_expired_and_future(key: SessionKey) -> None:
    headers = sign_request(key, "PUT", PATH, BODY, NOW)
    verify_request(key, headers, "PUT", PATH, BODY, NOW + 60_000, max_age_ms=60_000)
    with pytest.raises(SessionKeyError) as exc:
        verify_request(key, headers, "PUT", PATH, BODY, NOW + 60_001, max_age_ms=60_000)
    assert reason(exc) is SessionKeyFailure.EXPIRED
    with pytest.raises(SessionKeyError) as exc:
        verify_request(key, headers, "PUT", PATH, BODY, NOW - 60_001, max_age_ms=60_000)
    assert reason(exc) is SessionKeyFailure.EXPIRED


def test_rotation_accepts_current_and_previous(key: SessionKey) -> None:
    new = SessionKey.generate(NOW + 10)
    old_signed = sign_request(key, "PUT", PATH, BODY, NOW)
    new_signed = sign_request(new, "PUT", PATH, BODY, NOW)
    verify_request([new, key], old_signed, "PUT", PATH, BODY, NOW)
    verify_request([new, None], new_signed, "PUT", PATH, BODY, NOW)
    with pytest.raises(SessionKeyError) as exc:
        verify_request([new], old_signed, "PUT", PATH, BODY, NOW)  # two rotations later
    assert reason(exc) is SessionKeyFailure.BAD_SIGNATURE


def test_no_key_known_yet() -> None:
    headers = sign_request(SessionKey.generate(NOW), "PUT", PATH, BODY, NOW)
    with pytest.raises(SessionKeyError) as exc:
        verify_request([None], headers, "PUT", PATH, BODY, NOW)
    assert reason(exc) is SessionKeyFailure.NO_KEY


def test_line_breaks_in_path_refused(key: SessionKey) -> None:
    with pytest.raises(ValueError):
        sign_request(key, "PUT", "/a\n/b", BODY, NOW)


def test_signatures_differ_per_request_and_a_replay_is_refused(key: SessionKey) -> None:
    first = sign_request(key, "PUT", PATH, BODY, NOW)
    twin = sign_request(key, "PUT", PATH, BODY, NOW)  # same request, same millisecond
    assert first[AUTHORIZATION_HEADER] != twin[AUTHORIZATION_HEADER]
    guard = ReplayGuard()
    for headers in (first, twin):
        verify_request(key, headers, "PUT", PATH, BODY, NOW)
        guard.check(headers, "PUT", PATH)
    with pytest.raises(SessionKeyError) as info:
        guard.check(first, "PUT", PATH)
    assert info.value.reason is SessionKeyFailure.REPLAYED
    tampered = {**first, NONCE_HEADER: "another-nonce"}
    with pytest.raises(SessionKeyError):
        verify_request(key, tampered, "PUT", PATH, BODY, NOW)


def test_a_replay_spelled_differently_in_base64_is_refused(key: SessionKey) -> None:
    """The 32-byte HMAC takes 43 base64 characters and a '='; the last character's two low bits
    are unused, so four spellings decode to the same signature: all are one request."""
    import base64

    headers = sign_request(key, "PUT", PATH, BODY, NOW)
    text = headers[AUTHORIZATION_HEADER]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = alphabet.index(text[42])
    variant = text[:42] + alphabet[last ^ 0b01] + text[43:]
    assert variant != text and base64.b64decode(variant) == base64.b64decode(text)
    replay = {**headers, AUTHORIZATION_HEADER: variant}
    verify_request(key, replay, "PUT", PATH, BODY, NOW)  # the signature itself is valid
    guard = ReplayGuard()
    guard.check(headers, "PUT", PATH)
    with pytest.raises(SessionKeyError) as info:
        guard.check(replay, "PUT", PATH)
    assert info.value.reason is SessionKeyFailure.REPLAYED
