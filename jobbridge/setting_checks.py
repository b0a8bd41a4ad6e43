"""The checks a configuration passes beyond each value's type, and the refusals that hold for every driver.

A driver's own keys, types, bounds and refusals are declared once, in its settings
module (read through `jobbridge.drivers.schema_of`); what is here holds whatever
the driver:

- the keys refused at the top level and in every connection (`GENERAL`, `TOP_LEVEL`),
  each with why and what to write instead, after the driver's own refusals;
- how a key is named back to the person who wrote it (`Source`, `Place`): the variable,
  the file, or the connection's table;
- one connection's checks, read off its driver's schema (`connection_field`,
  `connection_options`): the required key, the URL schemes, the combinations that
  would connect somewhere unintended, the reservation under the driver's name;
- the checks across connections: one store per connection, Kafka's lock store.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from jobbridge import drivers
from jobbridge.errors import ConfigurationError, RefusedSetting, UnknownConnection
from jobbridge.redaction import quoted
from jobbridge.setting_schema import DriverSchema, Field, Refusal

ENV_PREFIX = "JOBBRIDGE_"

_JOB_OPTION = "on the job"

# Refused wherever they appear: at the top level and in every connection.
GENERAL: dict[str, Refusal] = {
    "retry_after": Refusal(
        "it is another library's name for the reservation (how long a reserved job stays hidden)",
        "reservation (visibility_timeout on an sqs connection, lease on a kafka connection)",
        "JOBBRIDGE_RESERVATION"),
    "after_commit": Refusal(
        "a connection-wide flag would state that every dispatch waits for its transaction, "
        "but jobbridge can only wait for a transaction it is handed",
        "bridge.dispatch(job, transaction=conn): the job is stored only if that transaction commits"),
    "block_for": Refusal(
        "how long an idle worker waits is the worker's to decide, not a connection's",
        "sleep (seconds an idle worker waits before it reserves again)", "JOBBRIDGE_SLEEP"),
    "table": Refusal(
        "the database driver's tables are fixed (jobbridge_jobs, jobbridge_failed_jobs, ...) and created "
        "by its migration; a table setting would point workers at a table nothing writes to",
        "nothing; create them with jobbridge migrate"),
    # the sqs driver's own refusal, pointed at an sqs connection
    "suffix": drivers.schema_of("sqs").refused["suffix"]._replace(
        instead="queue_url on an sqs connection", env_instead="JOBBRIDGE_SQS_QUEUE_URL"),
    "connection": Refusal(
        "it names a store configured for something else (typically the cache's redis connection), so "
        "the queue would share that store's database index and be evicted or flushed with it",
        "url, with the queue's own database index (redis://host:6379/2)"),
    "visibility_timeout": Refusal(
        "it is SQS's name for the reservation; only an sqs connection takes it",
        "reservation", "JOBBRIDGE_RESERVATION"),
    "queue": Refusal(
        "the queue is the job's to name (@job(queue=...), or dispatch(queue=...)); a queue written on a "
        "connection would be a decoy the jobs never use",
        f"queue= {_JOB_OPTION} or on the dispatch; queues for what a worker processes", "JOBBRIDGE_QUEUES"),
    "pool_size": Refusal(
        "each driver sets up its own client (the redis one multiplexes a connection, the database one "
        "keeps SQLAlchemy's pool), so a pool figure from another library would be read and not honoured",
        "nothing; concurrency for how many jobs run at once, and on redis response_timeout_ms and "
        "reconnect", "JOBBRIDGE_CONCURRENCY"),
    "workers": Refusal("it is another name for the jobs one worker process runs at once",
                       "concurrency", "JOBBRIDGE_CONCURRENCY"),
    "threads": Refusal("it is Dramatiq's name for the jobs one worker process runs at once",
                       "concurrency", "JOBBRIDGE_CONCURRENCY"),
    "worker_concurrency": Refusal("it is Celery's name for the jobs one worker process runs at once",
                                  "concurrency", "JOBBRIDGE_CONCURRENCY"),
    "poll_interval_ms": Refusal("it is an idle wait in milliseconds, and jobbridge's is in seconds",
                                "sleep, in seconds (poll_interval_ms = 1000 is sleep = 1)",
                                "JOBBRIDGE_SLEEP"),
    "default_queue": Refusal(
        "it is a queue for jobs that name none; here every job has a queue ('default' unless it "
        "names another)", f"queue= {_JOB_OPTION}; queues for what a worker processes", "JOBBRIDGE_QUEUES"),
    "task_default_queue": Refusal(
        "it is Celery's queue for tasks that name none; here every job has a queue",
        f"queue= {_JOB_OPTION}; queues for what a worker processes", "JOBBRIDGE_QUEUES"),
    "broker_url": Refusal(
        "it is Celery's one URL for every backend; jobbridge names the driver, then that driver's settings",
        'driver plus that driver\'s URL (driver = "redis" and redis_url = "redis://..."), or keep '
        "Celery's settings through jobbridge.compat",
        "JOBBRIDGE_DRIVER plus that driver's URL (JOBBRIDGE_REDIS_URL=redis://...)"),
    "result_backend": Refusal("it is Celery's name for where results are kept",
                              "results = a store URL or a connection's name (the default connection's "
                              "store when unset); store_result=True on the job class",
                              "JOBBRIDGE_RESULTS"),
    "task_acks_late": Refusal(
        "it is already true, and cannot be switched off: a job is acknowledged only after its attempt",
        "nothing"),
    "tries": Refusal("a job's attempts belong to the job, and differ from job to job",
                     f"tries= {_JOB_OPTION} (3 unless it says), or dispatch(tries=...)"),
    "max_retries": Refusal("a job's attempts belong to the job, and differ from job to job",
                           f"tries= {_JOB_OPTION} (attempts, not retries: max_retries = 4 is tries = 5)"),
    "timeout": Refusal("a job's time limit belongs to the job, and differs from job to job",
                       f"timeout= {_JOB_OPTION}, in seconds (600 unless it says)"),
    "job_timeout": Refusal("it is RQ's per-job time limit; here the limit belongs to the job",
                           f"timeout= {_JOB_OPTION}, in seconds"),
    "time_limit": Refusal("it is Dramatiq's per-job time limit, in milliseconds; here it belongs to the job",
                          f"timeout= {_JOB_OPTION}, in seconds"),
    "backoff": Refusal("the wait between attempts belongs to the job",
                       f"backoff= {_JOB_OPTION} (Backoff.exponential(...) or Backoff.fixed(...))"),
    "failure_ttl": Refusal(
        "a failed job stays in the failed store until it is retried or flushed, never silently expired",
        "nothing; retry or flush the failed store (jobbridge failed, jobbridge retry)"),
}
GENERAL["max_connections"] = GENERAL["min_connections"] = GENERAL["pool_size"]
GENERAL["broker"] = GENERAL["broker_url"]

# Refused at the top level only (in a connection they are refused by driver, or accepted).
TOP_LEVEL: dict[str, Refusal] = {
    "url": Refusal("a URL belongs to one driver, and the top level does not say which",
                   "database_url, redis_url, sqs_queue_url or kafka_brokers",
                   "JOBBRIDGE_DATABASE_URL, JOBBRIDGE_REDIS_URL, JOBBRIDGE_SQS_QUEUE_URL or "
                   "JOBBRIDGE_KAFKA_BROKERS"),
    "connection": Refusal(
        "it is another library's name for the backend to use; jobbridge names a driver, or a section of them",
        "driver (one backend) or a connections section (several)", "JOBBRIDGE_DRIVER"),
    "sqs_visibility_timeout": Refusal(
        "with one driver, reservation is the reservation whatever the driver (SQS's visibility timeout)",
        "reservation", "JOBBRIDGE_RESERVATION"),
    "kafka_lease": Refusal(
        "with one driver, reservation is the reservation whatever the driver (Kafka's lease)",
        "reservation", "JOBBRIDGE_RESERVATION"),
    "kafka_locks": Refusal(
        "the lock store is another connection, and one driver declares only one",
        "a connections section with the kafka connection and its lock store (locks = \"<name>\")"),
}

ENV_CONNECTIONS = Refusal(
    "a connections section is a table of tables, which an environment variable cannot hold",
    "declare it in jobbridge.toml or [tool.jobbridge] (or one backend with JOBBRIDGE_DRIVER)")
NEVER_BOTH = (
    "{driver} and the connections section ({source}) both name the default connection; keep one. "
    "Both is refused rather than resolved by precedence: a job dispatched to the connection that lost "
    "would still be accepted and given an id, then wait in a store no worker drains, never run and "
    "never failed")


def refusal_for(key: str, schema: DriverSchema | None) -> Refusal | None:
    """Why ``key`` is refused in a connection of this schema (None: at the top level), if it is.

    The driver's own refusal comes first: it can say why for that driver in particular.
    """
    if schema is None:
        return TOP_LEVEL.get(key) or GENERAL.get(key)
    return schema.refused.get(key) or GENERAL.get(key)


def closest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate closest to ``word``, if one is close enough to be what was meant."""
    found = difflib.get_close_matches(word, list(candidates), n=1)
    return found[0] if found else None


