"""What a configuration key may be: each driver's fields, their values, and the names refused.

The tables live here, not in the driver modules, so that a configuration is
checked the same way whether or not a driver's client library is installed.
A driver module that is importable may add keys (``SETTINGS``) and refusals
(``REFUSED``) of its own; ``tests/unit/test_settings.py`` checks that the two
agree, so a key accepted here is never one the driver silently drops.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from jobbridge import drivers
from jobbridge.errors import ConfigurationError, UnknownConnection

if TYPE_CHECKING:
    from jobbridge.settings import ConnectionSettings

Kind = Literal["str", "url", "int", "float", "bool", "list", "any"]


@dataclass(frozen=True)
class Field:
    """One key's type and bounds: ``least``/``most`` inclusive, ``above`` exclusive."""

    kind: Kind
    least: float | None = None
    above: float | None = None
    most: float | None = None
    empty_ok: bool = False


class Refusal(NamedTuple):
    """Why a key cannot be honoured, and what to write instead (in a file, then in the environment)."""

    why: str
    instead: str
    env_instead: str | None = None


ANY = Field("any")
_RESERVATION = Field("float", above=0)
_MS = Field("int", least=1)

# What each connection carries. `reservation` is the lease a worker renews by
# heartbeat; SQS calls it `visibility_timeout` and Kafka `lease`.
DRIVER_FIELDS: dict[str, dict[str, Field]] = {
    "sync": {},
    "memory": {"reservation": _RESERVATION},
    "database": {"url": Field("url"), "reservation": _RESERVATION},
    "redis": {
        "url": Field("url"),
        "prefix": Field("str", empty_ok=True),
        "reservation": _RESERVATION,
        "connect_timeout_ms": _MS,
        "response_timeout_ms": _MS,
        "reconnect": Field("bool"),
        "reconnect_attempts": Field("int", least=0),
        "reconnect_max_backoff_ms": _MS,
    },
    "sqs": {
        "queue_url": Field("url"),
        "region": Field("str"),
        "endpoint": Field("url"),
        "visibility_timeout": Field("int", least=0, most=43200),
        "wait_time": Field("int", least=0, most=20),
        "key": Field("str"),
        "secret": Field("str"),
    },
    "kafka": {
        "brokers": Field("list", empty_ok=True),
        "group": Field("str"),
        "topic_prefix": Field("str", empty_ok=True),
        "lease": _RESERVATION,
        "locks": Field("str"),
    },
}

