"""The wire message (`Envelope`) and a driver's claim on one (`Reservation`).

The envelope is what crosses the process boundary: a stable job name, a JSON
payload and the options dispatch fixed. It is separate from the user's job
class so that a worker can read, count and fail a message whose class it
cannot load.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import orjson
import uuid_utils

from jobbridge import limits
from jobbridge.errors import PayloadDecodeError, PayloadEncodeError
from jobbridge.limits import MAX_ATTEMPTS

FORMAT_VERSION = 1


def new_id() -> str:
    """A UUIDv7 string: unique, and sortable by creation time."""
    return str(uuid_utils.uuid7())


@dataclass(frozen=True, slots=True)
class Envelope:
    """One queued job as every driver stores it.

    ``attempts`` counts attempts *started*: a driver increments it when it
    reserves the envelope, so a reservation whose worker died still counts.
    """

    id: str
    name: str
    queue: str
    payload: Mapping[str, Any]
    tries: int
    timeout: float
    available_at: float
    created_at: float
    attempts: int = 0
    unique_key: str | None = None
    unique_for: float | None = None
    headers: Mapping[str, Any] = field(default_factory=dict)
    #: not started by then (epoch seconds, the dispatcher's clock): acknowledged unrun, reported expired
    expires_at: float | None = None
    #: `encode`'s bytes, once computed (an envelope is immutable, payload and headers included)
    _body: bytes | None = field(default=None, init=False, repr=False, compare=False)
    #: whether `checked` found this envelope within every range already (so it need not look again)
    _in_range: bool = field(default=False, init=False, repr=False, compare=False)

    @classmethod
    def new(cls, name: str, queue: str, payload: Mapping[str, Any], *, tries: int, timeout: float, now: float,
            available_at: float | None = None, id: str | None = None, unique_key: str | None = None,
            unique_for: float | None = None, headers: Mapping[str, Any] | None = None,
            expires_at: float | None = None) -> Envelope:
        """A message about to be pushed: a new UUIDv7 id unless ``id`` is given, created ``now``,
        available from ``available_at`` (``now`` when not given), no attempt started yet.

        Dispatch (`JobBridge.envelope`) and the facade's publishing and re-sent retries
        all build their messages here, so that a field every new message needs is set
        in one place, the same way for all of them.
        """
        if cls is not Envelope:  # a subclass may have fields of its own: its own __init__
            return cls(id=id or new_id(), name=name, queue=queue, payload=payload, tries=tries, timeout=timeout,
                       available_at=now if available_at is None else available_at, created_at=now,
                       unique_key=unique_key, unique_for=unique_for, headers=dict(headers or {}),
                       expires_at=expires_at)
        return _built(id or new_id(), name, queue, payload, tries, timeout,
                      now if available_at is None else available_at, now, 0, unique_key, unique_for,
                      dict(headers) if headers else {}, expires_at)

    def encode(self) -> bytes:
        """The stored form: compact JSON, versioned; `PayloadEncodeError` if a value cannot be JSON.

        Computed once per envelope: a dispatch measures the size of what it stores
        (`JobBridge.push`) and the driver then stores those same bytes.
        """
        body = self._body
        if body is None:
            body = self._encode()
            object.__setattr__(self, "_body", body)
        return body

    def _encode(self) -> bytes:
        # expires_at is written only when set, so a job without one is stored as before
        extra = {} if self.expires_at is None else {"expires_at": self.expires_at}
        try:
            return orjson.dumps(
                {
                    "v": FORMAT_VERSION,
                    "id": self.id,
                    "name": self.name,
                    "queue": self.queue,
                    "payload": self.payload,
                    "tries": self.tries,
                    "timeout": self.timeout,
                    "available_at": self.available_at,
                    "created_at": self.created_at,
                    "attempts": self.attempts,
                    "unique_key": self.unique_key,
                    "unique_for": self.unique_for,
                    "headers": self.headers,
                    **extra,
                }
            )
        except TypeError as exc:  # orjson's message names a type or a limit, never a value
            raise PayloadEncodeError(f"job {self.name!r:.100} ({self.id!r:.60}) cannot be stored as JSON: "
                                     f"{exc}; keep payload and header values to JSON types") from None

    @classmethod
    def decode(cls, body: object, attempts: int | None = None) -> Envelope:
        """Read a stored envelope; anything malformed is a `PayloadDecodeError` naming the field, never its value.

        ``attempts`` overrides the stored count, for drivers that keep it beside the body.
        Every field is held to the ranges of `jobbridge.limits` (a timeout above
        `MAX_TIMEOUT` is clamped to it); drivers call `reservation_from_body`, which never raises.
        """
        return cls._decoded(body, attempts, None)

    @classmethod
    def _decoded(cls, body: object, attempts: int | None, added: int | None) -> Envelope:
        """`decode`; with ``added``, that many attempts more (the attempt a reservation starts, at least 1).

        A worker decodes every job it runs: a body whose every field is already what
        `limits.envelope_fields` would make of it (what dispatch stores) is taken as it is
        (`limits.fields_in_range`), and only any other goes through the checks that name what is wrong.
        """
        data = _parse(body)
        version = data.get("v")
        if isinstance(version, bool) or version != FORMAT_VERSION:
            raise PayloadDecodeError(f"stored message: unknown envelope format (this release reads "
                                     f"format {FORMAT_VERSION}, in the field 'v')")
        env = _as_stored(cls, data)
        try:
            if env is None:
                env = cls(**limits.envelope_fields(data))
            count = env.attempts if attempts is None else attempts
            if (type(count) is not int or type(added) is not int or count < 0 or added < 0
                    or not 1 <= count + added <= MAX_ATTEMPTS):  # what a reserve hands out passes as it is
                count = _counted(env.attempts, attempts, added)
            else:
                count += added
        except limits.FieldRefused as exc:
            raise PayloadDecodeError(f"stored message: {exc}") from None
        if count != env.attempts:
            object.__setattr__(env, "attempts", count)  # made here, seen by no one yet
        return env

    def checked(self) -> Envelope:
        """This envelope held to the ranges a stored one must meet (what dispatch stores).

        A timeout above `MAX_TIMEOUT` is clamped to it; any other field out of
        range is a `ValueError` naming the field, so that nothing dispatched is
        ever refused as undecodable by the worker that reads it. An envelope whose
        every field already has the type and range `limits` would give it (what
        dispatch builds) is its own checked form (`limits.fields_in_range`), so it is not copied.
        """
        if self._in_range or limits.fields_in_range(self):
            object.__setattr__(self, "_in_range", True)
            return self
        try:
            fields = limits.envelope_fields({f.name: getattr(self, f.name) for f in dataclasses.fields(self)})
        except limits.FieldRefused as exc:
            raise ValueError(f"job {self.name!r:.100} cannot be dispatched: {exc.field} must be {exc.expected} "
                             "(see the ranges in docs/dispatching.md)") from None
        checked = Envelope(**fields)
        object.__setattr__(checked, "_in_range", True)
        return checked

    def replace(self, **changes: Any) -> Envelope:
        """A copy with some fields changed (envelopes are immutable)."""
        return dataclasses.replace(self, **changes)


def _counted(stored: int, attempts: int | None, added: int | None) -> int:
    """The attempt count a decode hands out, each part held to its range (`limits.FieldRefused` if out)."""
    count = stored if attempts is None else limits.count("attempts (the store's count)", attempts, 0, MAX_ATTEMPTS)
    if added is not None:
        count = limits.count("attempts (the store's count)",
                             count + limits.count("attempts added", added, 0, MAX_ATTEMPTS), 1, MAX_ATTEMPTS)
    return count


def _as_stored(cls: type[Envelope], data: dict[str, Any]) -> Envelope | None:
    """The envelope of parsed JSON taken as it is, when `limits.fields_in_range` finds nothing to change; else None.

    Built through the slot descriptors (`_built`): the worker builds one per job.
    """
    if cls is not Envelope:  # a subclass may have fields of its own: its own __init__
        return _as_stored_by_init(cls, data)
    get = cast("Callable[[str], Any]", data.get)  # a missing field is None, which `limits.fields_in_range` refuses
    headers = get("headers")
    env = _built(get("id"), get("name"), get("queue"), get("payload"), get("tries"), get("timeout"),
                 get("available_at"), get("created_at"), data.get("attempts", 0), get("unique_key"),
                 get("unique_for"), {} if headers is None else headers, get("expires_at"))
    return env if limits.fields_in_range(env) else None


def _built(id: Any, name: Any, queue: Any, payload: Any, tries: Any, timeout: Any, available_at: Any,
           created_at: Any, attempts: Any, unique_key: Any, unique_for: Any, headers: Any,
           expires_at: Any) -> Envelope:
    """``Envelope(...)`` through its slot descriptors (`_SLOTS`), as the frozen ``__init__`` would end up setting
    them: dispatch builds one per job and the worker one per reserved job, and that ``__init__`` pays an
    ``object.__setattr__`` call per field, two thirds of a decode's time (docs/benchmarks.md). Unchecked: the
    callers hold the fields to their ranges (`Envelope.checked`, `limits.fields_in_range`)."""
    env: Envelope = _new(Envelope)
    _id(env, id)
    _name(env, name)
    _queue(env, queue)
    _payload(env, payload)
    _tries(env, tries)
    _timeout(env, timeout)
    _available_at(env, available_at)
    _created_at(env, created_at)
    _attempts(env, attempts)
    _unique_key(env, unique_key)
    _unique_for(env, unique_for)
    _headers(env, headers)
    _expires_at(env, expires_at)
    _body(env, None)
    _in_range(env, False)
    return env


def _as_stored_by_init(cls: type[Envelope], data: dict[str, Any]) -> Envelope | None:
    get = cast("Callable[[str], Any]", data.get)
    headers = get("headers")
    env = cls(id=get("id"), name=get("name"), queue=get("queue"), payload=get("payload"), tries=get("tries"),
              timeout=get("timeout"), available_at=get("available_at"), created_at=get("created_at"),
              attempts=data.get("attempts", 0), unique_key=get("unique_key"), unique_for=get("unique_for"),
              headers={} if headers is None else headers, expires_at=get("expires_at"))
    return env if limits.fields_in_range(env) else None


@dataclass(frozen=True, slots=True)
class Reservation:
    """A driver's claim on one envelope until ``lease_until`` (clock seconds).

    ``receipt`` is the driver's own handle (row id and token, stream entry id,
    SQS receipt handle, partition and offset); nobody else looks inside it.
    When the stored body could not be decoded, ``decode_error`` says why,
    ``envelope`` is a stand-in carrying the id and queue, and ``body`` keeps
    the raw bytes so that the failed store holds exactly what was stored.
    """

    envelope: Envelope
    receipt: Any
    lease_until: float
    body: bytes = b""
    decode_error: str | None = None
    #: the result store had cancelled the job when the driver reserved it (`drivers.base.ReadsCancellations`)
    cancelled: bool = False

    @property
    def id(self) -> str:
        return self.envelope.id

    @property
    def attempt(self) -> int:
        return self.envelope.attempts

    def stored_body(self) -> bytes:
        """What a failed-store row keeps: the raw body when undecodable, else the envelope."""
        return self.body if self.decode_error is not None else self.envelope.encode()


# The slot descriptors the frozen classes' ``__init__`` ends in, for the two built once per dispatched or reserved
# job (`_built`, `_reserved`). tests/unit/test_envelope_slots.py checks that the builders set every slot.
_SLOTS = {name: Envelope.__dict__[name].__set__ for name in Envelope.__slots__}
(_id, _name, _queue, _payload, _tries, _timeout, _available_at, _created_at, _attempts, _unique_key, _unique_for,
 _headers, _expires_at, _body, _in_range) = (_SLOTS[name] for name in (
    "id", "name", "queue", "payload", "tries", "timeout", "available_at", "created_at", "attempts",
    "unique_key", "unique_for", "headers", "expires_at", "_body", "_in_range"))
_HELD = {name: Reservation.__dict__[name].__set__ for name in Reservation.__slots__}
_envelope, _receipt, _lease_until, _stored, _decode_error, _cancelled = (_HELD[name] for name in (
    "envelope", "receipt", "lease_until", "body", "decode_error", "cancelled"))
_new = object.__new__


def _reserved(envelope: Envelope, receipt: Any, lease_until: float) -> Reservation:
    """``Reservation(envelope, receipt, lease_until)`` through its slots (see `_SLOTS`)."""
    res: Reservation = _new(Reservation)
    _envelope(res, envelope)
    _receipt(res, receipt)
    _lease_until(res, lease_until)
    _stored(res, b"")
    _decode_error(res, None)
    _cancelled(res, False)
    return res


def undecodable(*, id: str, queue: str, attempts: int, now: float) -> Envelope:
    """The stand-in envelope for a body that could not be decoded; its attempts kept within range."""
    return Envelope(
        id=id,
        name="<undecodable>",
        queue=queue,
        payload={},
        tries=1,
        timeout=1.0,  # never run; a valid value, so that a stand-in stored and read again decodes
        available_at=now,
        created_at=now,
        attempts=min(max(attempts, 1), MAX_ATTEMPTS),
    )


def reservation_from_body(
    body: object, *, receipt: Any, lease_until: float, now: float, id_hint: object, queue_hint: object,
    attempts: int | None = None, attempts_added: int = 0,
) -> Reservation:
    """The reservation for one claimed stored body: decoded, or a stand-in to be failed; it never raises.

    Every driver builds its reservations here, so that no body (not JSON, not
    UTF-8, a ``str`` or ``memoryview`` or ``int`` from the client, a field out
    of range) can crash or stall the worker that claimed it: what does not
    decode is handed out with ``decode_error`` set and is failed at once.
    ``attempts`` is the count the store keeps beside the body (a column, a
    stream field), which replaces the body's own; ``attempts_added`` is added
    to whichever is used (a receive count, the one reservation being made).
    The attempt handed out must lie from 1 to `MAX_ATTEMPTS`. ``id_hint`` and
    ``queue_hint`` (the store's own id and queue for the body) name the stand-in.
    """
    try:
        return _reserved(Envelope._decoded(body, attempts, attempts_added), receipt, lease_until)
    except Exception as exc:  # anything at all: the body is failed with the reason, never raised
        stand_in = undecodable(id=_hint(id_hint) or new_id(), queue=_hint(queue_hint) or "<unknown>",
                               attempts=_int_or_zero(attempts) + _int_or_zero(attempts_added), now=now)
        return Reservation(stand_in, receipt, lease_until, body=raw_bytes(body), decode_error=_reason(exc))


def _parse(body: object) -> dict[str, Any]:
    if isinstance(body, (bytearray, memoryview)):
        body = bytes(body)
    if not isinstance(body, (bytes, str)):
        raise PayloadDecodeError(f"stored message is of type {type(body).__name__}, not bytes or text")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:  # its msg says what is wrong and where, never the text
        raise PayloadDecodeError(f"stored message is not JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(data, dict):
        raise PayloadDecodeError(f"stored message is not a JSON object (it is a JSON {type(data).__name__})")
    return data


def _reason(exc: Exception) -> str:
    """Why a body did not decode: our own messages name the field; another's might quote the body."""
    if isinstance(exc, PayloadDecodeError):
        return str(exc)
    if isinstance(exc, limits.FieldRefused):
        return f"stored message: {exc}"
    return f"stored message could not be read ({type(exc).__name__})"


def _int_or_zero(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _hint(value: object) -> str | None:
    """A store's id or queue for a stand-in, when it is one a failed store can hold."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return None
    if not isinstance(value, str):
        return None
    try:
        value.encode("utf-8")  # a lone surrogate no store can hold
        return limits.name("hint", value)
    except (limits.FieldRefused, UnicodeEncodeError):
        return None


def raw_bytes(body: object) -> bytes:
    """A stored body as bytes for the failed store, as close to what was stored as it can be."""
    if isinstance(body, bytes):
        return body
    if isinstance(body, (bytearray, memoryview)):
        return bytes(body)
    if body is None:
        return b""
    if isinstance(body, str):
        for errors in ("surrogateescape", "surrogatepass"):
            try:
                return body.encode("utf-8", errors)
            except UnicodeError:
                continue
    try:
        return repr(body).encode("utf-8", "backslashreplace")
    except Exception:  # a repr that raises: keep nothing rather than fail the failing
        return b""


def reservation_as_stored(body: object, receipt: Any, lease_until: float, attempt: int) -> Reservation | None:
    """The reservation `reservation_from_body` makes of a body exactly as dispatch stores it, starting attempt
    ``attempt`` (the store's count with this reservation's), in fewer steps; None for any other body, which
    the caller hands to `reservation_from_body`.

    The worker's loop decodes every job it reserves, and most bodies are what dispatch wrote:
    JSON of format `FORMAT_VERSION` whose every field `_as_stored` takes as it is, and an attempt
    from 1 to `MAX_ATTEMPTS`. Anything else (not bytes, not JSON, another format, a field out
    of range or to convert) is None here, so `reservation_from_body` makes of it what it always has.
    """
    if type(body) is not bytes or type(attempt) is not int or not 1 <= attempt <= MAX_ATTEMPTS:
        return None
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if type(data) is not dict:
        return None
    version = data.get("v")
    if isinstance(version, bool) or version != FORMAT_VERSION:
        return None
    env = _as_stored(Envelope, data)
    if env is None:
        return None
    _attempts(env, attempt)  # made here, seen by no one yet
    return _reserved(env, receipt, lease_until)