def suggest(word: str, candidates: Iterable[str], shown: Callable[[str], str] = str) -> str:
    """``" (did you mean x?)"`` when a candidate is close to ``word``, else ``""``."""
    found = closest(word, candidates)
    return f" (did you mean {shown(found)}?)" if found else ""


# ---------------------------------------------------------------- naming a key to its writer


def env_name(key: str) -> str:
    """A top-level key's environment variable: ``sleep`` is ``JOBBRIDGE_SLEEP``."""
    return ENV_PREFIX + key.upper()


@dataclass(frozen=True)
class Source:
    """Where a set of values came from, and which of them came from the environment."""

    name: str
    base: Path
    from_env: frozenset[str] = frozenset()

    @property
    def where(self) -> str:
        return "the environment" if self.name == "environment" else self.name

    def label(self, key: str) -> str:
        """A key as its writer wrote it: ``JOBBRIDGE_SLEEP``, or ``sleep (/srv/app/jobbridge.toml)``."""
        return env_name(key) if key in self.from_env else f"{key} ({self.name})"


@dataclass(frozen=True)
class Place:
    """How one connection's keys are named to the user: in its own table, or as top-level <driver>_<key>."""

    name: str
    driver: str
    src: Source
    one_driver: bool = False

    @property
    def where(self) -> str:
        return self.src.where if self.one_driver else f"connection {self.name!r} ({self.src.name})"

    def key(self, sub: str) -> str:
        full = f"{self.driver}_{sub}"
        return (env_name(full) if full in self.src.from_env else full) if self.one_driver else sub

    def label(self, sub: str) -> str:
        return self.src.label(f"{self.driver}_{sub}") if self.one_driver else f"{sub} in {self.where}"

    def missing(self, sub: str) -> str:
        full = f"{self.driver}_{sub}"
        if not self.one_driver:
            return sub
        return env_name(full) if self.src.name == "environment" else f"{full} (or {env_name(full)})"


