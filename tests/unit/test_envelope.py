"""Reading a stored envelope: every malformed message is refused naming its field, never its value.

And `reservation_from_body`, which every driver builds its reservations with,
never raises: whatever the store handed back becomes a reservation to run or a
stand-in to fail, with its reason.
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from jobbridge import JobBridge
from jobbridge.drivers.memory import CAPABILITIES, MemoryDriver
from jobbridge.envelope import Envelope, reservation_from_body, undecodable
from jobbridge.errors import PayloadDecodeError, PayloadEncodeError, PayloadTooLarge
from jobbridge.limits import MAX_ATTEMPTS, MAX_STORED_ATTEMPTS, MAX_TIMEOUT
from jobbridge.settings import Settings
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import pending
from tests.unit.jobs import Notify, Padded

SECRET = "sk-live-SECRET-1b7e"


def good(**changes: Any) -> dict[str, Any]:
    env = Envelope(id="0199c1d2-6f7e-7a31-b5d4-2f0c8e9a1b23", name="tests.notify", queue="mail",
                   payload={"post_id": 1}, tries=3, timeout=60.0, available_at=1_800_000_000.0,
                   created_at=1_800_000_000.0)
    return {**orjson.loads(env.encode()), **changes}


def without(key: str) -> dict[str, Any]:
    data = good()
    del data[key]
    return data


BAD: dict[str, tuple[object, str]] = {
    # kind: (stored body, what the error must say)
    "not json": (b"{not json", "not JSON"),
    "not utf-8": (b"\xff\xfe{}", "not JSON"),
    "a json list": (b"[1, 2]", "not a JSON object"),
    "a json string": (b'"just text"', "not a JSON object"),
    "an int": (123, "of type int"),
    "none": (None, "of type NoneType"),
    "no version": (orjson.dumps(without("v")), "unknown envelope format"),
    "version true": (orjson.dumps(good(v=True)), "unknown envelope format"),
    "version 2": (orjson.dumps(good(v=2)), "unknown envelope format"),
    "no id": (orjson.dumps(without("id")), "id: expected a value, but the field is missing"),
    "id an int": (orjson.dumps(good(id=7)), "id: expected a non-empty string"),
    "id empty": (orjson.dumps(good(id="")), "id: expected a non-empty string"),
    "id a list": (orjson.dumps(good(id=[SECRET])), "id: expected a non-empty string"),
    "id with a nul": (orjson.dumps(good(id="a\x00b")), "id: expected"),
    "name 300 chars": (orjson.dumps(good(name="n" * 300)), "name: expected a non-empty string of at most 191"),
    "queue null": (orjson.dumps(good(queue=None)), "queue: expected"),
    "payload a list": (orjson.dumps(good(payload=[SECRET])), "payload: expected an object"),
    "no payload": (orjson.dumps(without("payload")), "payload: expected a value"),
    "tries a bool": (orjson.dumps(good(tries=True)), "tries: expected an integer from 1 to 2147483647"),
    "tries zero": (orjson.dumps(good(tries=0)), "tries: expected an integer from 1"),
    "tries a float": (orjson.dumps(good(tries=1.5)), "tries: expected an integer"),
    "tries 2**31": (orjson.dumps(good(tries=2**31)), "tries: expected an integer"),
    "timeout a string": (orjson.dumps(good(timeout="60")), "timeout: expected a positive finite number"),
    "timeout zero": (orjson.dumps(good(timeout=0)), "timeout: expected a positive"),
    "timeout negative": (orjson.dumps(good(timeout=-1)), "timeout: expected a positive"),
    "timeout a bool": (orjson.dumps(good(timeout=True)), "timeout: expected"),
    "available_at negative": (orjson.dumps(good(available_at=-1e18)), "available_at: expected a time"),
    "available_at past 9999": (orjson.dumps(good(available_at=1e300)), "available_at: expected a time"),
    "available_at a string": (orjson.dumps(good(available_at=SECRET)), "available_at: expected a time"),
    "created_at missing": (orjson.dumps(without("created_at")), "created_at: expected a value"),
    "attempts negative": (orjson.dumps(good(attempts=-5)), f"attempts: expected an integer from 0 to "
                                                            f"{MAX_STORED_ATTEMPTS}"),
    "attempts no room for one more": (orjson.dumps(good(attempts=MAX_ATTEMPTS)), "attempts: expected"),
    "attempts above 64 bits": (orjson.dumps(good()).replace(b'"attempts":0', b'"attempts":' + b"9" * 30),
                               "attempts: expected an integer"),
    "attempts a float": (orjson.dumps(good(attempts=1.0)), "attempts: expected an integer"),
    "unique_key an int": (orjson.dumps(good(unique_key=5)), "unique_key: expected a string or null"),
    "unique_for a string": (orjson.dumps(good(unique_for=SECRET)), "unique_for: expected a finite number"),
    "unique_for negative": (orjson.dumps(good(unique_for=-1)), "unique_for: expected"),
    "headers a list": (orjson.dumps(good(headers=[SECRET])), "headers: expected an object"),
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_a_malformed_stored_message_is_refused_naming_the_field_never_the_value(kind: str) -> None:
    body, reason = BAD[kind]
    with pytest.raises(PayloadDecodeError) as caught:
        Envelope.decode(body)
    assert reason in str(caught.value)
    assert SECRET not in str(caught.value) and "nnnnnnnnnn" not in str(caught.value)


@pytest.mark.parametrize("kind", sorted(BAD))
def test_reservation_from_body_hands_out_every_malformed_message_as_a_stand_in(kind: str) -> None:
    body, reason = BAD[kind]
    res = reservation_from_body(body, receipt=("row", "token"), lease_until=70.0, now=10.0,
                                id_hint="row-id", queue_hint="mail", attempts=4)
    assert res.decode_error is not None and reason in res.decode_error
    assert SECRET not in res.decode_error
    assert (res.id, res.envelope.queue, res.attempt, res.receipt) == ("row-id", "mail", 4, ("row", "token"))
    assert res.stored_body() == (body if isinstance(body, bytes) else res.body), "the raw body is kept"
    assert Envelope.decode(res.envelope.encode(), attempts=1).name == "<undecodable>", "the stand-in encodes"


def test_odd_but_valid_messages_decode() -> None:
    assert Envelope.decode(orjson.dumps(good(timeout=1e12))).timeout == MAX_TIMEOUT, "clamped, not refused"
    assert Envelope.decode(orjson.dumps(good(available_at=0))).available_at == 0.0
    assert Envelope.decode(orjson.dumps(good(headers=None))).headers == {}
    assert Envelope.decode(orjson.dumps(good(later_field={"x": 1}))).id == good()["id"], "unknown keys ignored"
    assert Envelope.decode(orjson.dumps(good(unique_key="k", unique_for=0))).unique_key == "k"
    body = orjson.dumps(good())
    assert Envelope.decode(body.decode()) == Envelope.decode(memoryview(body)) == Envelope.decode(bytearray(body))


@pytest.mark.parametrize(("body", "expected"), [
    ("text", b"text"),
    (memoryview(b"\x00raw"), b"\x00raw"),
    ("lone \udcff surrogate", b"lone \xff surrogate"),
    ("lone \ud800 high", "lone \ud800 high".encode("utf-8", "surrogatepass")),
    (12, b"12"),
    (None, b""),
])
def test_any_body_type_is_kept_as_bytes_for_the_failed_store(body: object, expected: bytes) -> None:
    res = reservation_from_body(body, receipt=None, lease_until=1.0, now=0.0, id_hint="x", queue_hint="q")
    assert res.decode_error is not None and res.body == expected


def test_the_count_beside_the_body_replaces_its_own_and_must_be_in_range() -> None:
    body = orjson.dumps(good(attempts=0))

    def make(**counts: Any) -> Any:
        return reservation_from_body(body, receipt=None, lease_until=1.0, now=0.0, id_hint="x", queue_hint="q",
                                     **counts)

    assert make(attempts=3).attempt == 3
    assert make(attempts_added=1).attempt == 1, "the body's own count, plus the one reservation being made"
    assert make(attempts=2, attempts_added=2).attempt == 4
    # each bad count, and the stand-in's attempt: the store's count clamped into any store's column (a count that
    # is not an int counts as none: 1)
    for counts, stand_in in (({}, 1), ({"attempts": -4}, 1), ({"attempts": 0}, 1), ({"attempts": 2**70}, MAX_ATTEMPTS),
                             ({"attempts": MAX_ATTEMPTS + 1}, MAX_ATTEMPTS), ({"attempts": True}, 1),
                             ({"attempts": "3"}, 1)):  # type: ignore[dict-item]
        res = make(**counts)
        assert res.decode_error is not None and "attempts" in res.decode_error, counts
        assert res.attempt == stand_in, counts
        res.envelope.encode()  # never too big for orjson (a Redis worker once died re-encoding one)


@pytest.mark.parametrize("hint", [b"\xff\xfe", "", "x" * 300, 5, None, "nul\x00", "\udcff"])
def test_a_hint_no_store_can_hold_gets_a_fresh_id(hint: object) -> None:
    res = reservation_from_body(b"junk", receipt=None, lease_until=1.0, now=0.0, id_hint=hint, queue_hint=hint)
    assert res.decode_error is not None
    assert len(res.id) == 36 and res.envelope.queue == "<unknown>"


def test_a_bytes_hint_in_utf8_is_used() -> None:
    res = reservation_from_body(b"junk", receipt=None, lease_until=1.0, now=0.0, id_hint=b"id-1", queue_hint="q")
    assert res.id == "id-1"


def test_undecodable_keeps_its_count_in_range() -> None:
    assert undecodable(id="a", queue="q", attempts=2**80, now=0.0).attempts == MAX_ATTEMPTS
    assert undecodable(id="a", queue="q", attempts=-3, now=0.0).attempts == 1


def test_encode_refuses_what_json_cannot_hold_as_a_payload_error() -> None:
    env = Envelope.decode(orjson.dumps(good())).replace(payload={"n": 2**70})
    with pytest.raises(PayloadEncodeError, match="cannot be stored as JSON"):
        env.encode()


# -- at dispatch: the same ranges, so nothing dispatched is ever undecodable ---------------------


@pytest.fixture
def bridge(jobbridge_memory: JobBridge) -> JobBridge:
    jobbridge_memory.register(Notify)
    return jobbridge_memory


def pushed(bridge: JobBridge) -> Envelope:
    (res,) = bridge.driver().reserve(["mail"], 1)
    return res.envelope


def test_a_timeout_above_the_maximum_is_clamped_at_dispatch(bridge: JobBridge) -> None:
    env = bridge.envelope(Notify(post_id=1)).replace(timeout=1e12)  # as a job option or the facade would give
    bridge.push([env])
    assert pushed(bridge).timeout == MAX_TIMEOUT


@pytest.mark.parametrize(("changes", "field"), [
    ({"timeout": math.nan}, "timeout"),
    ({"timeout": math.inf}, "timeout"),
    ({"timeout": 0.0}, "timeout"),
    ({"tries": 2**31}, "tries"),
    ({"queue": "q" * 192}, "queue"),
    ({"available_at": -1.0}, "available_at"),
    ({"headers": [1]}, "headers"),
])
def test_a_value_out_of_range_is_refused_at_dispatch(bridge: JobBridge, changes: dict[str, Any],
                                                     field: str) -> None:
    env = bridge.envelope(Notify(post_id=1)).replace(**changes)
    with pytest.raises(ValueError, match=f"cannot be dispatched: {field} must be"):
        bridge.push([env])
    assert pending(bridge.driver(), "mail") == 0


def test_a_date_before_1970_is_refused_at_dispatch(bridge: JobBridge) -> None:
    from datetime import UTC, datetime

    with pytest.raises(ValueError, match="available_at must be"):
        bridge.dispatch(Notify(post_id=1), at=datetime(1960, 1, 1, tzinfo=UTC))


class Limited(MemoryDriver):
    """A memory store that takes envelopes of at most 300 bytes."""

    capabilities = dataclasses.replace(CAPABILITIES, max_message_bytes=300)


@pytest.mark.parametrize("dispatch", [
    lambda bridge, job: bridge.dispatch(job),
    lambda bridge, job: bridge.dispatch_many([Padded(post_id=1), job]),
    lambda bridge, job: bridge.push([bridge.envelope(job)]),  # the path the Celery facade takes
])
def test_an_envelope_over_the_drivers_size_limit_is_refused_at_dispatch(
        dispatch: Callable[[JobBridge, Any], object]) -> None:
    conf = Settings.from_mapping({"driver": "memory"})
    store = Limited(clock=FixedClock())
    bridge = JobBridge(conf, drivers={conf.default_connection: store}, jobs=[Padded], clock=FixedClock())
    assert bridge.dispatch(Padded(post_id=2)) is not None, "one that fits is stored"
    big = Padded(post_id=3, text=SECRET * 20)
    with pytest.raises(PayloadTooLarge) as caught:
        dispatch(bridge, big)
    message = str(caught.value)
    size = len(bridge.envelope(big).encode())
    assert f"is {size} bytes encoded" in message and "takes at most 300" in message
    assert "memory driver" in message and "store the data elsewhere" in message
    assert SECRET not in message, "sizes and names, never the payload"
    assert pending(store, "mail") == 1, "nothing of the refused call was stored"


# -- what dispatch does once per job: the range check and the encoding --------------------------------------------


class Level(int):
    """An int subclass: the ranges keep it as it is, so the check must not take it for a plain int."""


def _base(**changes: Any) -> Envelope:
    return Envelope(**{**{"id": "0199c1d2-6f7e-7a31-b5d4-2f0c8e9a1b23", "name": "tests.notify", "queue": "mail",
                          "payload": {"post_id": 1}, "tries": 3, "timeout": 60.0, "available_at": 1_800_000_000.0,
                          "created_at": 1_800_000_000.0}, **changes})


@pytest.mark.parametrize("changes", [
    {},
    {"timeout": 60},  # an int: the stored form is a float
    {"tries": True},  # a bool is no count
    {"tries": Level(2)},
    {"payload": types.MappingProxyType({"post_id": 1})},  # a mapping that is not a dict: copied into one
    {"headers": types.MappingProxyType({"h": 1})},
    {"available_at": 0.0, "created_at": -0.0},
    {"unique_key": "k", "unique_for": 3600},  # an int: a float once checked
    {"unique_for": 1e300},  # finite, beyond any time: kept
    {"expires_at": 1_800_000_060.0},
    {"attempts": MAX_STORED_ATTEMPTS},
    {"timeout": 1e12},  # clamped
])
def test_checked_is_what_the_ranges_make_of_every_field(changes: dict[str, Any]) -> None:
    from jobbridge import limits

    env = _base(**changes)
    try:
        expected: Envelope | None = Envelope(**limits.envelope_fields(
            {f.name: getattr(env, f.name) for f in dataclasses.fields(env) if f.init}))
    except limits.FieldRefused:
        expected = None
    if expected is None:
        with pytest.raises(ValueError, match="cannot be dispatched"):
            env.checked()
        return
    checked = env.checked()
    assert checked == expected
    assert [type(getattr(checked, f.name)) for f in dataclasses.fields(Envelope)] == \
        [type(getattr(expected, f.name)) for f in dataclasses.fields(Envelope)]
    assert checked.encode() == expected.encode()
    assert checked.checked() is checked, "a checked envelope is its own checked form"


def test_an_envelope_dispatch_built_is_its_own_checked_form_and_encodes_once(bridge: JobBridge,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    env = bridge.envelope(Notify(post_id=1))
    assert env.checked() is env, "nothing to change, so nothing is copied"
    calls = []
    real = orjson.dumps
    monkeypatch.setattr(orjson, "dumps", lambda value: calls.append(1) or real(value))
    first = env.encode()
    assert env.encode() is first and len(calls) == 1, "the size check and the driver share one encoding"
    moved = env.replace(queue="other")
    assert orjson.loads(moved.encode())["queue"] == "other", "a copy with a change encodes anew"
    assert orjson.loads(env.encode())["queue"] == "mail"


def test_a_reservation_counts_the_attempt_it_starts_once() -> None:
    body = _base(attempts=2).encode()
    res = reservation_from_body(body, receipt=None, lease_until=0.0, now=0.0, id_hint=None, queue_hint=None,
                                attempts_added=1)
    assert res.decode_error is None and res.envelope.attempts == 3
    assert res.envelope == dataclasses.replace(Envelope.decode(body), attempts=3)
    stored = reservation_from_body(body, receipt=None, lease_until=0.0, now=0.0, id_hint=None, queue_hint=None,
                                   attempts=5, attempts_added=2)
    assert stored.envelope.attempts == 7, "the store's count replaces the body's, then the added ones count"


@pytest.mark.parametrize("changes", [
    {}, {"timeout": 60}, {"created_at": 1_800_000_000}, {"unique_for": 3600}, {"unique_key": "k"},
    {"headers": None}, {"attempts": MAX_STORED_ATTEMPTS}, {"timeout": 1e12}, {"expires_at": 1_800_000_060.0},
])
def test_a_stored_body_decodes_to_what_the_ranges_make_of_it(changes: dict[str, Any]) -> None:
    from jobbridge import limits

    body = orjson.dumps(good(**changes))
    expected = Envelope(**limits.envelope_fields(orjson.loads(body)))
    decoded = Envelope.decode(body)
    assert decoded == expected
    assert [type(getattr(decoded, f.name)) for f in dataclasses.fields(Envelope)] == \
        [type(getattr(expected, f.name)) for f in dataclasses.fields(Envelope)]
