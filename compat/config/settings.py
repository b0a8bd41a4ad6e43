"""``app.conf``: Celery's settings, each classified (compat/config/setting_table.py), and turned into jobbridge's.

What the code sets (``Celery(**settings)``, ``app.conf.x = ...``, ``conf.update(...)``) goes
through `Conf.set`, classified at once; ``config_from_object``'s source is kept and read when
used (compat/config/setting_sources.py), classified by `Conf.check` at the app's first use. A
name is the new one (``task_always_eager``), the old one (``CELERY_ALWAYS_EAGER``), or the
prefixed new one (``CELERY_TASK_ALWAYS_EAGER``; with a namespace, only those starting with it).
An unknown name is an error with the closest spelling; a refused one says what to write instead.
A bulk source also holds the host framework's names (Django's ``DEBUG``): those are left alone.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from typing import Any

from jobbridge import settings as core_settings
from jobbridge.redaction import quoted
from jobbridge.settings import Settings

from ..exceptions import ImproperlyConfigured, QueueNotFound, RefusedFeature
from ..ports import ConfPort
from . import backends, broker_connection, brokers, wire
from .setting_sources import FROM_ENVIRONMENT, Source, environment_value, refuse_a_second_broker
from .setting_sources import load_object as load_object  # where the facade finds it
from .setting_table import NEW_NAMES, OLD_NAMES, RULES

DEFAULTS: dict[str, Any] = {
    "broker_url": None, "broker_transport_options": {}, "task_always_eager": False,
    "task_eager_propagates": False, "task_default_queue": "celery", "task_queues": None, "task_routes": None,
    "task_create_missing_queues": True, "task_time_limit": None, "task_soft_time_limit": None,
    "timezone": None, "enable_utc": True, "imports": (), "include": (), "worker_concurrency": None,
    "task_serializer": "json", "result_serializer": "json", "accept_content": ("json",),
    "task_acks_late": False, "task_ignore_result": False, "result_backend": None,
    "task_track_started": False, "task_default_rate_limit": None, "worker_prefetch_multiplier": 4,
    "result_expires": timedelta(days=1), "database_url": None, "task_store_errors_even_if_ignored": False,
    "task_store_eager_result": False, "result_extended": False, "worker_deduplicate_successful_tasks": False,
    "task_allow_error_cb_on_chord_header": False,
}
# Settings whose change after the jobbridge app was built means it must be built again.
BACKEND_KEYS = frozenset({"broker_url", "broker_transport_options", "worker_concurrency", "task_queues",
                          "task_default_queue", "result_backend", "result_expires", "database_url",
                          "task_ignore_result", "task_track_started", "broker_connection_timeout",
                          "jobbridge_wire", *broker_connection.NAMES})
_CELERY_LOOKING = ("CELERY", "BROKER_")


def _unknown(key: str, candidates: list[str], hint: str = "") -> ImproperlyConfigured:
    close = difflib.get_close_matches(key, candidates, n=1, cutoff=0.75)
    suggestion = f" (did you mean {close[0]!r}?)" if close else ""
    return ImproperlyConfigured(
        f"{key!r} is not a Celery setting{suggestion}{hint}; an unknown setting is an error on jobbridge, "
        "never silently ignored (docs/compat.md lists every setting)")


def resolve(key: str) -> str:
    """The new name of a setting given by its new or old name; an unknown name is an error."""
    if key in RULES:
        return key
    if key in OLD_NAMES:
        return OLD_NAMES[key]
    if key.startswith("CELERY_") and key[7:].lower() in RULES and key[7:].isupper():
        return key[7:].lower()  # the namespaced spelling, as Flask apps put it in app.config
    hint = ""
    if key.lower() in RULES:
        hint = f"; the setting is spelled {key.lower()!r} (or {NEW_NAMES[key.lower()]!r} in the old style)"
    raise _unknown(key, [*RULES, *OLD_NAMES, *(f"CELERY_{name.upper()}" for name in RULES)], hint)


def resolve_in_bulk(key: str, namespace: str | None) -> str | None:
    """Like `resolve`, for a name found in a bulk source; None when the name is the host framework's."""
    if namespace:
        return _namespaced(key, namespace)
    if key in RULES or key in OLD_NAMES:
        return resolve(key)
    if key.startswith("_") or not (key.islower() or key.upper().startswith(_CELERY_LOOKING)):
        return None
    return resolve(key)


