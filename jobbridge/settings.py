"""Settings: which connections jobbridge has, read from the environment, a TOML file, or code.

Everything is checked when the settings are built, so a bad configuration fails
the boot naming the key (or the ``JOBBRIDGE_*`` variable) instead of failing
later, or worse, being silently ignored. docs/configuration.md is the manual.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from jobbridge import drivers
from jobbridge import setting_checks as checks
from jobbridge.errors import ConfigurationError, RefusedSetting, UnknownConnection
from jobbridge.redaction import quoted
from jobbridge.setting_checks import ENV_PREFIX, Place, Source, env_name
from jobbridge.setting_files import base_dir, discover, read_file
from jobbridge.setting_schema import DEFAULT_RESERVATION, RESERVATION, Field, coerce

__all__ = ["DEFAULT_SQLITE_FILE", "ENV_PREFIX", "MINIMUM_RESERVATION", "ConnectionSettings", "Settings",
           "default_sqlite_url", "discover", "read_environment", "read_file"]

DEFAULT_SQLITE_FILE = "jobbridge.sqlite3"
MINIMUM_RESERVATION = 2.0

# The top-level keys. A driver's own keys appear as <driver>_<key> (redis_url is the redis
# connection's url), read from each driver's declaration (`drivers.schema_of`); the reservation
# is always `reservation`, and a key naming another connection (Kafka's locks) needs a
# connections section, so those are not repeated per driver.
TOP_FIELDS: dict[str, Field] = {
    "driver": Field("str"),
    "queues": Field("list"),
    "concurrency": Field("int", least=1),
    "processes": Field("int", least=1),
    "sleep": Field("float", least=0),
    "reservation": RESERVATION,
    "results": Field("str"),
    "result_ttl": Field("float", above=0),
    "timezone": Field("str"),
    "start_retries": Field("int", least=0),
}
RESULT_DRIVERS = ("database", "redis", "memory")
DEFAULT_RESULT_TTL = 86400.0
DRIVER_KEYS: dict[str, tuple[str, str]] = {
    f"{driver}_{key}": (driver, key)
    for driver in drivers.DRIVERS
    for key, declared in drivers.schema_of(driver).fields.items()
    if declared.top_level and key != drivers.schema_of(driver).reservation_key
}
TOP_FIELDS.update({name: drivers.schema_of(driver).fields[key] for name, (driver, key) in DRIVER_KEYS.items()})


def default_sqlite_url(cwd: Path | None = None) -> str:
    """The embedded default store: a SQLite file in ``cwd``, by absolute path so every process agrees."""
    return f"sqlite:///{base_dir(cwd) / DEFAULT_SQLITE_FILE}"


@dataclass(frozen=True)
class ConnectionSettings:
    """One named backend: its driver and that driver's checked settings, shared with no other."""

    name: str
    driver: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        options = dict(self.options)
        options.setdefault("reservation", DEFAULT_RESERVATION)
        object.__setattr__(self, "options", MappingProxyType(options))

    def __repr__(self) -> str:
        """The options with their credentials masked: a repr ends up in tracebacks, debuggers and logs."""
        options = ", ".join(f"{key!r}: {quoted(value, key)}" for key, value in self.options.items())
        return f"ConnectionSettings(name={self.name!r}, driver={self.driver!r}, options={{{options}}})"

    @property
    def reservation(self) -> float:
        """Seconds a reserved job stays hidden from other workers unless its heartbeat renews it."""
        return float(self.options["reservation"])


