"""``Celery``: the app a Celery project makes, on jobbridge.

``Celery("proj", broker=..., include=[...], **settings)`` keeps Celery's settings
(compat/config/settings.py), its tasks, and builds one `JobBridge` from them on first
use (`jobbridge_app`), which is also how ``jobbridge worker -A proj`` finds it.
Every task is registered there as a job named after the task.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from jobbridge import JobBridge
from jobbridge.execution import Middleware
from jobbridge.integrations import django_installed_apps

from . import pydantic_args, shared
from .canvas import builtins
from .canvas.signature import Signature
from .config import settings
from .config.setting_table import EVENT_SETTINGS
from .config.task_options import check_task_options
from .exceptions import ImproperlyConfigured, RefusedFeature
from .request import add_child, current_task
from .results.asyncresult import AsyncResult
from .results.backend import ResultBackend
from .results.control import Control
from .results.groupresult import GroupResult, bound_group_result
from .running import beat, calling, lifecycle, runner
from .signals import Signal, import_modules
from .task import Task, make_task

log = logging.getLogger("jobbridge.compat")


def _not_available(what: str, instead: str) -> Any:
    def refuse(self: Celery, *args: Any, **kwargs: Any) -> Any:
        raise RefusedFeature(f"app.{what} is not available on jobbridge: {instead}")

    return property(refuse) if not what.endswith("()") else refuse


class Celery:
    """A Celery app backed by jobbridge; see the module docstring."""

    def __init__(self, main: str | None = None, loader: Any = None, backend: Any = None, amqp: Any = None,
                 events: Any = None, log: Any = None, control: Any = None, set_as_current: bool = True,
                 tasks: Any = None, broker: str | None = None, include: Sequence[str] | None = None,
                 changes: Mapping[str, Any] | None = None, config_source: Any = None, fixups: Any = None,
                 task_cls: Any = None, autofinalize: bool = True, namespace: str | None = None,
                 strict_typing: bool = True, **kwargs: Any) -> None:
        for name, value in (("loader", loader), ("amqp", amqp), ("events", events), ("log", log),
                            ("control", control), ("tasks", tasks), ("fixups", fixups)):
            if value is not None:
                raise RefusedFeature(f"Celery({name}=...) is refused: jobbridge provides its own {name}")
        self.main = main
        self.namespace = namespace
        self.strict_typing = strict_typing
        self.autofinalize = autofinalize
        self._lock = threading.RLock()
        self._tasks: dict[str, Task] = {}
        self._jobs: dict[str, type] = {}
        self._bridge: JobBridge | None = None
        self._bridge_kwargs: dict[str, Any] = {}
        self._middleware: list[Middleware] = []
        self._pending_packages: list[tuple[Any, str]] = []
        self._periodic: dict[str, dict[str, Any]] = {}
        self._finalized = False
        self._task_base: type[Task] | None = None
        self._task_cls: Any = task_cls or Task
        self.backend, self.control = ResultBackend(self), Control(self)
        self.conf = settings.Conf(self._conf_changed, namespace)
        self.on_configure = Signal("on_configure", propagate=True)
        self.on_after_configure = Signal("on_after_configure", propagate=True)
        self.on_after_finalize = Signal("on_after_finalize", propagate=True)
        self.on_after_fork = Signal("on_after_fork", propagate=True)
        self._configure(broker, backend, include, changes, config_source, kwargs)
        shared.register_app(self, set_as_current)

    def _configure(self, broker: str | None, backend: Any, include: Sequence[str] | None,
                   changes: Mapping[str, Any] | None, config_source: Any, kwargs: Mapping[str, Any]) -> None:
        """The settings the constructor was given, in Celery's order: its own arguments, then the rest."""
        if broker is not None:
            self.conf.set("broker_url", broker)
        if backend is not None:
            self.conf.set("result_backend", backend)
        if include:
            self.conf.set("include", tuple(include))
        self.conf.update(changes or {}, **kwargs)
        if config_source is not None:
            self.config_from_object(config_source)

    def __repr__(self) -> str:
        return f"<Celery {self.main or '__main__'} at {id(self):#x} (jobbridge)>"

    # -- configuration -----------------------------------------------------------------------

    def config_from_object(self, obj: Any, silent: bool = False, force: bool = False,
                           namespace: str | None = None) -> None:
        """Take settings from an object, module or mapping (or its dotted path), read when used, as Celery does.

        Nothing is imported or classified here: a project's ``celery.py`` runs while Django
        imports its settings, and a refused setting must not break that import. `Conf.check`
        classifies the source when the app is first used for work (compat/config/setting_sources.py).
        """
        if namespace is not None:
            self.namespace = namespace
        self.conf.use_source(obj, self.namespace, silent)

    def config_from_envvar(self, variable_name: str, silent: bool = False, force: bool = False) -> None:
        module = os.environ.get(variable_name)
        if not module:
            if silent:
                return
            raise ImproperlyConfigured(f"the environment variable {variable_name!r} is not set; it should name "
                                       "the module holding the Celery settings")
        self.config_from_object(module, silent=silent, force=force)

    def _conf_changed(self, name: str) -> None:
        if name in settings.BACKEND_KEYS and self._bridge is not None:
            with self._lock:
                old, self._bridge = self._bridge, None
            if old is not None:
                old.close()

    # -- tasks -------------------------------------------------------------------------------

    def task(self, *args: Any, **options: Any) -> Any:
        """``@app.task``, ``@app.task(...)`` and ``app.task(fun, ...)``: the function as a Task."""
        if len(args) == 1 and callable(args[0]):
            return self.task_from_fun(args[0], **options)
        if args:
            raise TypeError("app.task() takes the function alone, or keyword options only")

        def decorate(fun: Callable[..., Any]) -> Any:
            return self.task_from_fun(fun, **options)

        return decorate

    def gen_task_name(self, name: str, module: str | None) -> str:
        """Celery's default task name: ``module.function`` (``main.function`` for ``__main__``)."""
        module = module or "__main__"
        if module == "__main__" and self.main:
            return f"{self.main}.{name}"
        return ".".join(p for p in (module, name) if p)

    def task_from_fun(self, fun: Callable[..., Any], name: str | None = None, base: Any = None,
                      bind: bool = False, **options: Any) -> Task:
        """The task of ``fun`` under ``name`` (the one already registered under it, if any)."""
        name = name or self.gen_task_name(fun.__name__, fun.__module__)
        with self._lock:
            if name in self._tasks:
                return self._tasks[name]
            check_task_options(name, options)
            base_cls = settings.load_object(base) if base is not None else self.Task
            fun = pydantic_args.wrap(self, fun, name, options)
            return self.register_task(make_task(base_cls, self, name, fun, bind, options))

    _task_from_fun = task_from_fun  # Celery's own name for it, which some Celery code calls

    def register_task(self, task: Task | type[Task], **options: Any) -> Task:
        """Add a task (a class-based one too); it becomes a jobbridge job named after it."""
        if isinstance(task, type):
            task = task()
        name = getattr(task, "name", None) or self.gen_task_name(type(task).__name__, type(task).__module__)
        cls = type(task)
        if getattr(cls, "name", None) != name:
            cls.name = name
        if not hasattr(cls, "app") or cls.app is not self:
            cls.app = self
        with self._lock:
            self._tasks[name] = task
            if name in self._jobs:  # a new instance under a registered name replaces it, as in Celery
                runner.rebind(self._jobs[name], task)
                return task
            job = self._jobs[name] = runner.job_class(task)
            if self._bridge is not None:
                self._bridge.register(job)
        return task

    @property
    def tasks(self) -> dict[str, Task]:
        """The registered tasks by name (modules from include/imports/autodiscover imported first)."""
        self._finalize()
        return self._tasks

    @property
    def Task(self) -> type[Task]:
        """The base class of this app's tasks (``task_cls``), for ``class MyTask(app.Task)``."""
        if self._task_base is None:
            base = settings.load_object(self._task_cls)
            self._task_base = type("Task", (base,), {"app": self, "abstract": True, "__module__": base.__module__})
        return self._task_base

    @Task.setter
    def Task(self, base: Any) -> None:
        """``app.Task = MyBase`` (Flask's ContextTask pattern): the base of tasks made from now on."""
        self._task_cls = base
        self._task_base = None

    def autodiscover_tasks(self, packages: Iterable[str] | Callable[[], Iterable[str]] | None = None,
                           related_name: str = "tasks", force: bool = False) -> None:
        """Import ``<package>.<related_name>`` for each package (Django's installed apps by default).

        As in Celery, nothing is imported until the app is finalized (``jobbridge worker -A``,
        ``app.tasks``, the first publish); Django is set up then if it was not.
        """
        self._pending_packages.append((packages, related_name))
        if force or self._finalized:
            self._discover()

    def _discover(self) -> None:
        while self._pending_packages:
            packages, related = self._pending_packages.pop(0)
            found = packages() if callable(packages) else packages
            for package in django_installed_apps() if found is None else found:
                _import_related(package, related)

    def finalize(self, auto: bool = False) -> None:
        self._finalize()

    @property
    def finalized(self) -> bool:
        """Whether the app was finalized: its shared tasks made, its modules imported (Celery's flag)."""
        return self._finalized

    def _finalize(self) -> None:
        with self._lock:
            if self._finalized:
                return
            self._finalized = True
            try:
                self.conf.check()  # the first use for work: what the settings ask is refused now, or never
                builtins.register(self)
                shared.announce_finalized(self)  # the shared tasks made so far (later ones come as made)
                self.on_configure.send(sender=self)
                self.on_after_configure.send(sender=self, source=self.conf)
                for module in (*self.conf["imports"], *self.conf["include"]):
                    importlib.import_module(module)
                self._discover()
            except BaseException:
                self._finalized = False  # the next use fails the same way, never half-loaded
                raise
        self.on_after_finalize.send(sender=self)
        import_modules.send(sender=self)

    # -- calling -----------------------------------------------------------------------------

    def send_task(self, name: str, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                  countdown: float | None = None, eta: Any = None, task_id: str | None = None,
                  **options: Any) -> AsyncResult:
        """Publish a task by name (it need not be registered here); as in Celery, never run eagerly."""
        if self.conf["task_always_eager"]:
            calling.warn_eager_send_task(name)
        for key, value in (("countdown", countdown), ("eta", eta), ("task_id", task_id)):
            if value is not None:
                options[key] = value
        options.pop("route_name", None)
        task = self._tasks.get(name)
        result = AsyncResult(calling.publish(self, name, args, kwargs, options, task=task), app=self, task_name=name)
        result.ignored = bool(options.get("ignore_result"))  # as Celery's: get() is None at once, nothing is kept
        if options.get("add_to_parent", True):
            add_child(result)  # one of the running task's children, as Celery's send_task adds it
        return result

    def signature(self, *args: Any, **kwargs: Any) -> Signature:
        kwargs["app"] = self
        return Signature(*args, **kwargs)

    def AsyncResult(self, id: str, **kwargs: Any) -> AsyncResult:
        return AsyncResult(id, app=self, task_name=kwargs.get("task_name"), parent=kwargs.get("parent"))

    @property
    def GroupResult(self) -> type[GroupResult]:
        """``GroupResult`` bound to this app: ``app.GroupResult(id, results)``, ``app.GroupResult.restore(id)``."""
        return bound_group_result(self)

    def now(self) -> datetime:
        return datetime.now(UTC).astimezone(calling.zone(self))

    # -- jobbridge ---------------------------------------------------------------------------

    def jobbridge_app(self) -> JobBridge:
        """The JobBridge of this app (built once, from its settings), which the worker runs."""
        with self._lock:
            if self._bridge is None:
                self._finalize()
                built = JobBridge(settings.jobbridge_settings(self.conf),
                                  middleware=[runner.middleware, *self._middleware], **self._bridge_kwargs)
                # made again from the settings as they are now (whether results are kept, ...)
                self._jobs = {name: runner.job_class(task) for name, task in self._tasks.items()}
                built.register(*self._jobs.values())
                lifecycle.adopt(built, self)
                beat.declare(self, built, dict(self._periodic), with_settings=True)
                self._bridge = built
            return self._bridge

    def jobbridge_event_settings(self) -> list[str]:
        """The Celery event settings this app turns on, which the worker names in one warning at its start."""
        return [name for name in EVENT_SETTINGS if self.conf[name]]

    def jobbridge_options(self, *, middleware: Sequence[Middleware] = (), **kwargs: Any) -> None:
        """What the JobBridge is built with besides settings: ``clock``, ``container``, ``drivers``, middleware."""
        with self._lock:
            self._bridge_kwargs.update(kwargs)
            self._middleware = list(middleware)
            if self._bridge is not None:
                old, self._bridge = self._bridge, None
                old.close()

    def close(self) -> None:
        with self._lock:
            if self._bridge is not None:
                self._bridge.close()
                self._bridge = None

    def set_current(self) -> None:
        shared.set_current(self)

    def set_default(self) -> None:
        shared.set_current(self)

    @property
    def current_task(self) -> Any:
        return current_task()

    def add_periodic_task(self, schedule: Any, sig: Any, args: Sequence[Any] = (), kwargs: Any = (),
                          name: str | None = None, **opts: Any) -> str:
        """A periodic entry for ``sig`` (a signature, or a task); its key, ``name`` else ``repr`` of the call.

        The key is Celery's (``proj.tasks.add(2, 2)``), so every process computes the same
        one, and it is the entry's name in the store. Called from ``on_after_configure`` or
        ``on_after_finalize`` receivers, as Celery projects do, or at any time after.
        """
        key, entry = beat.periodic_entry(schedule, sig, args, kwargs, name, opts)
        with self._lock:
            if name is None and key in self._periodic:
                log.warning("periodic task key=%r shadowed a previous unnamed periodic task; pass name= to "
                            "add_periodic_task to keep both", key)
            self._periodic[key] = entry
            bridge = self._bridge
        if bridge is not None:  # added after the JobBridge was built: it fires too
            beat.declare(self, bridge, {key: entry})
        return key

    events = _not_available("events", "workers send no Celery events; react to tasks with the signals")
    pool = _not_available("pool", "the store's connection is the driver's own")
    user_options = _not_available("user_options", "the jobbridge CLI takes no user options")
    steps = _not_available("steps", "the jobbridge worker has no bootsteps")
    connection = _not_available("connection()", "the store's connection is the driver's own")
    connection_for_write = _not_available("connection_for_write()", "the store's connection is the driver's own")
    connection_for_read = _not_available("connection_for_read()", "the store's connection is the driver's own")
    producer_or_acquire = _not_available("producer_or_acquire()", "publish with task.delay() or send_task()")
    worker_main = _not_available("worker_main()", "run jobbridge worker -A <module>")
    start = _not_available("start()", "run jobbridge worker -A <module>")


def _import_related(package: str, related: str) -> None:
    """Import ``package.related`` if it exists; an error inside an existing module is raised."""
    name = f"{package}.{related}" if related else package
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise


shared.set_default_maker(lambda: Celery("default", set_as_current=True))

__all__ = ["Celery"]