# ---------------------------------------------------------------- one connection


def connection_field(key: str, schema: DriverSchema, place: Place) -> Field:
    """The field of a connection key, or the refusal or unknown-key error it deserves."""
    if key in schema.fields:
        return schema.fields[key]
    refusal = refusal_for(key, schema)
    if refusal is not None:
        raise RefusedSetting(key, refusal.why, refusal.instead, place.where)
    accepted = ", ".join(["driver", *sorted(schema.fields)])
    raise ConfigurationError(f"unknown setting {key!r} in {place.where}{suggest(key, schema.fields)}; "
                             f"a {place.driver} connection accepts: {accepted}")


def connection_options(place: Place, given: Mapping[str, Any], reservation: float) -> dict[str, Any]:
    """A connection's typed options with what its driver needs checked, and its reservation always present.

    The reservation is copied into ``reservation`` from the key the driver calls it by (whole
    seconds rounded up where the driver takes whole seconds: longer is the safe way).
    """
    options, schema = dict(given), drivers.schema_of(place.driver)
    if schema.required and schema.required not in options:
        raise ConfigurationError(
            f"{place.where}: the {place.driver} driver needs {place.missing(schema.required)}; without it "
            "there is nothing to connect to, and no default is guessed")
    found = schema.combination(options) if schema.combination else None
    if found is not None:
        key, refusal = found
        raise RefusedSetting(place.key(key), refusal.why, refusal.instead, place.where)
    for key, field in schema.fields.items():
        if field.kind == "url" and key in options:
            check_scheme(place.driver, field, options[key], place.label(key))
    key = schema.reservation_key
    whole = key in schema.fields and schema.fields[key].kind == "int"
    options.setdefault(key, math.ceil(reservation) if whole else reservation)
    options["reservation"] = float(options[key])
    return options