@dataclass(frozen=True)
class Settings:
    """Everything jobbridge reads at boot: the connections by name, and the worker's defaults."""

    connections: Mapping[str, ConnectionSettings]
    default_connection: str
    queues: tuple[str, ...] = ("default",)
    concurrency: int = 8
    processes: int = 1
    sleep: float = 1.0
    reservation: float = DEFAULT_RESERVATION
    source: str = "defaults"
    results: str | None = None
    result_ttl: float = DEFAULT_RESULT_TTL
    #: the zone a schedule's cron is read in when the entry names none (None: UTC)
    timezone: str | None = None
    #: the schedules section, entry name -> its table (checked; the jobs are checked when a scheduler starts)
    schedules: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: whether ``queues`` was set (any list but the default counts as set): a worker started without
    #: -Q works the ``queues`` setting when it was, else the queues its registered jobs name
    queues_given: bool = False
    #: times a worker tries its store again, with backoff, when it cannot reach it at start (0: it exits)
    start_retries: int = 0

    def __repr__(self) -> str:
        """Every field, with the results URL's credentials masked (each connection masks its own)."""
        shown = (f"{f.name}={(quoted if f.name == 'results' else repr)(getattr(self, f.name))}" for f in fields(self))
        return f"Settings({', '.join(shown)})"

    def __post_init__(self) -> None:
        object.__setattr__(self, "connections", MappingProxyType(dict(self.connections)))
        object.__setattr__(self, "queues", tuple(self.queues))
        object.__setattr__(self, "queues_given", self.queues_given or self.queues != ("default",))
        object.__setattr__(self, "schedules", MappingProxyType(dict(self.schedules)))
        if self.timezone is not None:  # None is UTC: the schedules' modules are imported only to check a name
            from jobbridge.scheduling.cron import zone

            zone(self.timezone, "timezone")
        for name, conn in self.connections.items():
            if conn.name != name:
                raise ConfigurationError(f"connection {conn.name!r} is filed under the name {name!r}")
        self.connection(self.default_connection)
        if self.results is not None and "://" not in self.results:
            conn = self.connection(self.results)
            if conn.driver not in RESULT_DRIVERS:
                raise ConfigurationError(
                    f"results names connection {conn.name!r}, a {conn.driver} connection, which cannot hold "
                    f"results; name a {', '.join(RESULT_DRIVERS)} connection, or give a store URL "
                    "(sqlite:///..., postgresql://..., redis://...)")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> Settings:
        """From ``JOBBRIDGE_*`` variables; when none is set, from a file in ``cwd``, else the defaults."""
        base = base_dir(cwd)
        values = read_environment(os.environ if environ is None else environ)
        if values:
            return _build(values, Source("environment", base, frozenset(values)))
        found = discover(base)
        return cls.from_file(found) if found else _build({}, Source("defaults", base))

    @classmethod
    def from_file(cls, path: str | Path) -> Settings:
        """From a jobbridge.toml, or the ``[tool.jobbridge]`` table of a pyproject.toml."""
        file = Path(path).resolve()
        return _build(read_file(file), Source(str(file), file.parent))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "code") -> Settings:
        """From a mapping with the file's keys; a relative SQLite path is taken from the current directory."""
        return _build(data, Source(source, base_dir(None)))

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> Settings:
        """A file in ``cwd`` as the base, with ``JOBBRIDGE_*`` variables over its top-level settings."""
        base = base_dir(cwd)
        found = discover(base)
        data = read_file(found) if found else {}
        values = read_environment(os.environ if environ is None else environ)
        names = ([str(found)] if found else []) + (["environment"] if values else [])
        source = " + ".join(names) or "defaults"
        return _build({**data, **values}, Source(source, base, frozenset(values)))

    def connection(self, name: str | None = None) -> ConnectionSettings:
        """The named connection (None: the default); a name nobody declared is an error, never the default."""
        key = self.default_connection if name is None else name
        try:
            return self.connections[key]
        except KeyError:
            declared = ", ".join(repr(n) for n in self.connections) or "none"
            raise UnknownConnection(
                f"no connection is named {key!r}{checks.suggest(key, self.connections)}; declared: {declared}"
            ) from None

    def results_store(self) -> tuple[str, dict[str, Any]] | None:
        """Where results and cancellations live, as (URL, options) for `jobbridge.results.open_store`.

        ``results`` may be a URL or a connection's name; unset, the default connection's own
        store serves when its driver can hold results (database, redis, memory), else there is none.
        """
        if self.results is not None and "://" in self.results:
            return self.results, {}
        conn = self.connection(self.results)
        if conn.driver not in RESULT_DRIVERS:
            return None
        if conn.driver == "memory":
            return "memory://", {}
        options = {k: v for k, v in conn.options.items() if k not in ("url", "reservation")}
        return str(conn.options["url"]), options

    def check_reservations(self) -> None:
        """Refuse a reservation the heartbeat (a renewal every quarter of it) cannot keep alive."""
        for conn in self.connections.values():
            _check_reservation(conn.reservation, f"connection {conn.name!r}")
        _check_reservation(self.reservation, "the top-level reservation")