def _namespaced(key: str, namespace: str) -> str | None:
    prefix = namespace.rstrip("_").upper() + "_"
    if not key.upper().startswith(prefix):
        if key in OLD_NAMES or key.startswith(("CELERYD_", "CELERYBEAT_", "BROKER_")):
            new = OLD_NAMES.get(key)
            instead = f"{prefix}{new.upper()}" if new else f"{prefix}<setting name in upper case>"
            raise ImproperlyConfigured(
                f"{key!r} is read with namespace {namespace!r}, where settings are {prefix}<name>: write "
                f"{instead!r} (Celery would ignore {key!r} here without a word)")
        return None
    rest = key[len(prefix):].lower()
    if rest in RULES:
        return rest
    hint = ""
    if key in OLD_NAMES:
        new = OLD_NAMES[key]
        hint = (f"; {key!r} is the old name of {new!r}, and with namespace {namespace!r} it is spelled "
                f"{prefix}{new.upper()!r} (Celery would ignore it without a word)")
    raise _unknown(key, [prefix + name.upper() for name in RULES], hint)


class Conf:
    """The app's settings: attribute and item access by new or old name, defaults as Celery's.

    A value the code sets (``Celery(**settings)``, ``app.conf.x = ...``, ``conf.update``) is
    classified when it is set. The source of ``config_from_object`` is kept and read at each
    lookup (compat/config/setting_sources.py), and classified by `check` when the app is first
    used for work (the worker's start, the first dispatch, ``app.tasks``), and at each read after.
    """

    _data: dict[str, Any]
    _on_change: Callable[[str], None] | None
    _namespace: str | None
    _source: Source | None
    _env_source: Source | None
    _checked: bool

    def __init__(self, on_change: Callable[[str], None] | None = None, namespace: str | None = None) -> None:
        object.__setattr__(self, "_data", {})
        object.__setattr__(self, "_on_change", on_change)
        object.__setattr__(self, "_namespace", namespace)
        object.__setattr__(self, "_source", None)
        object.__setattr__(self, "_env_source", None)
        object.__setattr__(self, "_checked", False)

    # -- writing -----------------------------------------------------------------------------

    def set(self, key: str, value: Any, new: str | None = None) -> None:
        """Classify and store one setting; a refused value raises `RefusedFeature` naming it."""
        name = new or resolve(key)
        _classify(key, name, value, overridden=environment_value(name) is not None)
        self._data[name] = value
        if self._on_change is not None:
            self._on_change(name)

    def use_source(self, obj: Any, namespace: str | None = None, silent: bool = False) -> None:
        """``config_from_object``: keep ``obj`` (imported and read when used), in place of an earlier one."""
        object.__setattr__(self, "_source", Source(obj, namespace, silent))
        object.__setattr__(self, "_checked", False)
        if self._on_change is not None:
            for name in sorted(BACKEND_KEYS):
                self._on_change(name)

    def update(self, *mappings: Any, **kwargs: Any) -> None:
        """Set many: a positional mapping is a bulk source (foreign names left alone); keywords are strict."""
        for mapping in mappings:
            self.load(mapping)
        for key, value in kwargs.items():
            self.set(key, value)

    def load(self, source: Any, namespace: str | None = None) -> None:
        """Set, now, every setting a bulk source (mapping, module, class or object) holds."""
        for key, value in Source(source, namespace).entries():
            new = resolve_in_bulk(key, namespace)
            if new is not None:
                self.set(key, value, new)

    def setdefault(self, key: str, value: Any) -> Any:
        name = resolve(key)
        if not self.value_set_for(name):
            self.set(key, value, name)
        return self[name]

    def __setattr__(self, key: str, value: Any) -> None:
        self.set(key, value)

    def __setitem__(self, key: str, value: Any) -> None:
        self.set(key, value)

    # -- checking ----------------------------------------------------------------------------

    def check(self) -> None:
        """Classify what the source and the environment set, once: the app is about to be used for work.

        Only what is used is refused: a source value the code's own value (or the
        environment) overrides is not, nor a code URL ``CELERY_BROKER_URL`` replaces.
        """
        if self._checked:
            return
        source = self._current_source()
        if source is not None:
            for key, value in source.entries():
                name = resolve_in_bulk(key, source.namespace)
                if name is not None and self._held(source, name) == key:
                    _classify(key, name, value, overridden=environment_value(name) is not None)
        for name in FROM_ENVIRONMENT:  # the environment's URLs, used: checked as set ones are
            if environment_value(name) is not None:
                _check_value(name, environment_value(name))
        refuse_a_second_broker(self["broker_url"])
        object.__setattr__(self, "_checked", True)

    def _current_source(self) -> Source | None:
        """``config_from_object``'s source; without one, the module CELERY_CONFIG_MODULE names, as in Celery."""
        if self._source is not None:
            return self._source
        module = os.environ.get("CELERY_CONFIG_MODULE")
        if not module:
            return None
        if self._env_source is None or self._env_source.given != module:
            object.__setattr__(self, "_env_source", Source(module, self._namespace))
        return self._env_source

    def _held(self, source: Source, name: str) -> str | None:
        """The source's key that gives ``name`` its value, or None when the source does not decide it."""
        if not source.namespace and name in self._data:
            return None  # the code's value wins over the source's, without a namespace
        found = source.lookup(name)
        return None if found is None else found[0]

    # -- reading -----------------------------------------------------------------------------

    def __getattr__(self, key: str) -> Any:
        if key.startswith("_"):
            raise AttributeError(key)
        try:
            return self[key]
        except ImproperlyConfigured as exc:
            raise AttributeError(str(exc)) from None

    def __getitem__(self, key: str) -> Any:
        name = resolve(key)
        from_env = environment_value(name)
        if from_env is not None:
            return from_env  # Celery lets the environment override these URLs
        source = self._current_source()
        if source is not None and self._held(source, name) is not None:
            found = source.lookup(name)
            if found is not None:
                if self._checked:  # in use: a value changed at run time is classified as it is read
                    _classify(found[0], name, found[1])
                return found[1]
        return self._data.get(name, DEFAULTS.get(name))

    def get(self, key: str, default: Any = None) -> Any:
        try:
            name = resolve(key)
        except ImproperlyConfigured:
            return default
        return self[name] if name in DEFAULTS or self.value_set_for(name) else default

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and (key in RULES or key in OLD_NAMES)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def _names(self) -> list[str]:
        """The settings given a value, by the code or by the source."""
        names = dict.fromkeys(self._data)
        source = self._current_source() or Source({}, None)
        for key, _ in source.entries():
            try:
                name = resolve_in_bulk(key, source.namespace)
            except ImproperlyConfigured:
                continue  # check() says so when the app is used
            if name is not None:
                names[name] = None
        return list(names)

    def keys(self) -> list[str]:
        return self._names()

    def items(self) -> list[tuple[str, Any]]:
        return [(k, self[k]) for k in self._names()]

    def table(self, with_defaults: bool = False) -> dict[str, Any]:
        return {**(DEFAULTS if with_defaults else {}), **dict(self.items())}

    def humanize(self, with_defaults: bool = False) -> str:
        """Every setting as ``name: value``; credentials masked, as this is printed and logged."""
        return "\n".join(f"{k}: {quoted(v, k)}" for k, v in sorted(self.table(with_defaults).items()))

    def value_set_for(self, key: str) -> bool:
        name = resolve(key)
        source = self._current_source()
        return name in self._data or (source is not None and source.lookup(name) is not None)

    @property
    def broker_url(self) -> Any:
        return self["broker_url"]