def check_scheme(driver: str, field: Field, url: str, label: str) -> None:
    """Refuse a URL whose scheme the key does not take: most often a connection to another driver's store."""
    scheme = url.split("://", 1)[0].split("+", 1)[0].lower()
    if scheme not in field.schemes:
        schemes = " or ".join(s + "://" for s in field.schemes)
        raise ConfigurationError(f"{label} is {quoted(url)}, but a {driver} connection takes a {schemes} URL")


def absolute_sqlite(url: str, base: Path) -> str:
    """A relative SQLite path made absolute, so a worker and a web process started elsewhere agree."""
    head, sep, path = url.partition(":///")
    if not sep or head.split("+", 1)[0].lower() != "sqlite" or not path or \
            path.startswith(("/", ":memory:", "file:")):
        return url
    return f"{head}:///{os.path.abspath(base / path)}"


# ---------------------------------------------------------------- across connections


class Connection(Protocol):
    """What the checks across connections read of one (`jobbridge.settings.ConnectionSettings`)."""

    @property
    def name(self) -> str: ...

    @property
    def driver(self) -> str: ...

    @property
    def options(self) -> Mapping[str, Any]: ...


def check_distinct(connections: Mapping[str, Connection]) -> None:
    """Refuse two names for one store: each would reserve the other's jobs."""
    seen: dict[tuple[Any, ...], str] = {}
    for conn in connections.values():
        keys = drivers.schema_of(conn.driver).store_keys
        if not keys:
            continue
        store = (conn.driver, *(_hashable(conn.options.get(key)) for key in keys))
        if store in seen:
            raise ConfigurationError(
                f"connections {seen[store]!r} and {conn.name!r} are one {conn.driver} store "
                f"(same {' and '.join(keys)}): a job pushed through one would be reserved by the "
                "other's workers; give each its own store, or use one connection")
        seen[store] = conn.name


def _hashable(value: Any) -> Any:
    return tuple(sorted(value)) if isinstance(value, tuple | list) else value


def check_locks(connections: Mapping[str, Connection]) -> None:
    """Kafka's ``locks`` must name another declared connection that every worker shares."""
    for conn in connections.values():
        target = conn.options.get("locks")
        if target is None:
            continue
        if target not in connections:
            raise UnknownConnection(
                f"locks in connection {conn.name!r} names {target!r}{suggest(target, connections)}, which "
                f"is not declared (declared: {', '.join(repr(n) for n in connections)})")
        driver = connections[target].driver
        if not drivers.schema_of(driver).lock_store:
            stores = [name for name in drivers.DRIVERS if drivers.schema_of(name).lock_store]
            raise ConfigurationError(
                f"locks in connection {conn.name!r} names {target!r}, a {driver} connection; the lock store "
                f"must be shared by every worker and outlive them: a {' or '.join(stores)} connection")
