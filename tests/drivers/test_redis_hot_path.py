"""The Redis worker's per-batch path: the claimed entries' fast decode, and the direct script call.

`entries._as_pushed` takes an entry exactly as the scripts write it in fewer steps than
`entries.reservation`, and `RedisDriver._direct` calls the loop's scripts on a connection of
its own, past redis-py's command layers. Neither may change an outcome: every entry becomes
the reservation (or the stand-in, with its reason) the full path makes of it, and a dropped
connection or a forgotten script is what it is on the client's own path.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import redis

from jobbridge import limits
from jobbridge.drivers.redis import RedisDriver, entries
from jobbridge.envelope import Envelope, Reservation, reservation_as_stored, reservation_from_body
from jobbridge.errors import DriverUnavailable
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import make_envelope
from tests.drivers.redis_helpers import drop_keys, lease_members, make_driver
from tests.services import ensure_redis

CLOCK = FixedClock()
LEASE_UNTIL, NOW = CLOCK.now() + 30.0, CLOCK.now()


def _good(**options: Any) -> Envelope:
    return make_envelope(CLOCK, **options)


def _spoiled(literal: bytes, field: str = "timeout") -> bytes:
    """A good body with one field's value replaced by a JSON literal."""
    data = orjson.loads(_good().encode())
    data[field] = 1.5
    return orjson.dumps(data).replace(b'"%s":1.5' % field.encode(), b'"%s":%s' % (field.encode(), literal))


def _entry(body: bytes, *, job_id: bytes | None = None, attempts: bytes = b"0") -> list[Any]:
    if job_id is None:
        job_id = orjson.loads(body)["id"].encode() if body.startswith(b"{") else b"some-id"
    return [b"id", job_id, b"body", body, b"attempts", attempts]


GOOD = [
    _entry(_good().encode()),
    _entry(_good(unique_key="k", unique_for=5.0, headers={"h": "v"}, expires_at=NOW + 100).encode()),
    _entry(_good().encode(), attempts=b"7"),
    _entry(_good().encode(), attempts=b"%d" % limits.MAX_STORED_ATTEMPTS),
    _entry(_good().replace(attempts=4).encode()),
    _entry(_spoiled(b"1.0", "v")),  # the format's number as a float: read as ever
    _entry(_spoiled(b"null", "headers")),  # no headers: read as none
]
OTHER = [
    _entry(_spoiled(b"60")),  # an int timeout: converted by the full path, not refused
    _entry(_spoiled(b"1e9")),  # clamped to MAX_TIMEOUT
    _entry(_spoiled(b"-5", "attempts")),
    _entry(_spoiled(b"%d" % 2**70, "attempts")),
    _entry(_spoiled(b'"NaN"', "available_at")),
    _entry(_spoiled(b"2", "v")),
    _entry(_spoiled(b"true", "v")),
    _entry(_spoiled(b"[]", "payload")),
    _entry(b"[1, 2]"),
    _entry(b"\xff{not json"),
    _entry(_good().encode(), job_id=b"another-id"),
    _entry(_good().encode(), job_id=b"a\x00b"),
    _entry(_good().encode(), job_id=b"x" * (limits.MAX_NAME_LENGTH + 1)),
    _entry(_good().encode(), job_id=b"\xff\xfe"),
    _entry(_good().encode(), attempts=b"%d" % limits.MAX_ATTEMPTS),
    _entry(_good().encode(), attempts=b"-1"),
    _entry(_good().encode(), attempts=b"12345678901"),
    [b"body", _good().encode(), b"id", b"x", b"attempts", b"0"],
    [b"id", b"x", b"body", _good().encode()],
    [b"id", b"x", b"body", 17, b"attempts", b"0"],
]


def _slots(res: Reservation) -> list[object]:
    """Every slot of a reservation and of its envelope, the private ones too."""
    env = res.envelope
    return [*(getattr(res, name) for name in Reservation.__slots__ if name != "envelope"),
            *(getattr(env, name) for name in Envelope.__slots__)]


