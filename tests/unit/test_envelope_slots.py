"""The decode's builders (`_as_stored`, `_reserved`) make exactly what the frozen constructors make."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from jobbridge.envelope import Envelope, Reservation, _as_stored, _as_stored_by_init, _reserved


def _stored(**changes: object) -> dict[str, object]:
    env = Envelope.new("a.job", "q", {"n": 1}, tries=3, timeout=30.0, now=1_700_000_000.0, unique_key="k",
                       unique_for=5.0, headers={"h": "v"}, expires_at=1_700_000_100.0)
    data: dict[str, object] = orjson.loads(env.encode())
    data.update(changes)
    return data


@pytest.mark.parametrize("changes", [{}, {"unique_key": None, "unique_for": None, "expires_at": None},
                                     {"headers": None}, {"attempts": 4}])
def test_as_stored_builds_what_the_constructor_builds(changes: dict[str, object]) -> None:
    data = _stored(**changes)
    built, by_init = _as_stored(Envelope, data), _as_stored_by_init(Envelope, data)
    assert built is not None and type(built) is Envelope
    assert built == by_init
    for name in Envelope.__slots__:  # every slot set, the private ones too (`encode` reads `_body`)
        assert getattr(built, name) == getattr(by_init, name)
    assert built.encode() == Envelope.decode(orjson.dumps(data)).encode()
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.attempts = 9  # type: ignore[misc]


def test_as_stored_refuses_what_is_out_of_range_as_the_constructor_path_does() -> None:
    for changes in ({"tries": 0}, {"id": ""}, {"timeout": 3}, {"payload": []}):
        data = _stored(**changes)
        assert _as_stored(Envelope, data) is None and _as_stored_by_init(Envelope, data) is None


def test_reserved_is_the_reservation_the_constructor_makes() -> None:
    env = Envelope.decode(orjson.dumps(_stored()))
    built = _reserved(env, ("q", "1-0"), 12.5)
    assert type(built) is Reservation
    assert built == Reservation(env, ("q", "1-0"), 12.5)
    assert [getattr(built, f.name) for f in dataclasses.fields(Reservation)] == [env, ("q", "1-0"), 12.5, b"",
                                                                                  None, False]


def test_the_builders_know_every_slot() -> None:
    """A field added to either class must be added to its builder, or this fails."""
    assert Envelope.__slots__ == ("id", "name", "queue", "payload", "tries", "timeout", "available_at",
                                  "created_at", "attempts", "unique_key", "unique_for", "headers", "expires_at",
                                  "_body", "_in_range")
    assert Reservation.__slots__ == ("envelope", "receipt", "lease_until", "body", "decode_error", "cancelled")


@pytest.mark.parametrize("options", [{}, {"unique_key": "k", "unique_for": 5.0, "headers": {"h": "v"},
                                          "expires_at": 1_700_000_100.0, "available_at": 1_700_000_050.0,
                                          "id": "given"}])
def test_new_builds_what_the_constructor_builds(options: dict[str, object]) -> None:
    """`Envelope.new` sets the slots itself; a subclass still goes through its own ``__init__``."""

    @dataclasses.dataclass(frozen=True, slots=True)
    class Sub(Envelope):
        pass

    fast = Envelope.new("a.job", "q", {"n": 1}, tries=3, timeout=30.0, now=1_700_000_000.0, **options)  # type: ignore[arg-type]
    slow = Sub.new("a.job", "q", {"n": 1}, tries=3, timeout=30.0, now=1_700_000_000.0,
                   id=fast.id, **{k: v for k, v in options.items() if k != "id"})  # type: ignore[arg-type]
    assert type(fast) is Envelope and type(slow) is Sub
    for name in Envelope.__slots__:
        assert getattr(fast, name) == getattr(slow, name), name
    assert fast.encode() == slow.encode() and fast.checked() is fast
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.attempts = 9  # type: ignore[misc]
