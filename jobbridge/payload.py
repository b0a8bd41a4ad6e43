"""Payload codec: a job's dataclass fields to JSON and back, decoded by their annotations.

A field may also be a pydantic (v2) model, when pydantic is installed (the
``jobbridge[pydantic]`` extra): it is encoded with the model's own JSON mode
(``model_dump(mode="json")``) and decoded by validation in JSON mode
(``model_validate_json``), so a model round-trips exactly as its own JSON
does, validators and all. pydantic is never imported here: a value can only
be a model once the module that defines it has imported pydantic.

Encoding happens at dispatch, so a value that cannot cross the process
boundary fails in the web request that dispatched it, naming the field,
rather than later in a worker. Decoding turns *every* failure, whatever a
field's decoder raised (``uuid.UUID(123)`` raises AttributeError), into a
`PayloadDecodeError`, which the worker treats as permanent: the job is failed
once, never retried. Errors name the field's path and the type expected and
never quote a value or a key taken from the message, which may be a secret.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

import orjson

from jobbridge.errors import PayloadDecodeError, PayloadEncodeError

Decoder = Callable[[Any, str], Any]
_JSON_SCALARS = (str, int, float, bool, type(None))


def encode_value(value: Any, path: str) -> Any:
    """One value to JSON-ready data; ``path`` names it in the error."""
    if isinstance(value, _JSON_SCALARS):
        return value
    if isinstance(value, enum.Enum):
        return encode_value(value.value, path)
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, (uuid.UUID, Decimal)):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode_value(getattr(value, f.name), f"{path}.{f.name}") for f in dataclasses.fields(value)}
    if (model := _model_class()) is not None and isinstance(value, model):
        return _dump_model(value, path)
    if isinstance(value, (list, tuple, set, frozenset)):
        return [encode_value(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, v in value.items():
            if not isinstance(key, str):
                raise PayloadEncodeError(f"{path} has a non-string key (of type {type(key).__name__}): "
                                         "JSON object keys are strings")
            out[key] = encode_value(v, f"{path}[entry {len(out)}]")
        return out
    raise _unencodable(value, path)


def _unencodable(value: Any, path: str) -> PayloadEncodeError:
    legacy = getattr(sys.modules.get("pydantic.v1"), "BaseModel", None)
    if isinstance(legacy, type) and isinstance(value, legacy):
        return PayloadEncodeError(f"{path} is a pydantic version 1 model ({type(value).__name__}), which "
                                  "jobbridge does not store; make it a pydantic 2 BaseModel, or pass model.dict() "
                                  "in a dict field")
    return PayloadEncodeError(
        f"{path} holds a {type(value).__name__}, which cannot be stored as JSON; "
        "store an id or a JSON value (str, int, float, bool, None, list, dict, datetime, date, "
        "UUID, Decimal, Enum, a dataclass or a pydantic model) and load the object in handle()"
    )


def _model_class() -> type | None:
    """pydantic's ``BaseModel`` if something imported pydantic, else None (then no value is a model)."""
    pydantic = sys.modules.get("pydantic")
    found = getattr(pydantic, "BaseModel", None)
    return found if isinstance(found, type) else None


def _dump_model(value: Any, path: str) -> Any:
    try:
        return value.model_dump(mode="json")
    except Exception as exc:  # PydanticSerializationError: a field of a type pydantic cannot dump
        raise PayloadEncodeError(f"{path} is a {type(value).__name__} model that pydantic cannot dump as JSON "
                                 f"({type(exc).__name__}); give its fields JSON types or a serializer") from None


def _model(kind: type) -> Decoder:
    def decode(value: Any, path: str) -> Any:
        try:
            return kind.model_validate_json(orjson.dumps(value))  # type: ignore[attr-defined]
        except Exception as exc:  # a ValidationError names where and why; its inputs are never shown
            raise PayloadDecodeError(f"{path}: the stored value is not a valid {kind.__name__}: "
                                     f"{_validation_problems(exc)}") from None

    return decode


#: pydantic error types whose message is the model author's own text, which may quote the value
_AUTHORS_MESSAGES = ("value_error", "assertion_error")


def _why(error: Mapping[str, Any]) -> str:
    """pydantic's message for one error (it never holds the input), unless a validator of the model wrote it."""
    if error.get("type") in _AUTHORS_MESSAGES:
        return "refused by a validator of the model (its message is not shown: it may quote the value)"
    return str(error.get("msg", error.get("type")))