def _classify(key: str, name: str, value: Any, overridden: bool = False) -> None:
    """Refuse a value jobbridge cannot honour, saying what to write; ``overridden``: a URL not used."""
    rule = RULES[name]
    if rule.refuses(value):
        shown = key if key == name else f"{key} ({name})"
        raise RefusedFeature(f"Celery setting {shown} = {quoted(value, name)} is refused: {rule.why}. "
                             f"Write instead: {rule.instead}")
    if not overridden:
        _check_value(name, value)


def _check_value(name: str, value: Any) -> None:
    if name == "broker_url" and value is not None:
        brokers.check_url(value)
    elif name == "result_backend" and value and str(value).lower() not in ("database", "db"):
        backends.results_url(value)
    elif name == "result_expires":
        backends.ttl(value)
    elif name in ("task_time_limit", "task_soft_time_limit", "worker_concurrency",
                  "broker_connection_timeout") and value is not None:
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ImproperlyConfigured(f"{name} must be a positive number, not {value!r}")
    elif name == "task_default_queue" and (not isinstance(value, str) or not value):
        raise ImproperlyConfigured(f"task_default_queue must be a queue name, not {value!r}")


# -- to jobbridge ---------------------------------------------------------------------------------

def queue_names(conf: ConfPort) -> list[str]:
    """What a worker processes by default: the task_queues names, else the default queue."""
    declared = conf["task_queues"]
    if declared:
        return [getattr(q, "name", q) for q in declared]
    return [conf["task_default_queue"]]


