"""Drivers by name and URL scheme, imported lazily so a client library is needed only when used.

Each driver has two parts, both named in `DRIVERS`:

- its settings module, whose ``SCHEMA`` (a `jobbridge.setting_schema.DriverSchema`) declares the keys
  a connection of it accepts, their types, bounds and defaults, and the keys it refuses with what to
  write instead. It imports no client library, so the boot-time checks (`jobbridge.settings`) read
  every driver's declaration with only jobbridge installed (`schema_of`);
- its module, whose ``open(settings, resources) -> Driver`` builds the driver from validated
  settings. `load` imports it, and its client library first, so a missing client is an error naming
  the extra to install rather than an ``ImportError`` from deep inside ``open``.

A driver package's ``__init__`` imports its driver on first use (`lazy_exports`), never at import:
importing the settings module imports the package first.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol, cast

from jobbridge.clock import SYSTEM_CLOCK, Clock
from jobbridge.drivers.base import Driver
from jobbridge.envelope import Envelope
from jobbridge.errors import ConfigurationError
from jobbridge.redaction import quoted
from jobbridge.setting_schema import DriverSchema


@dataclass(frozen=True)
class DriverEntry:
    """Where one driver lives: the module with ``open``, the one with ``SCHEMA``, and its client library."""

    module: str
    settings: str
    client: str | None = None
    extra: str | None = None


DRIVERS: dict[str, DriverEntry] = {
    "sync": DriverEntry("jobbridge.drivers.sync", "jobbridge.drivers.sync"),
    "memory": DriverEntry("jobbridge.drivers.memory", "jobbridge.drivers.memory"),
    "database": DriverEntry("jobbridge.drivers.database", "jobbridge.drivers.database.settings"),
    "redis": DriverEntry("jobbridge.drivers.redis", "jobbridge.drivers.redis.settings", "redis", "redis"),
    "sqs": DriverEntry("jobbridge.drivers.sqs", "jobbridge.drivers.sqs_settings", "boto3", "sqs"),
    "kafka": DriverEntry("jobbridge.drivers.kafka", "jobbridge.drivers.kafka.settings", "confluent_kafka", "kafka"),
    "amqp": DriverEntry("jobbridge.drivers.amqp", "jobbridge.drivers.amqp.settings", "kombu", "amqp"),
    # Celery's own messages on a Celery broker (selected by driver = "celery_wire", never by a URL scheme)
    "celery_wire": DriverEntry("jobbridge.drivers.celerywire", "jobbridge.drivers.celerywire.settings", "kombu",
                               "celery-wire"),
}

SCHEMES: dict[str, str] = {
    "sync": "sync",
    "memory": "memory",
    "sqlite": "database",
    "postgresql": "database",
    "postgres": "database",
    "mysql": "database",
    "mariadb": "database",
    "django": "database",  # django://ALIAS: a database of Django's DATABASES setting
    "redis": "redis",
    "rediss": "redis",
    "sqs": "sqs",
    "kafka": "kafka",
    "amqp": "amqp",
    "amqps": "amqp",
    "pyamqp": "amqp",
}


@dataclass(frozen=True)
class Resources:
    """What no configuration file can hold: the clock, and the sync driver's way to run a job."""

    clock: Clock = SYSTEM_CLOCK
    run_inline: Callable[[Envelope], None] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: whether opening may create the store (a file, its directory, tables). False for the commands that
    #: only read or repair one (``jobbridge status``, ``failed``, ...): a store that is not there is then an
    #: error naming it, rather than a new empty one that answers "nothing here" about the wrong store
    create: bool = True


class DriverModule(Protocol):
    def open(self, settings: Mapping[str, Any], resources: Resources) -> Driver: ...


def driver_for_url(url: str) -> str:
    """The driver name a URL's scheme selects (``postgresql+psycopg://`` -> ``database``)."""
    scheme = url.split("://", 1)[0].split("+", 1)[0].lower() if "://" in url else ""
    try:
        return SCHEMES[scheme]
    except KeyError:
        known = ", ".join(f"{s}://" for s in SCHEMES)
        raise ConfigurationError(
            f"no driver handles the URL scheme {quoted(scheme)} in {quoted(url)}; use one of {known}"
        ) from None


def _entry(name: str) -> DriverEntry:
    try:
        return DRIVERS[name]
    except KeyError:
        raise ConfigurationError(f"unknown driver {name!r}; choose one of {', '.join(DRIVERS)}") from None


def schema_of(name: str) -> DriverSchema:
    """A driver's settings declarations, read from its settings module without its client library."""
    found: DriverSchema = importlib.import_module(_entry(name).settings).SCHEMA
    return found


def load(name: str) -> DriverModule:
    """Import a driver's module by name, naming the extra to install when its client is missing."""
    entry = _entry(name)
    try:
        if entry.client is not None:
            importlib.import_module(entry.client)
        module: ModuleType = importlib.import_module(entry.module)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("jobbridge"):
            raise
        raise ConfigurationError(
            f"the {name} driver needs {exc.name!r}: pip install 'jobbridge[{entry.extra or name}]'"
        ) from exc
    return cast(DriverModule, module)


def lazy_exports(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A package's module ``__getattr__``: each name in ``names`` imported from its submodule on first use.

    A driver package re-exports its driver class for its users, but importing it at the package's
    import would load the client library with the settings module, which the boot-time checks read
    for every driver, installed or not.
    """

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{names[name]}"), name)

    return __getattr__