def _validation_problems(exc: Exception) -> str:
    """Where and why a model refused its data, from pydantic's errors without their inputs."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return type(exc).__name__
    try:
        found = errors(include_input=False, include_url=False, include_context=False)
    except TypeError:
        return type(exc).__name__
    shown = [f"{'.'.join(map(str, e.get('loc', ()))) or '(the model)'}: {_why(e)}" for e in found[:3]]
    more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
    return "; ".join(shown) + more


def encode(job: Any) -> dict[str, Any]:
    """A job instance's fields as a JSON-ready dict.

    Dispatch runs this for every job: a field whose value is exactly a JSON scalar
    is taken as it is, without `encode_value`'s checks, and each class's field names
    (with the path an error would name) are worked out once.
    """
    out: dict[str, Any] = {}
    for key, path in _fields_of(type(job)):
        value = getattr(job, key)
        out[key] = value if type(value) in _PLAIN else encode_value(value, path)
    return out


#: the types `encode_value` hands back unchanged (a subclass, an IntEnum say, goes through it)
_PLAIN = frozenset(_JSON_SCALARS)


_FIELDS: dict[type, tuple[tuple[str, str], ...]] = {}


def _fields_of(cls: type) -> tuple[tuple[str, str], ...]:
    """A job class's field names, each with the path its errors name (``Class.field``)."""
    found = _FIELDS.get(cls)
    if found is None:
        found = tuple((f.name, f"{cls.__name__}.{f.name}") for f in dataclasses.fields(cls))
        if len(_FIELDS) < 4096:  # classes made on the fly (tests) are not kept for ever
            _FIELDS[cls] = found
    return found


_KINDS: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"),
    (list, "a list"), (dict, "an object"),
)


def _kind(value: Any) -> str:
    """What a value is, in JSON's words: enough to see the mistake, without quoting the value."""
    if value is None:
        return "null"
    for kind, words in _KINDS:
        if isinstance(value, kind):
            return words
    return f"a {type(value).__name__}"


def _fail(path: str, expected: str, value: Any) -> PayloadDecodeError:
    return PayloadDecodeError(f"{path}: expected {expected}, got {_kind(value)}")


def _scalar(kind: type) -> Decoder:
    def decode(value: Any, path: str) -> Any:
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
            return value
        raise _fail(path, kind.__name__, value)

    return decode


def _parsed(kind: type, parse: Callable[[Any], Any]) -> Decoder:
    def decode(value: Any, path: str) -> Any:
        try:
            return parse(value)
        except Exception:  # uuid.UUID(123) raises AttributeError: any failure is the value's
            raise _fail(path, kind.__name__, value) from None

    return decode


def _sequence(hint: Any, args: tuple[Any, ...]) -> Decoder:
    origin = typing.get_origin(hint)
    if origin is tuple and args and args[-1] is not Ellipsis:
        items = [decoder_for(a) for a in args]

        def fixed(value: Any, path: str) -> Any:
            if not isinstance(value, list) or len(value) != len(items):
                raise _fail(path, f"a list of {len(items)}", value)
            return tuple(d(v, f"{path}[{i}]") for i, (d, v) in enumerate(zip(items, value, strict=True)))

        return fixed
    item = decoder_for(args[0]) if args else _any
    build: Callable[[Any], Any] = {tuple: tuple, set: set, frozenset: frozenset}.get(origin, list)

    def seq(value: Any, path: str) -> Any:
        if not isinstance(value, list):
            raise _fail(path, "a list", value)
        return build(item(v, f"{path}[{i}]") for i, v in enumerate(value))

    return seq


def _mapping(args: tuple[Any, ...]) -> Decoder:
    item = decoder_for(args[1]) if len(args) == 2 else _any

    def decode(value: Any, path: str) -> Any:
        if not isinstance(value, dict):
            raise _fail(path, "an object", value)
        return {k: item(v, f"{path}[entry {i}]") for i, (k, v) in enumerate(value.items())}

    return decode


def _union(args: tuple[Any, ...]) -> Decoder:
    options = [decoder_for(a) for a in args if a is not type(None)]
    optional = type(None) in args

    def decode(value: Any, path: str) -> Any:
        if value is None and optional:
            return None
        for option in options:
            try:
                return option(value, path)
            except PayloadDecodeError:
                continue
        raise _fail(path, " | ".join("None" if a is type(None) else _label(a) for a in args), value)

    return decode


def _any(value: Any, path: str) -> Any:
    return value


def _enum(kind: type[enum.Enum]) -> Decoder:
    def decode(value: Any, path: str) -> Any:
        try:
            return kind(value)
        except Exception:  # a list is unhashable (TypeError), an unknown value a ValueError
            raise _fail(path, f"a {kind.__name__} value", value) from None

    return decode


