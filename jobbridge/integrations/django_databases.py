"""``django://ALIAS``: the database driver and the result store on a database of Django's ``DATABASES``.

``JOBBRIDGE_DATABASE_URL=django://default`` (or a Celery app's
``broker_url`` / ``result_backend``) names an alias; its ``ENGINE``, ``NAME``,
``USER``, ``PASSWORD``, ``HOST``, ``PORT`` and connection ``OPTIONS`` are read
from Django's settings each time a driver or result store opens it
(`database_url`, registered in `jobbridge.drivers.database.aliases`). So the
credentials live in one place, and under Django's test runner the test
database (whose ``NAME`` the runner changed) is the one used.

jobbridge still opens connections of its own, through its own pool, beside
Django's: a worker's reserve loop and heartbeats must never wait on, or share
a transaction with, a job's ORM work. ``transaction=`` is where the two meet
(`jobbridge.integrations.django_transactions`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.utils.connection import ConnectionDoesNotExist
from sqlalchemy.engine import URL

from jobbridge.errors import ConfigurationError
from jobbridge.redaction import quoted

__all__ = ["database_url", "settings_of"]

#: connection OPTIONS that are Django's own (not libpq's): never passed to the server
_DJANGO_ONLY = frozenset({"isolation_level", "server_side_binding", "assume_role", "pool", "cursor_factory",
                          "context", "transaction_mode", "init_command"})
#: the MySQL client options that carry over (the rest, such as ssl, take objects a URL cannot hold)
_MYSQL_OPTIONS = ("charset", "unix_socket", "read_default_file", "read_default_group", "connect_timeout")


def database_url(url: str) -> str:
    """The database URL of the alias that ``django://ALIAS`` names (with its password: never shown)."""
    alias = url.split("://", 1)[1].strip("/") or "default"
    conn = _connection(alias, url)
    build = _BUILDERS.get(conn.vendor)
    if build is None:
        raise ConfigurationError(
            f"{quoted(url)} is a {conn.vendor} database; the database driver speaks SQLite, PostgreSQL and "
            "MariaDB/MySQL: point jobbridge at one of those (or at redis)")
    if conn.vendor == "sqlite" and conn.is_in_memory_db():
        raise ConfigurationError(
            f"{quoted(url)} is an in-memory SQLite database (as Django's test runner makes by default), "
            f"which no other connection can see: give DATABASES[{alias!r}]['TEST'] a 'NAME' of a file, or "
            "run the tasks eagerly in tests (CELERY_TASK_ALWAYS_EAGER = True)")
    return build(conn.settings_dict).render_as_string(hide_password=False)


def settings_of(alias: str) -> Mapping[str, Any]:
    """The alias's connection settings as Django uses them now (a test run's NAME included)."""
    return _connection(alias, f"django://{alias}").settings_dict  # type: ignore[no-any-return]


def _connection(alias: str, url: str) -> Any:
    aliases = _databases(url)
    try:
        return connections[alias]
    except ConnectionDoesNotExist:
        raise ConfigurationError(
            f"{quoted(url)} names the alias {alias!r}, which Django's DATABASES setting does not have "
            f"(it has {', '.join(map(repr, aliases))})") from None


def _databases(url: str) -> Mapping[str, Any]:
    """Django's DATABASES, its settings module found as ``-A`` finds a module (the working directory first)."""
    try:
        return _read_databases(url)
    except ModuleNotFoundError:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
    try:
        return _read_databases(url)
    except ModuleNotFoundError as exc:
        raise ConfigurationError(
            f"{quoted(url)} names a database of Django's DATABASES setting, but the settings module "
            f"{os.environ.get('DJANGO_SETTINGS_MODULE')!r} cannot be imported here ({exc}): run the command "
            "from the project's folder, or put the project on PYTHONPATH") from None


def _read_databases(url: str) -> Mapping[str, Any]:
    try:
        found: Mapping[str, Any] = settings.DATABASES
    except ImproperlyConfigured:
        raise ConfigurationError(
            f"{quoted(url)} names a database of Django's DATABASES setting, but no Django settings are "
            "configured here: set DJANGO_SETTINGS_MODULE (a project's celery.py sets it when the command "
            "is given -A <project>)") from None
    return found


def _postgresql(found: Mapping[str, Any]) -> URL:
    query = _scalars(found, lambda key: key not in _DJANGO_ONLY)
    host = found.get("HOST") or None
    if host and str(host).startswith("/"):  # a socket directory
        query["host"], host = str(host), None
    return _url("postgresql", found, host, query)


def _mysql(found: Mapping[str, Any]) -> URL:
    query = _scalars(found, lambda key: key in _MYSQL_OPTIONS)
    host = found.get("HOST") or None
    if host and str(host).startswith("/"):  # a socket file
        query["unix_socket"], host = str(host), None
    return _url("mysql", found, host, query)


def _sqlite(found: Mapping[str, Any]) -> URL:
    return URL.create("sqlite", database=str(found["NAME"]))


def _url(backend: str, found: Mapping[str, Any], host: str | None, query: dict[str, str]) -> URL:
    port = found.get("PORT")
    return URL.create(backend, username=found.get("USER") or None, password=found.get("PASSWORD") or None,
                      host=host, port=int(port) if port else None, database=found.get("NAME") or None,
                      query=query)


def _scalars(found: Mapping[str, Any], keep: Callable[[str], bool]) -> dict[str, str]:
    options = found.get("OPTIONS") or {}
    return {str(key): str(value) for key, value in options.items()
            if keep(str(key)) and isinstance(value, str | int | float) and not isinstance(value, bool)}


_BUILDERS: dict[str, Callable[[Mapping[str, Any]], URL]] = {
    "postgresql": _postgresql, "mysql": _mysql, "sqlite": _sqlite,
}
