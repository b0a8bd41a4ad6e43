"""What the commands share: ``-A`` and ``--connection``, loading the app, and opening its store.

Every command that touches a store says which one on stderr, in one line,
before it connects (`open_store`): an operator who reads "no failed jobs"
must be able to see *where* there were none, and a command that waits on an
unresponsive server has already said which server. stderr keeps ``--json``
output on stdout clean for a pipe. Only ``migrate`` and ``enqueue`` open a
store that may be created; the others read or repair one that exists
(`jobbridge.drivers.Resources.create`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import click

from jobbridge.app import JobBridge
from jobbridge.drivers.base import Driver
from jobbridge.loading import load_app
from jobbridge.redaction import mask_url
from jobbridge.settings import ConnectionSettings

F = TypeVar("F", bound=Callable[..., Any])

#: the settings that say where a connection's store is, by driver
_WHERE_KEYS = ("url", "queue_url", "brokers")


def app_options(func: F) -> F:
    """``-A`` and ``--connection``, taken by every command."""
    func = click.option("--connection", metavar="NAME",
                        help="Which declared connection to use (default: the default connection).")(func)
    return click.option(
        "-A", "--app", "app", metavar="MODULE[:ATTR]",
        help="Your app: a JobBridge, a Celery facade app, or a function returning one. The worker and "
             "enqueue need it; the other commands can do without (settings from JOBBRIDGE_* or "
             "jobbridge.toml).")(func)


def yes_option(func: F) -> F:
    """``--yes``: run without asking, for a command that deletes jobs for good."""
    return click.option("-y", "--yes", is_flag=True,
                        help="Do not ask for confirmation (scripts, cron, CI).")(func)


def load_bridge(spec: str | None) -> JobBridge:
    """The app ``-A`` names, else one built from the environment or a jobbridge.toml."""
    return load_app(spec) if spec else JobBridge.from_env()


def where(conn: ConnectionSettings) -> str:
    """Where a connection's store is, from its settings alone (nothing connects), credentials masked."""
    for key in _WHERE_KEYS:
        value = conn.options.get(key)
        if value:
            return mask_url(",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value))
    return f"{conn.driver}://"


def announce(bridge: JobBridge, connection: str | None) -> str:
    """Say on stderr which store the command uses, before anything connects; the connection's name."""
    conn = bridge.settings.connection(connection)
    click.echo(f"store: {where(conn)} (connection {conn.name!r}, {conn.driver} driver)", err=True)
    return conn.name


def open_store(app: str | None, connection: str | None, *, create: bool = False) -> tuple[JobBridge, Driver]:
    """The app and its connection's driver, announced first; ``create`` only for a command that may
    create the store (a missing one is otherwise an error naming it and ``jobbridge migrate``)."""
    bridge = load_bridge(app)
    return bridge, bridge.driver(announce(bridge, connection), create=create)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class Moment(click.ParamType[float]):
    """A moment in the past: a duration back from now (``90s``, ``15m``, ``2h``, ``3d``, ``1w``) or an
    ISO 8601 date or time (``2026-01-31``, ``2026-01-31T09:30``; UTC unless it says otherwise)."""

    name = "WHEN"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        text = str(value)
        found = _DURATION.match(text)
        if found:
            return datetime.now(UTC).timestamp() - float(found.group(1)) * _UNIT[found.group(2)]
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            self.fail(f"{text!r} is neither a duration (90s, 15m, 2h, 3d, 1w) nor an ISO 8601 date or time "
                      "(2026-01-31, 2026-01-31T09:30)", param, ctx)
        return (moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)).timestamp()


def utc(epoch: float, sep: str = " ") -> str:
    """An epoch time as UTC to the second, for a listing."""
    return datetime.fromtimestamp(epoch, UTC).strftime(f"%Y-%m-%d{sep}%H:%M:%S")
