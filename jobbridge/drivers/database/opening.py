"""What opening a database store checks before it is used: the client library, and that the store exists.

The client: SQLAlchemy imports psycopg or PyMySQL when its engine first
connects, so a missing one surfaced as a long traceback from deep inside
SQLAlchemy. `require_client` imports it first and names the extra to install,
in the one line `jobbridge.drivers.load` gives for the other drivers' clients.

The store: building a SQLite engine creates the file's directory, connecting
creates the file, and `DatabaseDriver.migrate` creates the tables. Opening
with ``Resources.create`` false (the commands that read or repair a store:
``jobbridge status``, ``failed``, ``retry``, ``flush``, ``purge``) must do none
of that, because a mistyped path, the wrong working directory or a project
whose jobs live elsewhere would otherwise get a new, empty store that answers
"no failed jobs" about the wrong place. `require_file` (before the engine is
built) and `require_tables` (after) refuse instead, naming the store and
``jobbridge migrate``.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.engine import URL

from jobbridge.drivers.database import migrations
from jobbridge.drivers.database.engine import SQLITE, describe
from jobbridge.drivers.database.failures import translated
from jobbridge.errors import ConfigurationError

#: the DBAPI modules jobbridge's extras install, by module name
EXTRAS = {"psycopg": "postgres", "pymysql": "mysql"}


def require_client(url: URL) -> None:
    """Import the URL's DBAPI module now; a missing one is a `ConfigurationError` naming the extra."""
    try:
        url.get_dialect().import_dbapi()
    except ImportError as exc:
        module = exc.name or url.get_driver_name()
        extra = EXTRAS.get(module)
        fix = f"pip install 'jobbridge[{extra}]'" if extra else f"install the {module!r} package"
        detail = "" if isinstance(exc, ModuleNotFoundError) else f" ({str(exc).splitlines()[0][:200]})"
        raise ConfigurationError(f"the database driver needs {module!r} for {describe(url)}{detail}: {fix}") \
            from exc


def missing(url: URL, why: str) -> ConfigurationError:
    """The error for a store that is not there: which one, why, and what creates it."""
    return ConfigurationError(
        f"there is no jobbridge store at {describe(url)}: {why}. This command only reads an existing store "
        "and never creates one; run `jobbridge migrate` to create it (a worker or a dispatch also does), or, "
        "if your jobs are stored elsewhere, point the command at that store (-A, --connection or the url)")


def require_file(url: URL) -> None:
    """For SQLite, refuse a file that does not exist, before anything creates it or its directory."""
    if url.get_backend_name() == SQLITE and not Path(url.database or "").is_file():
        raise missing(url, "the file does not exist")


def require_tables(engine: Engine, url: URL) -> None:
    """Refuse a database whose jobbridge tables were never created (no schema version recorded)."""
    with translated("read the jobbridge schema version"):
        version = migrations.recorded_version(engine)
    if version is None:
        raise missing(url, "the database has no jobbridge tables")
