"""Settings: which connections jobbridge has, read from the environment, a TOML file, or code.

Everything is checked when the settings are built, so a bad configuration fails
the boot naming the key (or the ``JOBBRIDGE_*`` variable) instead of failing
later, or worse, being silently ignored. docs/configuration.md is the manual.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from jobbridge import drivers
from jobbridge import refusals as rules
from jobbridge.errors import ConfigurationError, RefusedSetting, UnknownConnection

__all__ = ["DEFAULT_SQLITE_FILE", "ENV_PREFIX", "MINIMUM_RESERVATION", "ConnectionSettings", "Settings",
           "default_sqlite_url", "discover"]

ENV_PREFIX = "JOBBRIDGE_"
DEFAULT_SQLITE_FILE = "jobbridge.sqlite3"
DEFAULT_RESERVATION = 60.0
MINIMUM_RESERVATION = 2.0

# The top-level keys. A driver's own keys appear as <driver>_<key> (redis_url is the redis
# connection's url); the reservation is always `reservation`, and a Kafka lock store needs a
# connections section, so those are not repeated per driver.
TOP_FIELDS: dict[str, rules.Field] = {
    "driver": rules.Field("str"),
    "queues": rules.Field("list"),
    "concurrency": rules.Field("int", least=1),
    "processes": rules.Field("int", least=1),
    "sleep": rules.Field("float", least=0),
    "reservation": rules.Field("float", above=0),
    "results": rules.Field("str"),
    "result_ttl": rules.Field("float", above=0),
}
RESULT_DRIVERS = ("database", "redis", "memory")
DEFAULT_RESULT_TTL = 86400.0
DRIVER_KEYS: dict[str, tuple[str, str]] = {
    f"{driver}_{key}": (driver, key)
    for driver, fields in rules.DRIVER_FIELDS.items()
    for key in fields
    if key not in ("reservation", "visibility_timeout", "lease", "locks")
}
TOP_FIELDS.update({name: rules.DRIVER_FIELDS[driver][key] for name, (driver, key) in DRIVER_KEYS.items()})


def default_sqlite_url(cwd: Path | None = None) -> str:
    """The embedded default store: a SQLite file in ``cwd``, by absolute path so every process agrees."""
    return f"sqlite:///{_base(cwd) / DEFAULT_SQLITE_FILE}"


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

    def __post_init__(self) -> None:
        object.__setattr__(self, "connections", MappingProxyType(dict(self.connections)))
        object.__setattr__(self, "queues", tuple(self.queues))
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
        base = _base(cwd)
        values = read_environment(os.environ if environ is None else environ)
        if values:
            return _build(values, _Source("environment", base, frozenset(values)))
        found = discover(base)
        return cls.from_file(found) if found else _build({}, _Source("defaults", base))

    @classmethod
    def from_file(cls, path: str | Path) -> Settings:
        """From a jobbridge.toml, or the ``[tool.jobbridge]`` table of a pyproject.toml."""
        file = Path(path).resolve()
        return _build(read_file(file), _Source(str(file), file.parent))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "code") -> Settings:
        """From a mapping with the file's keys; a relative SQLite path is taken from the current directory."""
        return _build(data, _Source(source, _base(None)))

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> Settings:
        """A file in ``cwd`` as the base, with ``JOBBRIDGE_*`` variables over its top-level settings."""
        base = _base(cwd)
        found = discover(base)
        data = read_file(found) if found else {}
        values = read_environment(os.environ if environ is None else environ)
        names = ([str(found)] if found else []) + (["environment"] if values else [])
        source = " + ".join(names) or "defaults"
        return _build({**data, **values}, _Source(source, base, frozenset(values)))

    def connection(self, name: str | None = None) -> ConnectionSettings:
        """The named connection (None: the default); a name nobody declared is an error, never the default."""
        key = self.default_connection if name is None else name
        try:
            return self.connections[key]
        except KeyError:
            declared = ", ".join(repr(n) for n in self.connections) or "none"
            raise UnknownConnection(
                f"no connection is named {key!r}{rules.suggest(key, self.connections)}; declared: {declared}"
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


def _base(cwd: Path | None) -> Path:
    return (Path.cwd() if cwd is None else Path(cwd)).resolve()


def _env_name(key: str) -> str:
    return ENV_PREFIX + key.upper()


def discover(cwd: Path | None = None) -> Path | None:
    """The configuration file in ``cwd``: jobbridge.toml, or a pyproject.toml with [tool.jobbridge]."""
    base = _base(cwd)
    own, pyproject = base / "jobbridge.toml", base / "pyproject.toml"
    in_pyproject = pyproject.is_file() and "jobbridge" in _read_toml(pyproject).get("tool", {})
    if own.is_file() and in_pyproject:
        raise ConfigurationError(
            f"both {own} and the [tool.jobbridge] table of {pyproject} configure jobbridge; keep one, "
            "since whichever lost would be a configuration that reads as in force and is not")
    return own if own.is_file() else (pyproject if in_pyproject else None)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"{path} is not valid TOML: {exc}") from exc
    except OSError as exc:
        raise ConfigurationError(f"cannot read the configuration file {path}: {exc}") from exc