# The key that holds a driver's reservation, and the setting without which it cannot start.
RESERVATION_KEY: dict[str, str] = {"sqs": "visibility_timeout", "kafka": "lease"}
REQUIRED: dict[str, str] = {"redis": "url", "sqs": "queue_url", "kafka": "brokers"}
# Drivers whose store outlives a worker process, so they can hold Kafka's leases.
LOCK_STORES = ("database", "redis")

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
    "suffix": Refusal(
        "it composes an SQS queue URL out of parts, and an sqs connection is given the whole URL",
        "queue_url on an sqs connection", "JOBBRIDGE_SQS_QUEUE_URL"),
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
    "workers": Refusal("it is Navree's name for the jobs one worker process runs at once",
                       "concurrency", "JOBBRIDGE_CONCURRENCY"),
    "threads": Refusal("it is Dramatiq's name for the jobs one worker process runs at once",
                       "concurrency", "JOBBRIDGE_CONCURRENCY"),
    "worker_concurrency": Refusal("it is Celery's name for the jobs one worker process runs at once",
                                  "concurrency", "JOBBRIDGE_CONCURRENCY"),
    "poll_interval_ms": Refusal("it is Navree's idle wait, in milliseconds",
                                "sleep, in seconds (poll_interval_ms = 1000 is sleep = 1)",
                                "JOBBRIDGE_SLEEP"),
    "default_queue": Refusal(
        "it is Navree's queue for jobs that name none; here every job has a queue ('default' unless it "
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

_SQS_RESERVATION = Refusal("on sqs the reservation is the visibility timeout", "visibility_timeout")
_KAFKA_RESERVATION = Refusal("on kafka the reservation is the lease", "lease")

# Refused on one driver's connections.
BY_DRIVER: dict[str, dict[str, Refusal]] = {
    "sqs": {
        "prefix": GENERAL["suffix"]._replace(instead="queue_url, the whole URL"),
        "suffix": GENERAL["suffix"]._replace(instead="queue_url, the whole URL"),
        "url": Refusal("an sqs connection is given its queue's URL, not a server's", "queue_url"),
        "reservation": _SQS_RESERVATION,
        "retry_after": _SQS_RESERVATION,
    },
    "kafka": {
        "reservation": _KAFKA_RESERVATION,
        "retry_after": _KAFKA_RESERVATION,
        "prefix": Refusal("on kafka the prefix is the topics'", "topic_prefix"),
        "url": Refusal("a kafka connection is given its brokers, not one URL", "brokers (host:port, ...)"),
    },
    "redis": {
        "visibility_timeout": Refusal(
            "it is the Celery redis transport's name for the reservation", "reservation"),
    },
    "sync": {
        "reservation": Refusal("sync runs each job inline, so nothing is ever reserved", "nothing"),
    },
}


def driver_module(driver: str) -> drivers.DriverModule | None:
    """The driver's module if it can be imported and follows the convention, else None."""
    try:
        module = drivers.load(driver)
    except (ConfigurationError, ImportError):
        return None
    return module if hasattr(module, "SETTINGS") else None


def fields_for(driver: str) -> dict[str, Field]:
    """The keys a connection of this driver accepts: the table, plus any its module adds."""
    fields = dict(DRIVER_FIELDS[driver])
    module = driver_module(driver)
    for key in module.SETTINGS if module else ():
        fields.setdefault(key, ANY)
    return fields


def refusal_for(key: str, driver: str | None) -> Refusal | None:
    """Why ``key`` is refused on a connection of ``driver`` (None: at the top level), if it is.

    The driver module's own ``REFUSED`` comes first: it can say why for that driver in particular.
    """
    if driver is None:
        return TOP_LEVEL.get(key) or GENERAL.get(key)
    module = driver_module(driver)
    if module is not None and key in getattr(module, "REFUSED", {}):
        return Refusal(*module.REFUSED[key])
    return BY_DRIVER.get(driver, {}).get(key) or GENERAL.get(key)


def closest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate closest to ``word``, if one is close enough to be what was meant."""
    found = difflib.get_close_matches(word, list(candidates), n=1)
    return found[0] if found else None


def suggest(word: str, candidates: Iterable[str], shown: Callable[[str], str] = str) -> str:
    """``" (did you mean x?)"`` when a candidate is close to ``word``, else ``""``."""
    found = closest(word, candidates)
    return f" (did you mean {shown(found)}?)" if found else ""


def describe(field: Field) -> str:
    """What a field expects, in words, for an error message."""
    noun = {"str": "a non-empty string", "url": "a URL (scheme://...)", "int": "a whole number",
            "float": "a number of seconds", "bool": "true or false",
            "list": "a list of names (or one comma-separated string)", "any": "a value"}[field.kind]
    if field.empty_ok and field.kind == "str":
        noun = "a string"
    bounds = [f"at least {field.least:g}" if field.least is not None else "",
              f"greater than {field.above:g}" if field.above is not None else "",
              f"at most {field.most:g}" if field.most is not None else ""]
    limits = " and ".join(b for b in bounds if b)
    return f"{noun}, {limits}" if limits else noun


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _from_text(field: Field, text: str, label: str) -> Any:
    """An environment variable's string as the field's type."""
    raw = text.strip()
    try:
        if field.kind == "int":
            return int(raw)
        if field.kind == "float":
            return float(raw)
    except ValueError:
        raise ConfigurationError(f"{label} must be {describe(field)}, not {text!r}") from None
    if field.kind == "bool" and raw.lower() in _TRUE | _FALSE:
        return raw.lower() in _TRUE
    return text


def _number(field: Field, value: Any) -> bool:
    whole = isinstance(value, int) and not isinstance(value, bool)
    if field.kind == "int":
        return whole
    return whole or (isinstance(value, float) and math.isfinite(value))


def _in_bounds(field: Field, value: float) -> bool:
    return ((field.least is None or value >= field.least) and (field.above is None or value > field.above)
            and (field.most is None or value <= field.most))


def _as_list(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, str):
        value = value.split(",") if value.strip() else []
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
        return None
    items = tuple(item.strip() for item in value)
    return None if "" in items or len(set(items)) != len(items) else items


def _checked(field: Field, value: Any) -> tuple[bool, Any]:
    """(valid, normalised value) for a value already of Python type."""
    kind = field.kind
    if kind in ("int", "float"):
        ok = _number(field, value) and _in_bounds(field, value)
        return ok, (float(value) if kind == "float" and ok else value)
    if kind == "bool":
        return isinstance(value, bool), value
    if kind == "list":
        items = _as_list(value)
        return items is not None and (field.empty_ok or bool(items)), items
    if kind in ("str", "url"):
        ok = isinstance(value, str) and (field.empty_ok or bool(value.strip()))
        return ok and (kind == "str" or "://" in value), value
    return True, value


def coerce(field: Field, value: Any, label: str, text: bool = False) -> Any:
    """Check ``value`` against ``field`` (parsing it first when it came as text) and normalise it."""
    parsed = _from_text(field, value, label) if text and isinstance(value, str) else value
    ok, normalised = _checked(field, parsed)
    if not ok:
        raise ConfigurationError(f"{label} must be {describe(field)}, not {value!r}")
    return normalised


_NO_SECRET = Refusal(
    "a key and a secret sign requests together; with only one, boto3 quietly falls back to whatever "
    "credentials the machine has", "both key and secret, or neither (boto3's own credential chain)")
_NO_REGION = Refusal(
    "credentials with no region send requests to whatever region the machine defaults to",
    "region, the queue's own")
_NO_BROKERS = Refusal("a kafka connection with no brokers has nowhere to push",
                      "brokers, a list of host:port (or one comma-separated string)")


def cross_check(driver: str, options: Mapping[str, Any]) -> tuple[str, Refusal] | None:
    """The first combination of keys that would give a working-looking but wrong connection."""
    if driver == "sqs":
        for key, other in (("key", "secret"), ("secret", "key")):
            if key in options and other not in options:
                return key, _NO_SECRET
        if "key" in options and "region" not in options:
            return "key", _NO_REGION
    if driver == "kafka" and "brokers" in options and not options["brokers"]:
        return "brokers", _NO_BROKERS
    return None


_URL_SCHEMES = {("sqs", "queue_url"): ("https", "http", "sqs"), ("sqs", "endpoint"): ("https", "http")}
_STORE_KEYS = {"database": ("url",), "redis": ("url", "prefix"), "sqs": ("queue_url",),
               "kafka": ("brokers", "topic_prefix")}


def check_scheme(driver: str, key: str, url: str, label: str) -> None:
    """Refuse a URL whose scheme belongs to another driver: a connection to the wrong store."""
    scheme = url.split("://", 1)[0].split("+", 1)[0].lower()
    allowed = _URL_SCHEMES.get((driver, key)) or tuple(
        name for name, owner in drivers.SCHEMES.items() if owner == driver)
    if scheme not in allowed:
        raise ConfigurationError(
            f"{label} is {url!r}, but a {driver} connection takes a {' or '.join(s + '://' for s in allowed)} URL")


def absolute_sqlite(url: str, base: Path) -> str:
    """A relative SQLite path made absolute, so a worker and a web process started elsewhere agree."""
    head, sep, path = url.partition(":///")
    if not sep or head.split("+", 1)[0].lower() != "sqlite" or not path or \
            path.startswith(("/", ":memory:", "file:")):
        return url
    return f"{head}:///{os.path.abspath(base / path)}"


def check_distinct(connections: Mapping[str, ConnectionSettings]) -> None:
    """Refuse two names for one store: each would reserve the other's jobs."""
    seen: dict[tuple[Any, ...], str] = {}
    for conn in connections.values():
        keys = _STORE_KEYS.get(conn.driver)
        if keys is None:
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


def check_locks(connections: Mapping[str, ConnectionSettings]) -> None:
    """Kafka's ``locks`` must name another declared connection that every worker shares."""
    for conn in connections.values():
        target = conn.options.get("locks")
        if target is None:
            continue
        if target not in connections:
            raise UnknownConnection(
                f"locks in connection {conn.name!r} names {target!r}{suggest(target, connections)}, which "
                f"is not declared (declared: {', '.join(repr(n) for n in connections)})")
        if connections[target].driver not in LOCK_STORES:
            raise ConfigurationError(
                f"locks in connection {conn.name!r} names {target!r}, a {connections[target].driver} "
                "connection; the lock store must be shared by every worker and outlive them: a "
                f"{' or '.join(LOCK_STORES)} connection")
