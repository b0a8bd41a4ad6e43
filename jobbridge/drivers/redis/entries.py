"""Stream entries to reservations, and envelopes to script arguments.

An entry carries three fields: ``id`` (the job id), ``body`` (the envelope as
pushed) and ``attempts`` (attempts started before this entry). The body is
never rewritten while the job moves between stream, delayed set and failed
store; ``attempts`` is the count that travels, and a reservation's envelope is
the body with ``attempts`` one higher.

Anything can write to a stream, so every claimed entry is judged before it can
become a job: exactly those three fields, each once; an ``id`` of UTF-8 text
that matches the body's; an ``attempts`` that is a count; a body that decodes
to an envelope (`reservation_from_body`). Any other entry becomes a
stand-in that the worker fails at once, with a reason naming what was wrong
(never a stored value). Nothing an entry holds can raise out of here: one
entry that cannot be read must not take the worker, or its batch, down with it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobbridge import limits
from jobbridge.envelope import Envelope, Reservation, reservation_as_stored, reservation_from_body, undecodable
from jobbridge.errors import PayloadEncodeError, StoreRefused

#: the largest encoded envelope a push takes. Far below Redis's own 512 MB: every move of a job
#: (push, reserve, release, reclaim, fail) copies its body inside a server that runs one command
#: at a time, and every other client waits while it does; docs/redis.md says more
MAX_MESSAGE_BYTES = 8 * 1024 * 1024
#: the most digits an ``attempts`` field may have (as many as limits.MAX_STORED_ATTEMPTS): the
#: scripts add one to a count of that many digits exactly, and leave anything else as it is
ATTEMPTS_DIGITS = 10
FIELDS = (b"id", b"body", b"attempts")


class Refused(Exception):
    """An entry this driver cannot hand out as a job; the message is the reason stored with it.

    Internal: it never leaves this module (`reservation` turns it into a stand-in).
    """


@dataclass(frozen=True, slots=True)
class Receipt:
    """Which stream entry a reservation holds; the lease member names it in the lease set."""

    queue: str
    entry_id: str

    @property
    def member(self) -> str:
        return f"{self.entry_id} {self.queue}"


_new = object.__new__
_queue, _entry_id = (Receipt.__dict__[name].__set__ for name in Receipt.__slots__)


def _receipt(queue: str, entry_id: str) -> Receipt:
    """``Receipt(queue, entry_id)`` through its slots: one per reserved job, and the frozen ``__init__`` pays an
    ``object.__setattr__`` call per field (as `jobbridge.envelope` builds its own, `_SLOTS`)."""
    receipt: Receipt = _new(Receipt)
    _queue(receipt, queue)
    _entry_id(receipt, entry_id)
    return receipt


# -- push -------------------------------------------------------------------------------------


def encoded(envelopes: Sequence[Envelope]) -> list[tuple[Envelope, bytes]]:
    """Each envelope with its stored form; `StoreRefused` for one that cannot be stored at all."""
    out: list[tuple[Envelope, bytes]] = []
    for env in envelopes:
        try:
            body = env.encode()
        except PayloadEncodeError as exc:  # its message names the job and the type, never a value
            raise StoreRefused(str(exc)) from exc
        if len(body) > MAX_MESSAGE_BYTES:
            raise StoreRefused(
                f"job {env.id!s:.60} ({env.name!s:.100}) is {len(body)} bytes encoded, and the redis driver takes "
                f"at most {MAX_MESSAGE_BYTES} (see docs/redis.md): keep large data elsewhere (a file, an "
                "object store) and pass its key in the payload"
            )
        out.append((env, body))
    return out


def chunks(pairs: Sequence[tuple[Envelope, bytes]], count: int, size: int) -> Iterator[list[tuple[Envelope, bytes]]]:
    """Consecutive runs of at most ``count`` envelopes and (past the first) ``size`` body bytes.

    One script call carries a chunk; bounding its bytes keeps it far below what
    Redis accepts in one request (``client-query-buffer-limit``, 1 GB).
    """
    chunk: list[tuple[Envelope, bytes]] = []
    held = 0
    for pair in pairs:
        if chunk and (len(chunk) >= count or held + len(pair[1]) > size):
            yield chunk
            chunk, held = [], 0
        chunk.append(pair)
        held += len(pair[1])
    if chunk:
        yield chunk


def push_args(pairs: Sequence[tuple[Envelope, bytes]], now: float, shift: float) -> list[str | bytes | int]:
    """push.lua's ARGV quads: ready now unless ``available_at`` is still ahead of the store's clock.

    ``available_at`` was read off the dispatching process's clock; ``shift`` places it on the
    store's, so a dispatcher whose clock is off neither delays a job nor makes it due early.
    """
    args: list[str | bytes | int] = []
    for env, body in pairs:
        due = env.available_at + shift
        args += ["" if due <= now else repr(due), env.attempts, env.id, body]
    return args


# -- reserve ----------------------------------------------------------------------------------


def claimed(flat: Sequence[Any], queues: Sequence[str], lease_until: float, now: float,
            cancelled: Sequence[Any] = ()) -> list[Reservation]:
    """reserve.lua's five values per claimed entry, in claim order.

    (queue index, entry id, job id, body, attempts) for an entry of exactly the fields the scripts
    write, in their order; (queue index, entry id, None, its fields, None) for any other.
    ``cancelled``: the places (from 1, in claim order) of the entries whose jobs reserve.lua found
    cancelled in the result store; their reservations are marked ``cancelled``.
    """
    got: list[Reservation] = []
    append, pushed = got.append, _as_pushed
    for i in range(0, len(flat), 5):
        queue, raw_entry, raw_id, body, raw_attempts = queues[int(flat[i]) - 1], *flat[i + 1:i + 5]
        entry_id = raw_entry.decode("ascii", "replace") if type(raw_entry) is bytes else _text(raw_entry)
        res = None if raw_id is None else pushed(queue, entry_id, raw_id, body, raw_attempts, lease_until)
        if res is None:
            pairs = _pairs(body) if raw_id is None else [(b"id", raw_id), (b"body", body), (b"attempts", raw_attempts)]
            res = reservation(queue, entry_id, pairs, lease_until, now)
        append(res)
    for place in cancelled:
        at = int(place) - 1
        if 0 <= at < len(got):
            got[at] = dataclasses.replace(got[at], cancelled=True)
    return got


def _as_pushed(queue: str, entry_id: str, raw_id: Any, body: Any, raw_attempts: Any,
               lease_until: float) -> Reservation | None:
    """The reservation of an entry exactly as the scripts write one (id, body, attempts, which reserve.lua
    found in that order, each within range, the body as dispatch stores it and holding that id); None for
    any other entry, which `reservation` then judges field by field, so that its outcome (a stand-in and
    its reason, or a body converted into range) is what it always was.
    """
    if (type(raw_id) is not bytes or type(body) is not bytes or type(raw_attempts) is not bytes
            or not raw_attempts.isdigit() or len(raw_attempts) > ATTEMPTS_DIGITS):
        return None
    stored = int(raw_attempts)
    if stored > limits.MAX_STORED_ATTEMPTS:
        return None
    try:
        job_id = raw_id.decode()
    except UnicodeDecodeError:
        return None
    res = reservation_as_stored(body, _receipt(queue, entry_id), lease_until, stored + 1)  # this one counts
    # the body's id passed `limits.fields_in_range`, so an ``id`` field equal to it is a name `limits.name` takes
    return res if res is not None and res.envelope.id == job_id else None


def from_fields(
    queue: str, entry_id: str, fields: Mapping[bytes, Any], lease_until: float, now: float
) -> Reservation:
    """The reservation of an entry read by XREADGROUP (its fields as a mapping)."""
    return reservation(queue, entry_id, list(fields.items()) if isinstance(fields, Mapping) else [], lease_until, now)


def reservation(
    queue: str, entry_id: str, pairs: Sequence[tuple[Any, Any]], lease_until: float, now: float
) -> Reservation:
    """The reservation of one claimed entry; an entry that is no job becomes a stand-in to be failed."""
    receipt = Receipt(queue, entry_id)
    found: dict[bytes, bytes] = {}
    try:
        found, problem = _fields(pairs)
        if problem is not None:
            raise Refused(problem)
        job_id, stored = _job_id(found), _attempts(found)
    except Exception as exc:  # whatever an entry holds, it becomes a stand-in, never an exception
        reason = str(exc) if isinstance(exc, Refused) else f"the stream entry could not be read ({type(exc).__name__})"
        return _stand_in(receipt, found, lease_until, now, reason)
    res = reservation_from_body(found[b"body"], receipt=receipt, lease_until=lease_until, now=now, id_hint=job_id,
                                queue_hint=queue, attempts=stored, attempts_added=1)
    if res.decode_error is None and res.envelope.id != job_id:
        return _stand_in(receipt, found, lease_until, now, "the stream entry's 'id' field is not the id in its body")
    return res


def _fields(pairs: Sequence[tuple[Any, Any]]) -> tuple[dict[bytes, bytes], str | None]:
    """The entry's fields, and what is wrong with them unless they are exactly id, body and attempts."""
    found: dict[bytes, bytes] = {}
    foreign = twice = 0
    for name, value in pairs:
        if name not in FIELDS or not isinstance(value, bytes):
            foreign += 1
        elif name in found:
            twice += 1
        else:
            found[name] = value
    missing = [name.decode() for name in FIELDS if name not in found]
    if missing:
        return found, f"the stream entry has no {' or '.join(repr(m) for m in missing)} field"
    if foreign:
        return found, (f"the stream entry has {foreign} field(s) this driver never writes "
                       "(it writes only id, body and attempts)")
    if twice:
        return found, "the stream entry holds one of its fields twice"
    return found, None