def read_file(path: Path) -> Mapping[str, Any]:
    """A file's jobbridge table: the whole of a jobbridge.toml, or pyproject.toml's [tool.jobbridge]."""
    document = _read_toml(path)
    if path.name != "pyproject.toml":
        return document
    table = document.get("tool", {}).get("jobbridge")
    if not isinstance(table, Mapping):
        raise ConfigurationError(f"{path} has no [tool.jobbridge] table")
    return table


def read_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """The ``JOBBRIDGE_*`` variables as typed settings; an unknown or foreign one is an error naming it."""
    values: dict[str, Any] = {}
    for variable, text in environ.items():
        if variable.startswith(ENV_PREFIX):
            key = variable[len(ENV_PREFIX):].lower()
            values[key] = rules.coerce(_top_field(key, "the environment", env=True), text, variable, text=True)
    return values


def _top_field(key: str, where: str, env: bool = False) -> rules.Field:
    """The field of a top-level key, or the refusal or unknown-key error it deserves."""
    if key in TOP_FIELDS:
        return TOP_FIELDS[key]
    shown = _env_name(key) if env else key
    refusal = rules.ENV_CONNECTIONS if env and key == "connections" else rules.refusal_for(key, None)
    if refusal is not None:
        instead = (refusal.env_instead or refusal.instead) if env else refusal.instead
        raise RefusedSetting(shown, refusal.why, instead, where)
    keys = list(TOP_FIELDS) if env else [*TOP_FIELDS, "connections"]
    name = _env_name if env else str
    kind = "environment variable" if env else f"setting in {where}:"
    raise ConfigurationError(f"unknown {kind} {shown}{rules.suggest(key, keys, name)}; jobbridge reads: "
                             f"{', '.join(map(name, keys))}")


# ---------------------------------------------------------------- building the settings


@dataclass(frozen=True)
class _Source:
    """Where a set of values came from, and which of them came from the environment."""

    name: str
    base: Path
    from_env: frozenset[str] = frozenset()

    @property
    def where(self) -> str:
        return "the environment" if self.name == "environment" else self.name

    def label(self, key: str) -> str:
        """A key as its writer wrote it: ``JOBBRIDGE_SLEEP``, or ``sleep (/srv/app/jobbridge.toml)``."""
        return _env_name(key) if key in self.from_env else f"{key} ({self.name})"


@dataclass(frozen=True)
class _Place:
    """How one connection's keys are named to the user: in its own table, or as top-level <driver>_<key>."""

    name: str
    driver: str
    src: _Source
    one_driver: bool = False

    @property
    def where(self) -> str:
        return self.src.where if self.one_driver else f"connection {self.name!r} ({self.src.name})"

    def key(self, sub: str) -> str:
        full = f"{self.driver}_{sub}"
        return (_env_name(full) if full in self.src.from_env else full) if self.one_driver else sub

    def label(self, sub: str) -> str:
        return self.src.label(f"{self.driver}_{sub}") if self.one_driver else f"{sub} in {self.where}"

    def missing(self, sub: str) -> str:
        full = f"{self.driver}_{sub}"
        if not self.one_driver:
            return sub
        return _env_name(full) if self.src.name == "environment" else f"{full} (or {_env_name(full)})"


def _build(data: Mapping[str, Any], src: _Source) -> Settings:
    """Check every key and value, build the connections, and refuse what would fail silently later."""
    if not isinstance(data, Mapping):
        raise ConfigurationError(f"the configuration ({src.name}) must be a table of settings, not {data!r}")
    values = {key: rules.coerce(_top_field(key, src.where), value, src.label(key))
              for key, value in data.items() if key != "connections"}
    if "driver" in values:
        values["driver"] = _driver_name(values["driver"], src.label("driver"))
    reservation = values.get("reservation", DEFAULT_RESERVATION)
    if "connections" in data:
        connections, default = _section(data["connections"], values, src, reservation)
    else:
        connections, default = _one_driver(values, src, reservation)
    rules.check_distinct(connections)
    rules.check_locks(connections)
    settings = Settings(
        connections=connections, default_connection=default, queues=values.get("queues", ("default",)),
        concurrency=values.get("concurrency", 8), processes=values.get("processes", 1),
        sleep=values.get("sleep", 1.0), reservation=reservation, source=src.name,
        results=values.get("results"), result_ttl=values.get("result_ttl", DEFAULT_RESULT_TTL))
    settings.check_reservations()
    return settings


def _driver_name(value: Any, label: str) -> str:
    names = ", ".join(drivers.MODULES)
    if not isinstance(value, str) or "://" in value:
        raise ConfigurationError(
            f"{label} is a driver's name ({names}), not {value!r}; a URL goes in the driver's own "
            "setting (database_url, redis_url, sqs_queue_url, kafka_brokers, or url in a connection)")
    name = value.strip().lower()
    if name not in drivers.MODULES:
        raise ConfigurationError(f"{label} names no driver: {value!r}{rules.suggest(name, drivers.MODULES)}; "
                                 f"choose one of {names}")
    return name