_PARSERS: dict[type, Callable[[Any], Any]] = {
    datetime: datetime.fromisoformat,
    date: date.fromisoformat,
    time: time.fromisoformat,
    uuid.UUID: uuid.UUID,
    Decimal: Decimal,
}


def decoder_for(hint: Any) -> Decoder:
    """The decoder for one annotation; built once per field and cached by `decoder_of`."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any or hint is object:
        return _any
    if origin is typing.Union or origin is types.UnionType:
        return _union(args)
    if origin is typing.Literal:
        return _literal(args)
    if origin in (list, tuple, set, frozenset) or hint in (list, tuple, set, frozenset):
        return _sequence(hint, args)
    if origin is dict or hint is dict or origin is Mapping:
        return _mapping(args)
    if isinstance(hint, type):
        if issubclass(hint, enum.Enum):
            return _enum(hint)
        if hint in _PARSERS:
            return _parsed(hint, _PARSERS[hint])
        if dataclasses.is_dataclass(hint):
            return _dataclass_decoder(hint)
        model = _model_class()
        if model is not None and issubclass(hint, model):
            return _model(hint)
        if hint in _JSON_SCALARS:
            return _scalar(hint)
    return _any


def _literal(args: tuple[Any, ...]) -> Decoder:
    def decode(value: Any, path: str) -> Any:
        if value in args:
            return value
        raise _fail(path, f"one of {args!r}", value)

    return decode


def _dataclass_decoder(cls: type) -> Decoder:
    def decode(value: Any, path: str) -> Any:
        if not isinstance(value, dict):
            raise _fail(path, f"an object for {cls.__name__}", value)
        return decode_fields(cls, value, path)

    return decode


@dataclass(frozen=True, slots=True)
class _Plan:
    """How to decode one class's fields: a decoder and the expected type's name for each, and the required."""

    decoders: dict[str, Decoder]
    expected: dict[str, str]
    required: frozenset[str]


_PLANS: dict[type, _Plan] = {}


def _plan(cls: type) -> _Plan:
    cached = _PLANS.get(cls)
    if cached is None:
        hints = typing.get_type_hints(cls)
        fields = [f for f in dataclasses.fields(cls) if f.init]
        required = frozenset(
            f.name for f in fields
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        )
        cached = _Plan(
            {f.name: decoder_for(hints.get(f.name, Any)) for f in fields},
            {f.name: _label(hints.get(f.name, Any)) for f in fields},
            required,
        )
        _PLANS[cls] = cached
    return cached


def _label(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


def _field(plan: _Plan, key: str, value: Any, path: str) -> Any:
    try:
        return plan.decoders[key](value, path)
    except PayloadDecodeError:
        raise
    except Exception as exc:  # a decoder's own fault, or a nested class's: still this field's
        raise PayloadDecodeError(f"{path}: expected {plan.expected[key]}, and the stored value does not "
                                 f"decode as one ({type(exc).__name__})") from None


def decode_fields(cls: type, data: Mapping[str, Any], path: str) -> Any:
    """Build ``cls`` from ``data``: every field decoded by its annotation, extras refused."""
    plan = _PLANS.get(cls) or _plan(cls)
    keys = data.keys()
    # each check a comparison of key views, which builds no set (once per job): the sets only for the error
    if not keys <= plan.decoders.keys():  # their names came with the message: counted, never listed
        extra = len(keys - plan.decoders.keys())
        raise PayloadDecodeError(f"{path}: {extra} unknown field(s), which {cls.__name__} does not declare "
                                 "(names not shown: they came with the message); was the job class changed?")
    if not keys >= plan.required:
        raise PayloadDecodeError(f"{path}: missing field(s) {sorted(plan.required - keys)}")
    values = {k: _field(plan, k, v, f"{path}.{k}") for k, v in data.items()} if data else None
    try:
        return cls(**values) if values is not None else cls()  # a job without arguments: no comprehension
    except Exception as exc:  # a __post_init__ that refuses the values: never quote its message
        raise PayloadDecodeError(f"{path}: the stored fields do not make a {cls.__name__} "
                                 f"({type(exc).__name__} from its constructor)") from None


def decode(cls: type, data: Mapping[str, Any]) -> Any:
    """A job instance from its stored payload; `PayloadDecodeError` names the bad field, whatever went wrong."""
    if type(data) is not dict and not isinstance(data, Mapping):  # a dict, nearly always: no ABC check
        raise _fail(cls.__name__, "an object", data)
    try:
        return decode_fields(cls, data, cls.__name__)
    except PayloadDecodeError:
        raise
    except Exception as exc:  # the class's annotations themselves (a name get_type_hints cannot resolve)
        raise PayloadDecodeError(f"{cls.__name__}: its payload could not be decoded ({type(exc).__name__})") from None
