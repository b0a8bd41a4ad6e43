"""Whether the database driver's claims can read a result store's cancellations (`ReadsCancellations`).

They can when the store is a `DatabaseResultStore` on the same database as the
driver's, its ``jobbridge_cancelled`` table already there: each claim then reads
every claimed row's cancellation by the store's own clock, in the claim's own
statement (`hot_sql`). Anything else (a store elsewhere, a store that wraps
one, a table not yet created) is not read, and the worker keeps its own lookup
per batch, which is always right. Two URLs that cannot be told to name one
database are taken to name two: reading the wrong table would run a cancelled job.
"""

from __future__ import annotations

import logging
import os

from sqlalchemy import URL, Engine, inspect

from jobbridge.clock import Clock
from jobbridge.drivers.database.engine import MYSQL, SQLITE
from jobbridge.drivers.database.failures import translated
from jobbridge.drivers.database.hot_sql import CANCELLED_TABLE
from jobbridge.errors import DriverError

log = logging.getLogger("jobbridge.drivers.database")

_DEFAULT_PORTS = {MYSQL: 3306}
_POSTGRES_PORT = 5432


def database_of(url: URL) -> tuple[object, ...]:
    """What names one database: a SQLite file's real path; else the server, the user, the database, its search_path.

    The user and PostgreSQL's ``options`` are kept because either can change which
    schema an unqualified table name resolves to.
    """
    backend = url.get_backend_name()
    if backend == SQLITE:
        return (backend, os.path.realpath(url.database or ""))
    port = url.port or _DEFAULT_PORTS.get(backend, _POSTGRES_PORT)
    return (backend, url.username, (url.host or "").lower(), url.query.get("host"), port, url.database,
            url.query.get("options"))


def cancellations_clock(engine: Engine, url: URL, store: object) -> Clock | None:
    """The clock ``store``'s cancellations are judged by, if the claims on ``engine`` (at ``url``) can read them."""
    # imported here: the result store is built on this package's engine
    from jobbridge.results.database import DatabaseResultStore

    if not isinstance(store, DatabaseResultStore) or type(store).cancelled is not DatabaseResultStore.cancelled:
        return None  # a subclass may read its cancellations otherwise
    if database_of(store.url) != database_of(url):
        return None
    try:
        with translated("look for the result store's cancellations table"), engine.connect() as conn:
            present = inspect(conn).has_table(CANCELLED_TABLE)
    except DriverError as error:
        log.debug("the claims do not read cancellations: %s", error)
        return None
    return store.clock if present else None