def _reply(raw: list[Any], entry_id: bytes = b"1700000000000-0") -> list[Any]:
    """What reserve.lua returns for an entry of these fields: its values when they are id, body and attempts in
    that order, else the fields as they are (the script's own shape test, on the field names alone)."""
    if len(raw) == 6 and raw[0] == b"id" and raw[2] == b"body" and raw[4] == b"attempts":
        return [b"1", entry_id, raw[1], raw[3], raw[5]]
    return [b"1", entry_id, None, raw, None]


@pytest.mark.parametrize("raw", GOOD + OTHER)
def test_every_claimed_entry_is_what_the_full_path_makes_of_it(raw: list[Any]) -> None:
    (fast,) = entries.claimed(_reply(raw), ["default"], LEASE_UNTIL, NOW)
    full = entries.reservation("default", "1700000000000-0", list(zip(raw[::2], raw[1::2], strict=False)),
                               LEASE_UNTIL, NOW)
    assert type(fast) is Reservation and type(fast.envelope) is Envelope
    assert _slots(fast) == _slots(full)


@pytest.mark.parametrize("raw", GOOD)
def test_an_entry_as_the_scripts_write_it_takes_the_fast_path(raw: list[Any]) -> None:
    res = entries._as_pushed("default", "1-0", raw[1], raw[3], raw[5], LEASE_UNTIL)
    assert res is not None and res.decode_error is None and res.attempt == int(raw[5]) + 1
    assert res.receipt == entries.Receipt("default", "1-0") and res.receipt.member == "1-0 default"


@pytest.mark.parametrize("raw", OTHER)
def test_any_other_entry_is_left_to_the_full_path(raw: list[Any]) -> None:
    _, _, raw_id, body, attempts = _reply(raw)
    assert raw_id is None or entries._as_pushed("default", "1-0", raw_id, body, attempts, LEASE_UNTIL) is None


@pytest.mark.parametrize("body", [raw[3] for raw in GOOD + OTHER if len(raw) == 6] + ["{}", None, 3])
@pytest.mark.parametrize("attempt", [1, 6, limits.MAX_ATTEMPTS, limits.MAX_ATTEMPTS + 1, 0, -1, True])
def test_reservation_as_stored_is_reservation_from_body_or_none(body: object, attempt: int) -> None:
    fast = reservation_as_stored(body, "receipt", LEASE_UNTIL, attempt)
    full = reservation_from_body(body, receipt="receipt", lease_until=LEASE_UNTIL, now=NOW, id_hint="h",
                                 queue_hint="q", attempts=attempt, attempts_added=0)
    if fast is not None:
        assert full.decode_error is None and _slots(fast) == _slots(full)


# -- the direct script call -------------------------------------------------------------------


@pytest.fixture
def url_and_prefix() -> Iterator[tuple[str, str]]:
    url, prefix = ensure_redis(), f"jbtest:{uuid.uuid4().hex[:12]}:"
    yield url, prefix
    drop_keys(url, prefix)


@pytest.fixture
def driver(url_and_prefix: tuple[str, str]) -> Iterator[RedisDriver]:
    made = make_driver(*url_and_prefix, CLOCK, reservation=30)
    yield made
    made.close()


def test_a_script_the_server_does_not_know_is_loaded_again(driver: RedisDriver) -> None:
    """What a restarted server answers (NOSCRIPT), without restarting the shared one: an unknown digest."""
    envs = [_good() for _ in range(4)]
    driver.push(envs)
    for script in (driver.scripts.reserve, driver.scripts.acknowledge_and_reserve):
        script.sha = "0" * 40
    first = driver.reserve(["default"], 2)
    rest = driver.acknowledge_and_reserve(first, ["default"], 10)
    assert [r.id for r in first + rest] == [e.id for e in envs]
    assert driver.scripts.reserve.sha != "0" * 40 != driver.scripts.acknowledge_and_reserve.sha