def _check_reservation(value: float, owner: str) -> None:
    if math.isfinite(value) and value >= MINIMUM_RESERVATION:
        return
    raise ConfigurationError(
        f"{owner} has a reservation of {value:g} s, which the heartbeat cannot keep alive. A worker "
        f"renews a job's reservation every quarter of it; under {MINIMUM_RESERVATION:g} s a single slow "
        "renewal lets it lapse, and a second worker takes a job the first is still running. Set "
        f"reservation to at least {MINIMUM_RESERVATION:g} s (60 by default; visibility_timeout on sqs, "
        "lease on kafka)")


# ---------------------------------------------------------------- reading the sources


def read_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """The ``JOBBRIDGE_*`` variables as typed settings; an unknown or foreign one is an error naming it."""
    values: dict[str, Any] = {}
    for variable, text in environ.items():
        if variable.startswith(ENV_PREFIX):
            key = variable[len(ENV_PREFIX):].lower()
            values[key] = coerce(_top_field(key, "the environment", env=True), text, variable, text=True)
    return values


def _top_field(key: str, where: str, env: bool = False) -> Field:
    """The field of a top-level key, or the refusal or unknown-key error it deserves."""
    if key in TOP_FIELDS:
        return TOP_FIELDS[key]
    shown = env_name(key) if env else key
    refusal = checks.ENV_CONNECTIONS if env and key == "connections" else checks.refusal_for(key, None)
    if refusal is not None:
        instead = (refusal.env_instead or refusal.instead) if env else refusal.instead
        raise RefusedSetting(shown, refusal.why, instead, where)
    keys = list(TOP_FIELDS) if env else [*TOP_FIELDS, "connections", "schedules"]
    name = env_name if env else str
    kind = "environment variable" if env else f"setting in {where}:"
    raise ConfigurationError(f"unknown {kind} {shown}{checks.suggest(key, keys, name)}; jobbridge reads: "
                             f"{', '.join(map(name, keys))}")


# ---------------------------------------------------------------- building the settings


def _build(data: Mapping[str, Any], src: Source) -> Settings:
    """Check every key and value, build the connections, and refuse what would fail silently later."""
    if not isinstance(data, Mapping):
        raise ConfigurationError(f"the configuration ({src.name}) must be a table of settings, not {quoted(data)}")
    values = {key: coerce(_top_field(key, src.where), value, src.label(key))
              for key, value in data.items() if key not in ("connections", "schedules")}
    if "driver" in values:
        values["driver"] = _driver_name(values["driver"], src.label("driver"))
    reservation = values.get("reservation", DEFAULT_RESERVATION)
    if "connections" in data:
        connections, default = _section(data["connections"], values, src, reservation)
    else:
        connections, default = _one_driver(values, src, reservation)
    checks.check_distinct(connections)
    checks.check_locks(connections)
    settings = Settings(
        connections=connections, default_connection=default, queues=values.get("queues", ("default",)),
        concurrency=values.get("concurrency", 8), processes=values.get("processes", 1),
        sleep=values.get("sleep", 1.0), reservation=reservation, source=src.name,
        results=values.get("results"), result_ttl=values.get("result_ttl", DEFAULT_RESULT_TTL),
        timezone=values.get("timezone"), queues_given="queues" in values,
        start_retries=values.get("start_retries", 0),
        schedules=_schedules_section(data, src, values.get("timezone")))
    settings.check_reservations()
    return settings


def _schedules_section(data: Mapping[str, Any], src: Source, timezone: str | None) -> dict[str, dict[str, Any]]:
    """The schedules section, checked (`jobbridge.scheduling.config`, imported only when there is one)."""
    if "schedules" not in data:
        return {}
    from jobbridge.scheduling import config

    return config.check_section(data["schedules"], src.name, timezone)


def _driver_name(value: Any, label: str) -> str:
    names = ", ".join(drivers.DRIVERS)
    if not isinstance(value, str) or "://" in value:
        raise ConfigurationError(
            f"{label} is a driver's name ({names}), not {quoted(value)}; a URL goes in the driver's own "
            "setting (database_url, redis_url, sqs_queue_url, kafka_brokers, or url in a connection)")
    name = value.strip().lower()
    if name not in drivers.DRIVERS:
        raise ConfigurationError(f"{label} names no driver: {quoted(value)}{checks.suggest(name, drivers.DRIVERS)}; "
                                 f"choose one of {names}")
    return name


