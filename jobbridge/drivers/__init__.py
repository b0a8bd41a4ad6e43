"""Drivers by name and URL scheme, imported lazily so a client library is needed only when used.

Each driver module exposes:

- ``SETTINGS``: the connection keys it accepts (besides ``driver``);
- ``REFUSED``: keys written for other queue libraries, as ``{key: (why, write_instead)}``;
- ``open(settings, resources) -> Driver``: build the driver from validated settings.
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

MODULES: dict[str, str] = {
    "sync": "jobbridge.drivers.sync",
    "memory": "jobbridge.drivers.memory",
    "database": "jobbridge.drivers.database",
    "redis": "jobbridge.drivers.redis",
    "sqs": "jobbridge.drivers.sqs",
    "kafka": "jobbridge.drivers.kafka",
}

SCHEMES: dict[str, str] = {
    "sync": "sync",
    "memory": "memory",
    "sqlite": "database",
    "postgresql": "database",
    "postgres": "database",
    "mysql": "database",
    "mariadb": "database",
    "redis": "redis",
    "rediss": "redis",
    "sqs": "sqs",
    "kafka": "kafka",
}

EXTRAS: dict[str, str] = {"redis": "redis", "sqs": "sqs", "kafka": "kafka"}


@dataclass(frozen=True)
class Resources:
    """What no configuration file can hold: the clock, and the sync driver's way to run a job."""

    clock: Clock = SYSTEM_CLOCK
    run_inline: Callable[[Envelope], None] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


class DriverModule(Protocol):
    SETTINGS: frozenset[str]
    REFUSED: Mapping[str, tuple[str, str]]

    def open(self, settings: Mapping[str, Any], resources: Resources) -> Driver: ...


def driver_for_url(url: str) -> str:
    """The driver name a URL's scheme selects (``postgresql+psycopg://`` -> ``database``)."""
    scheme = url.split("://", 1)[0].split("+", 1)[0].lower() if "://" in url else ""
    try:
        return SCHEMES[scheme]
    except KeyError:
        known = ", ".join(f"{s}://" for s in SCHEMES)
        raise ConfigurationError(
            f"no driver handles the URL scheme {scheme!r} in {url!r}; use one of {known}"
        ) from None


def load(name: str) -> DriverModule:
    """Import a driver's module by name, naming the extra to install when its client is missing."""
    try:
        path = MODULES[name]
    except KeyError:
        raise ConfigurationError(f"unknown driver {name!r}; choose one of {', '.join(MODULES)}") from None
    try:
        module: ModuleType = importlib.import_module(path)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("jobbridge"):
            raise
        extra = EXTRAS.get(name, name)
        raise ConfigurationError(
            f"the {name} driver needs {exc.name!r}: pip install 'jobbridge[{extra}]'"
        ) from exc
    return cast(DriverModule, module)