def _one_driver(values: Mapping[str, Any], src: _Source,
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
    place = _Place(driver, driver, src, one_driver=True)
    return {driver: _connection(place, options, reservation)}, driver


def _implied_driver(given: Mapping[str, tuple[str, str]], src: _Source) -> str:
    """With no ``driver``: the one driver whose settings are given, else the embedded database."""
    named = sorted({owner for owner, _ in given.values()})
    if len(named) > 1:
        keys = ", ".join(src.label(key) for key in sorted(given))
        raise ConfigurationError(
            f"settings for {' and '.join(named)} are given ({keys}) but no driver: set driver "
            f"({_env_name('driver')}) to choose one, or declare a connections section for several")
    return named[0] if named else "database"


def _section(raw: Any, values: Mapping[str, Any], src: _Source,
             reservation: float) -> tuple[dict[str, ConnectionSettings], str]:
    """The connections section: a default name, and a table per connection with its own driver."""
    if "driver" in values:
        raise ConfigurationError(rules.NEVER_BOTH.format(driver=src.label("driver"), source=src.name))
    stray = sorted(key for key in values if key in DRIVER_KEYS)
    if stray:
        raise ConfigurationError(
            f"{src.label(stray[0])} is a one-driver setting; with a connections section nothing is "
            f"inherited between connections, so write {DRIVER_KEYS[stray[0]][1]} in the connection's "
            "own table")
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"connections ({src.name}) must be a table, not {raw!r}")
    entries = {name: table for name, table in raw.items() if name != "default"}
    default = _default_name(raw.get("default"), entries, src)
    return {name: _declared(name, table, src, reservation) for name, table in entries.items()}, default


def _default_name(name: Any, entries: Mapping[str, Any], src: _Source) -> str:
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
                                 f"is a string, not {name!r}; call a connection anything but 'default'")
    if name not in entries:
        raise UnknownConnection(
            f"connections.default ({src.name}) names {name!r}{rules.suggest(name, entries)}, which is not "
            f"declared (declared: {declared}); every job would go to a backend nobody named")
    return name


def _declared(name: str, table: Any, src: _Source, reservation: float) -> ConnectionSettings:
    """One entry of the connections section, checked against its own driver's keys."""
    if not isinstance(table, Mapping):
        raise ConfigurationError(f"connection {name!r} ({src.name}) must be a table of settings, "
                                 f"not {table!r}")
    if "driver" not in table:
        raise ConfigurationError(
            f"connection {name!r} ({src.name}) has no driver; write driver = one of "
            f"{', '.join(drivers.MODULES)}. A connection's driver is never guessed")
    place = _Place(name, "", src)
    driver = _driver_name(table["driver"], place.label("driver"))
    place = _Place(name, driver, src)
    fields = rules.fields_for(driver)
    options = {key: rules.coerce(_connection_field(key, fields, place), value, place.label(key))
               for key, value in table.items() if key != "driver"}
    return _connection(place, options, reservation)


def _connection_field(key: str, fields: Mapping[str, rules.Field], place: _Place) -> rules.Field:
    """The field of a connection key, or the refusal or unknown-key error it deserves."""
    if key in fields:
        return fields[key]
    refusal = rules.refusal_for(key, place.driver)
    if refusal is not None:
        raise RefusedSetting(key, refusal.why, refusal.instead, place.where)
    accepted = ", ".join(["driver", *sorted(fields)])
    raise ConfigurationError(f"unknown setting {key!r} in {place.where}{rules.suggest(key, fields)}; "
                             f"a {place.driver} connection accepts: {accepted}")


def _connection(place: _Place, given: Mapping[str, Any], reservation: float) -> ConnectionSettings:
    """A connection's options, with what it needs checked and its reservation always present."""
    options, driver = dict(given), place.driver
    required = rules.REQUIRED.get(driver)
    if required and required not in options:
        raise ConfigurationError(
            f"{place.where}: the {driver} driver needs {place.missing(required)}; without it there is "
            "nothing to connect to, and no default is guessed")
    found = rules.cross_check(driver, options)
    if found is not None:
        key, refusal = found
        raise RefusedSetting(place.key(key), refusal.why, refusal.instead, place.where)
    for key in ("url", "queue_url", "endpoint"):
        if key in options:
            rules.check_scheme(driver, key, options[key], place.label(key))
    key = rules.RESERVATION_KEY.get(driver, "reservation")
    options.setdefault(key, math.ceil(reservation) if driver == "sqs" else reservation)
    options["reservation"] = float(options[key])
    if driver == "database":
        options["url"] = rules.absolute_sqlite(options["url"], place.src.base) if "url" in options \
            else default_sqlite_url(place.src.base)
    return ConnectionSettings(place.name, driver, options)
