"""The payload codec: type-directed round trips, and errors that name the field."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal

import orjson
import pytest

from jobbridge import Job, JobContext, PayloadDecodeError, PayloadEncodeError
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


# -- poison payloads: every failure is a PayloadDecodeError naming the field, never quoting the value ----

SECRET = "sk-live-SECRET-4c2d"


@dataclass
class Checked:
    """A nested class whose constructor refuses a value, quoting it (as user code may)."""

    code: str

    def __post_init__(self) -> None:
        if not self.code.isdigit():
            raise ValueError(f"bad code {self.code}")


class Odd(Job, name="tests.odd"):
    checked: Checked = field(default_factory=lambda: Checked("1"))
    items: set[list[int]] = field(default_factory=set)  # a set of lists cannot be built: set() raises

    def handle(self, ctx: JobContext) -> None:
        pass


@pytest.mark.parametrize(("field", "value", "says"), [
    ("ref", 123, "Rich.ref: expected UUID, got an integer"),  # uuid.UUID(123) raises AttributeError
    ("ref", [SECRET], "Rich.ref: expected UUID, got a list"),
    ("ref", SECRET, "Rich.ref: expected UUID, got a string"),
    ("when", {"at": SECRET}, "Rich.when: expected datetime, got an object"),
    ("day", 20260102, "Rich.day: expected date, got an integer"),
    ("amount", {"v": 1}, "Rich.amount: expected Decimal, got an object"),
    ("colour", [SECRET], "Rich.colour: expected a Colour value, got a list"),  # unhashable: TypeError
    ("address", SECRET, "Rich.address: expected an object for Address, got a string"),
    ("tags", [SECRET, 5], "Rich.tags[1]: expected str, got an integer"),
    ("scores", {SECRET: SECRET}, "Rich.scores[entry 0]: expected float, got a string"),
    ("maybe", SECRET, "Rich.maybe: expected int | None, got a string"),
])
def test_a_field_that_does_not_decode_is_named_with_its_type_never_its_value(
        field: str, value: object, says: str) -> None:
    data = encode(rich()) | {field: value}
    with pytest.raises(PayloadDecodeError) as caught:
        decode(Rich, data)
    assert says in str(caught.value)
    assert SECRET not in str(caught.value)


def test_unknown_fields_are_counted_not_listed() -> None:
    data = encode(rich()) | {SECRET: 1, "another": 2}
    with pytest.raises(PayloadDecodeError, match="2 unknown field") as caught:
        decode(Rich, data)
    assert SECRET not in str(caught.value) and "another" not in str(caught.value)


def test_missing_fields_are_listed_by_the_class_names() -> None:
    with pytest.raises(PayloadDecodeError, match=r"missing field\(s\) \['day', 'when'\]"):
        decode(Rich, {k: v for k, v in encode(rich()).items() if k not in ("when", "day")})


def test_a_constructor_that_refuses_the_values_is_a_decode_error_without_its_message() -> None:
    with pytest.raises(PayloadDecodeError, match=r"Odd\.checked: .*\(ValueError") as caught:
        decode(Odd, {"checked": {"code": SECRET}})
    assert SECRET not in str(caught.value)


def test_whatever_a_decoder_raises_is_a_decode_error_naming_the_field() -> None:
    with pytest.raises(PayloadDecodeError, match=r"Odd\.items: expected .*\(TypeError") as caught:
        decode(Odd, {"items": [[1], [2]]})  # a set of lists: unhashable, raised by set() itself
    assert "[1]" not in str(caught.value)


def test_a_payload_that_is_not_an_object() -> None:
    with pytest.raises(PayloadDecodeError, match="Rich: expected an object, got a list"):
        decode(Rich, [SECRET])  # type: ignore[arg-type]


def test_encode_errors_quote_no_value_or_key() -> None:
    job = rich()
    job.scores = {SECRET: 1.0, 5: 2.0}  # type: ignore[dict-item]
    with pytest.raises(PayloadEncodeError, match=r"non-string key \(of type int\)") as caught:
        encode(job)
    assert SECRET not in str(caught.value)
    job.scores = {SECRET: object()}  # type: ignore[dict-item]
    with pytest.raises(PayloadEncodeError, match=r"Rich\.scores\[entry 0\] holds a object") as caught:
        encode(job)
    assert SECRET not in str(caught.value)


def test_a_value_of_a_scalar_subclass_is_encoded_as_encode_value_would() -> None:
    import enum
    from typing import Any

    class Level(enum.IntEnum):
        HIGH = 3

    class Tag(enum.StrEnum):
        RED = "red"

    @dataclass
    class Holder:
        level: Any
        tag: Any
        text: str
        count: int

    assert orjson.loads(orjson.dumps(encode(Holder(Level.HIGH, Tag.RED, "x", 2)))) == \
        {"level": 3, "tag": "red", "text": "x", "count": 2}
