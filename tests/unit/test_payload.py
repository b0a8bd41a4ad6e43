"""The payload codec: type-directed round trips, and errors that name the field."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime
from decimal import Decimal

import orjson
import pytest

from jobbridge import PayloadDecodeError, PayloadEncodeError
from jobbridge.payload import decode, encode
from tests.unit.jobs import Address, Colour, Named, Rich


def rich() -> Rich:
    return Rich(
        when=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), day=date(2026, 1, 2), ref=uuid.uuid4(),
        amount=Decimal("12.30"), colour=Colour.BLUE, address=Address("Main St", None),
        tags=["a", "b"], scores={"x": 1.5}, maybe=None,
    )


def test_every_supported_type_survives_json() -> None:
    job = rich()
    data = orjson.loads(orjson.dumps(encode(job)))
    back = decode(Rich, data)
    assert back == job
    assert isinstance(back.when, datetime) and back.when.tzinfo is not None
    assert isinstance(back.amount, Decimal) and str(back.amount) == "12.30"
    assert back.colour is Colour.BLUE and isinstance(back.address, Address)


def test_fields_may_be_called_like_options() -> None:
    job = Named(name="n", queue="q", timeout=5)
    assert decode(Named, encode(job)) == job
    assert Named.options.name == "tests.named" and Named.options.queue == "default"


def test_unencodable_field_is_named_at_encode() -> None:
    job = rich()
    job.tags = [object()]  # type: ignore[list-item]
    with pytest.raises(PayloadEncodeError, match=r"Rich\.tags\[0\] holds a object"):
        encode(job)


def test_non_string_keys_are_refused() -> None:
    job = rich()
    job.scores = {1: 2.0}  # type: ignore[dict-item]
    with pytest.raises(PayloadEncodeError, match="non-string key"):
        encode(job)


def test_decode_names_the_bad_field() -> None:
    data = encode(rich())
    data["address"]["street"] = 7
    with pytest.raises(PayloadDecodeError, match=r"Rich\.address\.street: expected str"):
        decode(Rich, data)


def test_decode_refuses_missing_and_unknown_fields() -> None:
    data = encode(rich())
    del data["when"]
    with pytest.raises(PayloadDecodeError, match="missing field"):
        decode(Rich, data)
    data = encode(rich()) | {"surprise": 1}
    with pytest.raises(PayloadDecodeError, match="unknown field"):
        decode(Rich, data)


def test_bad_enum_and_date_values() -> None:
    data = encode(rich()) | {"colour": "green"}
    with pytest.raises(PayloadDecodeError, match="colour"):
        decode(Rich, data)
    data = encode(rich()) | {"day": "not a date"}
    with pytest.raises(PayloadDecodeError, match="day"):
        decode(Rich, data)