def test_the_lease_set_stays_a_skiplist_and_its_keeper_is_never_reclaimed(driver: RedisDriver) -> None:
    """A worker's few leases would make a listpack, where every ZADD member is an insertion sort (reserve.lua)."""
    assert driver.reserve(["default"], 10) == [] and not driver.client.exists(driver.keys.leases), \
        "an empty reserve writes no lease set"
    envs = [_good() for _ in range(3)]
    driver.push(envs)
    got = driver.reserve(["default"], 10)
    assert driver.client.object("encoding", driver.keys.leases) == b"skiplist"
    assert [m for m, _ in lease_members(driver)] == sorted(f"{r.receipt.entry_id} default".encode() for r in got)
    driver.acknowledge(got)
    assert lease_members(driver) == [] and driver.client.object("encoding", driver.keys.leases) == b"skiplist"
    CLOCK.advance(10 ** 9)
    try:
        assert driver.reclaim_expired() == 0, "the keeper is scored +inf: no lease lapses with it"
    finally:
        CLOCK.advance(-(10 ** 9))


def test_meanwhile_runs_once_between_the_request_and_its_reply_even_across_a_reload(driver: RedisDriver) -> None:
    envs = [_good() for _ in range(4)]
    driver.push(envs)
    ran: list[int] = []
    driver.scripts.reserve.sha = "0" * 40  # NOSCRIPT: the request is written twice
    first = driver.acknowledge_and_reserve([], ["default"], 2, lambda: ran.append(1))
    rest = driver.acknowledge_and_reserve(first, ["default"], 10, lambda: ran.append(2))
    assert ran == [1, 2]
    assert [r.id for r in first + rest] == [e.id for e in envs]


def test_meanwhile_that_raises_leaves_no_reply_for_the_next_call_and_loses_no_job(driver: RedisDriver) -> None:
    envs = [_good() for _ in range(3)]
    driver.push(envs)

    def fails() -> None:
        raise RuntimeError("meanwhile failed")
    with pytest.raises(RuntimeError, match="meanwhile failed"):
        driver.acknowledge_and_reserve([], ["default"], 2, fails)
    (third,) = driver.reserve(["default"], 10)  # the script's unread reply answers nothing
    assert third.id == envs[2].id
    driver.acknowledge([third])
    CLOCK.advance(31)  # the two the failed call claimed were leased: they come back when the lease lapses
    try:
        assert driver.reclaim_expired() == 2
    finally:
        CLOCK.advance(-31)
    again = driver.reserve(["default"], 10)
    assert sorted(r.id for r in again) == sorted(e.id for e in envs[:2]) and all(r.attempt == 2 for r in again)


def _kill_direct_connection(driver: RedisDriver) -> None:
    conn = driver._direct._connection
    assert conn is not None and conn._sock is not None
    host, port = conn._sock.getsockname()[:2]
    assert driver.client.client_kill_filter(addr=f"{host}:{port}") == 1


def test_a_dropped_connection_is_driver_unavailable_and_the_next_call_reconnects(driver: RedisDriver) -> None:
    envs = [_good() for _ in range(3)]
    driver.push(envs)
    first = driver.reserve(["default"], 1)
    _kill_direct_connection(driver)
    with pytest.raises(DriverUnavailable) as caught:
        driver.acknowledge_and_reserve(first, ["default"], 1)
    assert isinstance(caught.value.__cause__, redis.ConnectionError)
    assert str(caught.value).startswith("redis at redis://127.0.0.1"), "it names the store"
    again = driver.acknowledge_and_reserve(first, ["default"], 5)  # acknowledging is idempotent
    assert {r.id for r in first + again} == {e.id for e in envs}


def test_with_reconnect_a_dropped_connection_is_retried(url_and_prefix: tuple[str, str]) -> None:
    driver = make_driver(*url_and_prefix, CLOCK, reconnect=True)
    try:
        env = _good()
        driver.push([env])
        assert driver.reserve(["other"], 1) == []
        _kill_direct_connection(driver)
        assert [r.id for r in driver.reserve(["default"], 1)] == [env.id]
    finally:
        driver.close()


def test_an_unreachable_store_is_driver_unavailable_on_the_combined_call() -> None:
    dead = make_driver("redis://127.0.0.1:1/0", "jb:", CLOCK, connect_timeout_ms=200)
    with pytest.raises(DriverUnavailable) as caught:
        dead.acknowledge_and_reserve([], ["default"], 1)
    assert isinstance(caught.value.__cause__, redis.ConnectionError)
    assert "cannot be reached" in str(caught.value)
    dead.close()