def jobbridge_settings(conf: Conf, environ: Mapping[str, str] | None = None) -> Settings:
    """The jobbridge `Settings` for this app: a jobbridge.toml as the base, then the Celery settings,
    then ``JOBBRIDGE_*`` variables. A layer that selects another driver replaces the lower layers'
    backend settings (``JOBBRIDGE_DATABASE_URL`` over a redis broker_url); one that configures the same
    driver adds to them (``JOBBRIDGE_REDIS_PREFIX`` with a redis broker_url)."""
    env = os.environ if environ is None else environ
    found = core_settings.discover()
    layers: list[dict[str, Any]] = [dict(core_settings.read_file(found)) if found else {}]
    celery: dict[str, Any] = {"queues": queue_names(conf)}
    url = conf["broker_url"]
    if url:
        # only a timeout the app set: unset, each driver keeps its own default (docs/configuration.md)
        timeout = conf["broker_connection_timeout"] if conf.value_set_for("broker_connection_timeout") else None
        shared = backends.results_url(conf["result_backend"], conf["database_url"]) if results_enabled(conf) else None
        if wire.speaks_celery(conf["jobbridge_wire"]):  # Celery's own messages, beside a Celery fleet
            given = broker_connection.given(conf)
            broker_connection.refused_elsewhere(given, "celery_wire")
            celery.update(wire.backend(url, conf["broker_transport_options"], shared, timeout))
            celery.update(broker_connection.start_retries(given))
        else:
            celery.update(brokers.jobbridge_backend(url, conf["broker_transport_options"], timeout, shared,
                                                    broker_connection.given(conf)))
    else:  # jobbridge's own store (a SQLite file, or what jobbridge.toml names): no AMQP connection to configure
        broker_connection.refused_elsewhere(broker_connection.given(conf), "default")
        celery.update(broker_connection.start_retries(broker_connection.given(conf)))
    if conf["worker_concurrency"]:
        celery["concurrency"] = int(conf["worker_concurrency"])
    celery.update(_results(conf, celery))
    layers.append(celery)
    layers.append(core_settings.read_environment(env))
    merged: dict[str, Any] = {}
    for layer in layers:
        named = _driver_named(layer)
        if "connections" in layer or (named is not None and named != _driver_named(merged)):
            merged = {k: v for k, v in merged.items() if not _is_backend_key(k)}
        merged.update(layer)
    names = ([str(found)] if found else []) + ["the Celery app's settings"]
    if core_settings.read_environment(env):
        names.append("the environment")
    return Settings.from_mapping(merged, source=" + ".join(names))


def results_enabled(conf: ConfPort) -> bool:
    """Whether the app has a result backend: tasks then store their results, as in Celery."""
    return bool(conf["result_backend"])


def _results(conf: Conf, backend: Mapping[str, Any]) -> dict[str, Any]:
    """``results`` and ``result_ttl``; ``results`` stays unset when it names the broker's own store."""
    out: dict[str, Any] = {}
    if conf.value_set_for("result_expires"):
        out["result_ttl"] = backends.ttl(conf["result_expires"])
    if not results_enabled(conf):
        return out
    url = backends.results_url(conf["result_backend"], conf["database_url"])
    if wire.speaks_celery(conf["jobbridge_wire"]):
        return {**out, "results": wire.results_url(url)}
    driver = backend.get("driver")
    same = (url == "memory://" and driver == "memory") or url in (backend.get("redis_url"),
                                                                  backend.get("database_url"))
    if not same:
        out["results"] = url
    return out


def _is_backend_key(key: str) -> bool:
    return key in ("driver", "connections") or key in core_settings.DRIVER_KEYS


def _driver_named(layer: Mapping[str, Any]) -> str | None:
    """The driver a layer selects: its ``driver``, else the one driver its keys configure."""
    if "driver" in layer:
        return str(layer["driver"])
    owners = {core_settings.DRIVER_KEYS[k][0] for k in layer if k in core_settings.DRIVER_KEYS}
    return owners.pop() if len(owners) == 1 else None


def check_queue(conf: ConfPort, queue: str) -> None:
    """With task_create_missing_queues off, a queue must be declared in task_queues."""
    if conf["task_create_missing_queues"] is False and queue not in queue_names(conf):
        raise QueueNotFound(f"Queue {queue!r} missing from task_queues")
