"""What the database driver's tables can hold, and how an outcome is made to fit them.

A limit the driver does not check itself is found by the server, at the worst
moment: a name one character too long for the failed store's column used to
make ``fail`` impossible to store, and the worker retried that batch forever.
So at push a body over the size limit is refused, naming the limit (a name
too long for its column is refused by the server, as `StoreRefused`); on the
way to the failed store, which must take *every* outcome, a value is cut to
fit its column, with a marker, and the full text stays in the stored body.
"""

from __future__ import annotations

from jobbridge.drivers.database.engine import MYSQL, POSTGRESQL
from jobbridge.envelope import Envelope
from jobbridge.errors import PayloadTooLarge

#: the characters a queue, job name or unique key can have (VARCHAR(191): an indexable utf8mb4 key on MariaDB)
NAME_WIDTH = 191
#: the largest attempt count the 32-bit ``attempts`` column holds
ATTEMPTS_CEILING = 2**31 - 1
#: the characters of an error text the failed store keeps (the start and the end of a longer one)
ERROR_CHARS = 65_536
#: what stands in for the characters cut out of a value too long for its column
CUT = "…"

#: the largest envelope (encoded, in bytes) each dialect is given, checked at dispatch.
#: MariaDB takes a statement in one packet of at most ``max_allowed_packet`` (16 MiB by
#: default), and a body's bytes travel in it as two characters each: 6 MiB leaves room for
#: the row's other columns and a failed row's error text (`packet_limit` lowers it on a server
#: with a smaller packet). PostgreSQL's and SQLite's own limits are near 1 GB; a job of more
#: than 64 MiB belongs in a file or an object store, with its path in the payload.
MAX_MESSAGE_BYTES = {MYSQL: 6 * 1024 * 1024, POSTGRESQL: 64 * 1024 * 1024}
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: what a MariaDB statement carries beside a body: its SQL, the other columns, an error text
PACKET_MARGIN = 1024 * 1024


def max_message_bytes(dialect: str) -> int:
    return MAX_MESSAGE_BYTES.get(dialect, DEFAULT_MAX_MESSAGE_BYTES)


def encoded(env: Envelope, limit: int, dialect: str) -> bytes:
    """The stored form of ``env``; `PayloadTooLarge` (at dispatch, then) if it is over ``limit`` bytes."""
    body = env.encode()
    if len(body) > limit:
        raise PayloadTooLarge(
            f"job {env.id} ({env.name:.100}) is {len(body)} bytes encoded, and the {dialect} database driver "
            f"takes at most {limit} (see docs/databases.md): keep large data elsewhere (a file, object "
            "storage) and pass its key in the payload")
    return body


def packet_limit(max_allowed_packet: int) -> int:
    """The largest body a MariaDB server with this ``max_allowed_packet`` takes in one statement."""
    return min(MAX_MESSAGE_BYTES[MYSQL], max(0, (max_allowed_packet - PACKET_MARGIN) // 2))


def storable(value: str) -> str:
    """``value`` as every dialect can store it: PostgreSQL's text refuses NUL characters."""
    return value.replace("\x00", "\ufffd")


def fitted(value: object, width: int = NAME_WIDTH) -> str:
    """A name cut to ``width`` characters (the cut marked), so that the failed store can always take it."""
    text = storable(value if isinstance(value, str) else str(value))
    return text if len(text) <= width else text[:width - len(CUT)] + CUT


def fitted_error(error: object) -> str:
    """An error text of any length, kept to its first and last characters where it is too long."""
    text = storable(error if isinstance(error, str) else str(error))
    if len(text) <= ERROR_CHARS:
        return text
    half = (ERROR_CHARS - 3 * len(CUT)) // 2
    return f"{text[:half]}{CUT * 3}{text[-half:]}"


def attempts_problem(attempts: object) -> str | None:
    """Why a claimed row's attempt count cannot be trusted, or None.

    A claim never adds to a count at or past `ATTEMPTS_CEILING` or below zero
    (it would overflow the column, and fail the claim of the whole queue), so
    such a row comes out of the claim as it went in, and is failed as malformed.
    """
    if not isinstance(attempts, int) or isinstance(attempts, bool):
        return f"the stored attempt count is not an integer ({type(attempts).__name__})"
    if not 1 <= attempts < ATTEMPTS_CEILING:
        return f"the stored attempt count is out of range ({attempts}): no dispatch stores that"
    return None