def _one_driver(values: Mapping[str, Any], src: Source,
                reservation: float) -> tuple[dict[str, ConnectionSettings], str]:
    """One connection, named after its driver, from the top-level <driver>_<key> settings."""
    given = {key: DRIVER_KEYS[key] for key in values if key in DRIVER_KEYS}
    driver = values.get("driver") or _implied_driver(given, src)
    foreign = sorted(key for key, (owner, _) in given.items() if owner != driver)
    if foreign:
        raise ConfigurationError(
            f"{src.label(foreign[0])} configures the {given[foreign[0]][0]} driver, but "
            f"{src.label('driver')} selects {driver}, so it would be ignored; remove it, or declare "
            "both backends in a connections section")
    options = {sub: values[key] for key, (_, sub) in given.items()}
    place = Place(driver, driver, src, one_driver=True)
    return {driver: _connection(place, options, reservation)}, driver


def _implied_driver(given: Mapping[str, tuple[str, str]], src: Source) -> str:
    """With no ``driver``: the one driver whose settings are given, else the embedded database."""
    named = sorted({owner for owner, _ in given.values()})
    if len(named) > 1:
        keys = ", ".join(src.label(key) for key in sorted(given))
        raise ConfigurationError(
            f"settings for {' and '.join(named)} are given ({keys}) but no driver: set driver "
            f"({env_name('driver')}) to choose one, or declare a connections section for several")
    return named[0] if named else "database"


def _section(raw: Any, values: Mapping[str, Any], src: Source,
             reservation: float) -> tuple[dict[str, ConnectionSettings], str]:
    """The connections section: a default name, and a table per connection with its own driver."""
    if "driver" in values:
        raise ConfigurationError(checks.NEVER_BOTH.format(driver=src.label("driver"), source=src.name))
    stray = sorted(key for key in values if key in DRIVER_KEYS)
    if stray:
        raise ConfigurationError(
            f"{src.label(stray[0])} is a one-driver setting; with a connections section nothing is "
            f"inherited between connections, so write {DRIVER_KEYS[stray[0]][1]} in the connection's "
            "own table")
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"connections ({src.name}) must be a table, not {quoted(raw)}")
    entries = {name: table for name, table in raw.items() if name != "default"}
    default = _default_name(raw.get("default"), entries, src)
    return {name: _declared(name, table, src, reservation) for name, table in entries.items()}, default


def _default_name(name: Any, entries: Mapping[str, Any], src: Source) -> str:
    declared = ", ".join(repr(n) for n in entries)
    if not entries:
        raise ConfigurationError(f"the connections section ({src.name}) declares no connection; add a "
                                 "table per connection: [connections.primary] driver = \"database\"")
    if name is None and len(entries) == 1:
        return next(iter(entries))
    if name is None:
        raise ConfigurationError(f"the connections section ({src.name}) declares {declared} but no "
                                 "default; add default = \"<name>\"")
    if not isinstance(name, str):
        raise ConfigurationError(f"connections.default ({src.name}) names the default connection, so it "
                                 f"is a string, not {quoted(name)}; call a connection anything but 'default'")
    if name not in entries:
        raise UnknownConnection(
            f"connections.default ({src.name}) names {name!r}{checks.suggest(name, entries)}, which is not "
            f"declared (declared: {declared}); every job would go to a backend nobody named")
    return name


def _declared(name: str, table: Any, src: Source, reservation: float) -> ConnectionSettings:
    """One entry of the connections section, checked against its own driver's keys."""
    if not isinstance(table, Mapping):
        raise ConfigurationError(f"connection {name!r} ({src.name}) must be a table of settings, "
                                 f"not {quoted(table)}")
    if "driver" not in table:
        raise ConfigurationError(
            f"connection {name!r} ({src.name}) has no driver; write driver = one of "
            f"{', '.join(drivers.DRIVERS)}. A connection's driver is never guessed")
    place = Place(name, "", src)
    driver = _driver_name(table["driver"], place.label("driver"))
    place = Place(name, driver, src)
    schema = drivers.schema_of(driver)
    options = {key: coerce(checks.connection_field(key, schema, place), value, place.label(key))
               for key, value in table.items() if key != "driver"}
    return _connection(place, options, reservation)


def _connection(place: Place, given: Mapping[str, Any], reservation: float) -> ConnectionSettings:
    """A connection from its checked options; a database one always has a URL, absolute if SQLite."""
    options = checks.connection_options(place, given, reservation)
    if place.driver == "database":
        options["url"] = checks.absolute_sqlite(options["url"], place.src.base) if "url" in options \
            else default_sqlite_url(place.src.base)
    return ConnectionSettings(place.name, place.driver, options)