def _job_id(found: Mapping[bytes, bytes]) -> str:
    try:
        job_id = found[b"id"].decode()
    except UnicodeDecodeError:
        raise Refused("the stream entry's 'id' field is not UTF-8 text") from None
    try:
        return limits.name("id", job_id)
    except limits.FieldRefused as exc:
        raise Refused(f"the stream entry's 'id' field: expected {exc.expected}") from None


def _attempts(found: Mapping[bytes, bytes]) -> int:
    """The attempts started before this entry: digits only, so no sign, no fraction, no exponent."""
    raw = found[b"attempts"]
    if not raw.isdigit() or len(raw) > ATTEMPTS_DIGITS or int(raw) > limits.MAX_STORED_ATTEMPTS:
        raise Refused(f"the stream entry's 'attempts' field: expected a count from 0 to {limits.MAX_STORED_ATTEMPTS}")
    return int(raw)


def _stand_in(receipt: Receipt, found: Mapping[bytes, bytes], lease_until: float, now: float,
              reason: str) -> Reservation:
    """What the worker fails at once: named by the entry's id field when readable, else by the entry id."""
    try:
        job_id = _job_id(found)
    except Exception:
        job_id = receipt.entry_id
    try:
        attempts = _attempts(found) + 1
    except Exception:
        attempts = 1
    env = undecodable(id=job_id, queue=receipt.queue, attempts=attempts, now=now)
    return Reservation(env, receipt, lease_until, body=found.get(b"body", b""), decode_error=reason)


def _pairs(raw: Any) -> list[tuple[Any, Any]]:
    """A flat [name, value, ...] reply as pairs; anything else as no fields at all."""
    if not isinstance(raw, list):
        return []
    return list(zip(raw[::2], raw[1::2], strict=False))


def _text(value: Any) -> str:
    """An entry id: ASCII digits and a dash, as Redis makes them."""
    return value.decode("ascii", errors="replace") if isinstance(value, bytes) else str(value)
