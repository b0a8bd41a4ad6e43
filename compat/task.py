"""Celery's ``Task``: the class every ``@app.task`` function becomes an instance of.

A task is called three ways, as in Celery: directly (``add(2, 2)``, ``add.run(2, 2)``:
the function runs here, ``self.request.called_directly`` is True); eagerly
(``add.apply(...)``, or ``delay`` with ``task_always_eager``: traced inline, returning
an ``EagerResult``); and through a worker (``delay`` / ``apply_async``: published as a
jobbridge job). ``delay`` is a plain method looked up on the task object, so
``mock.patch("proj.tasks.add.delay")`` works.
"""

from __future__ import annotations

import functools
import inspect
import logging
import socket
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from jobbridge.envelope import new_id
from jobbridge.integrations import django_in_use, django_on_commit

from . import codec, states
from .canvas.maps import chunks, xmap, xstarmap
from .canvas.signature import Signature
from .exceptions import ImproperlyConfigured, MaxRetriesExceededError, NotRegistered, RefusedFeature, Retry
from .ports import AppPort, TaskPort
from .request import Request as Context
from .request import RequestStack, add_child, task_stack
from .results.asyncresult import AsyncResult, EagerResult
from .running import calling, eager
from .running.recording import ignores_result
from .running.runner import send_retry
from .running.tracing import trace

log = logging.getLogger("jobbridge.compat.task")


class Task:
    """A Celery task: options as class attributes (set by the decorator), ``run`` the function."""

    app: ClassVar[AppPort]
    name: ClassVar[str]
    typing: ClassVar[bool | None] = None
    max_retries: ClassVar[int | None] = 3
    default_retry_delay: ClassVar[float] = 3 * 60
    rate_limit: ClassVar[str | None] = None
    ignore_result: ClassVar[bool | None] = None
    store_errors_even_if_ignored: ClassVar[bool | None] = None
    serializer: ClassVar[str | None] = None
    time_limit: ClassVar[float | None] = None
    soft_time_limit: ClassVar[float | None] = None
    autoretry_for: ClassVar[Sequence[type[BaseException]]] = ()
    dont_autoretry_for: ClassVar[Sequence[type[BaseException]]] = ()
    retry_kwargs: ClassVar[Mapping[str, Any]] = {}
    retry_backoff: ClassVar[bool | int | float] = False
    retry_backoff_max: ClassVar[int] = 600
    retry_jitter: ClassVar[bool] = True
    acks_late: ClassVar[bool | None] = None
    acks_on_failure_or_timeout: ClassVar[bool | None] = None
    reject_on_worker_lost: ClassVar[bool | None] = None
    track_started: ClassVar[bool | None] = None
    queue: ClassVar[str | None] = None
    priority: ClassVar[int | None] = None
    expires: ClassVar[Any] = None
    abstract: ClassVar[bool] = True
    _bind: ClassVar[bool] = False
    _fun: ClassVar[Callable[..., Any] | None] = None

    MaxRetriesExceededError = MaxRetriesExceededError
    Request = Context

    def __init__(self) -> None:
        self.request_stack = RequestStack()
        self._default_request = Context()

    # -- the body ----------------------------------------------------------------------------

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """The task's body; for a decorated function, the function (with ``self`` when bind=True)."""
        fun = type(self)._fun
        if fun is None:
            raise NotImplementedError("Tasks must define the run method.")
        return fun(self, *args, **kwargs) if type(self)._bind else fun(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the body here, now (``called_directly`` unless a worker or apply() is running it)."""
        task_stack().append(self)
        current = self.request_stack.top
        self.request_stack.push(Context({**(current.as_dict() if current else {}), "args": args,
                                         "kwargs": kwargs}))
        try:
            return self.run(*args, **kwargs)
        finally:
            self.request_stack.pop()
            task_stack().pop()

    def jobbridge_body(self) -> Callable[..., Any]:
        """What a worker and ``apply()`` call: a base class's own ``__call__`` when it has one, else ``run``.

        Flask's ContextTask pattern overrides ``__call__`` to wrap every run (in an app context,
        say); Celery's tracer honours it the same way.
        """
        return self if type(self).__call__ is not Task.__call__ else self.run

    @property
    def request(self) -> Context:
        return self.request_stack.top or self._default_request

    def push_request(self, *args: Any, **kwargs: Any) -> None:
        self.request_stack.push(Context({**self.request.as_dict(), **dict(*args, **kwargs)}))

    def pop_request(self) -> None:
        self.request_stack.pop()

    def positional_names(self) -> tuple[str, ...]:
        """The names of the body's positional parameters (``self`` excluded), for error messages."""
        try:
            params = list(inspect.signature(self.run).parameters.values())
        except (TypeError, ValueError):
            return ()
        return tuple(p.name for p in params
                     if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD))

    def check_arguments(self, *args: Any, **kwargs: Any) -> None:
        """Raise TypeError now for a call the body could not take, as Celery's typing=True does."""
        typing = self.typing if self.typing is not None else self.app.strict_typing
        if not typing:
            return
        try:
            signature = inspect.signature(self.run)
        except (TypeError, ValueError):
            return
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.name}() {exc}") from None

    # -- calling -----------------------------------------------------------------------------

    def delay(self, *args: Any, **kwargs: Any) -> AsyncResult:
        """``apply_async(args, kwargs)``."""
        return self.apply_async(args, kwargs)

    def apply_async(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                    task_id: str | None = None, producer: Any = None, link: Any = None,
                    link_error: Any = None, shadow: str | None = None, **options: Any) -> AsyncResult:
        """Publish the task (or run it inline under task_always_eager); an AsyncResult with its id."""
        if args is not None and not isinstance(args, list | tuple):
            raise TypeError(f"{self.name}.apply_async(): args must be a list or tuple, not {type(args).__name__}")
        if kwargs is not None and not isinstance(kwargs, Mapping):
            raise TypeError(f"{self.name}.apply_async(): kwargs must be a mapping, not {type(kwargs).__name__}")
        args, kwargs = tuple(args or ()), dict(kwargs or {})
        self.check_arguments(*args, **kwargs)
        options.update({k: v for k, v in (("producer", producer), ("link", link), ("link_error", link_error),
                                          ("shadow", shadow)) if v is not None})
        self.app.conf.check()  # the first dispatch: a refused setting of config_from_object's source says so
        if self.app.conf["task_always_eager"]:
            calling.check_options(self.name, options)
            return self.apply(args, kwargs, task_id=task_id or None, **options)
        if task_id is not None:
            options["task_id"] = task_id
        found = calling.publish(self.app, self.name, args, kwargs, options, task=self)
        result = self.AsyncResult(found)
        # as in Celery: a call that keeps no result gives a result whose get() is None at once
        said = options.get("ignore_result")
        result.ignored = ignores_result(self) if said is None else bool(said)
        if options.get("add_to_parent", True):
            add_child(result)  # one of the running task's children, as Celery's add_to_parent
        return result

    def delay_on_commit(self, *args: Any, **kwargs: Any) -> None:
        """``delay()`` once Django's current transaction commits; nothing if it rolls back (see below)."""
        self.apply_async_on_commit(args, kwargs)

    def apply_async_on_commit(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                              **options: Any) -> None:
        """``apply_async()`` from Django's ``transaction.on_commit``: at once outside an atomic block.

        Returns None, as there is no task id before the commit. The arguments are checked
        here, at the call, not at the commit. A process that dies between the commit and
        the send loses the task: ``apply_async(..., transaction=connection)`` on a database
        broker stores it inside the transaction instead (docs/django.md).
        """
        if not django_in_use():
            raise ImproperlyConfigured(f"{self.name}.apply_async_on_commit() waits for a Django transaction, but "
                                       "no Django project is configured here (DJANGO_SETTINGS_MODULE): call "
                                       "apply_async() or delay()")
        call_args, call_kwargs = tuple(args or ()), dict(kwargs or {})
        self.check_arguments(*call_args, **call_kwargs)
        codec.encode_call(self.name, list(call_args), call_kwargs, self.positional_names())
        django_on_commit(functools.partial(self.apply_async, call_args, call_kwargs, **options))

    def apply(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
              link: Any = None, link_error: Any = None, task_id: str | None = None, retries: int | None = None,
              throw: bool | None = None, logfile: Any = None, loglevel: Any = None,
              headers: Mapping[str, Any] | None = None, **options: Any) -> EagerResult:
        """Run the task inline, now, traced as a worker would; retries run at once, as in Celery."""
        call_args, call_kwargs = list(args or ()), dict(kwargs or {})
        task_id = task_id or new_id()
        attempt = int(retries or 0)
        while True:
            request = self._eager_request(task_id, attempt, call_args, call_kwargs, headers,
                                          {**options, "link": link, "link_error": link_error})
            traced = trace(self, request, call_args, call_kwargs, eager=True)
            if traced.state != states.RETRY:
                break
            retry = traced.exc
            plan = getattr(retry, "resend", None) or {}
            call_args = list(plan.get("args", call_args))
            call_kwargs = dict(plan.get("kwargs", call_kwargs))
            attempt += 1
        eager.after(self, request, traced)
        propagate = self.app.conf["task_eager_propagates"] if throw is None else throw
        if traced.state == states.FAILURE and propagate and traced.exc is not None:
            raise traced.exc
        return EagerResult(task_id, traced.retval, traced.state, traceback=traced.einfo, name=self.name,
                           app=self.app)

    def _eager_request(self, task_id: str, retries: int, args: list[Any], kwargs: dict[str, Any],
                       headers: Mapping[str, Any] | None, options: Mapping[str, Any]) -> Context:
        queue = options.get("queue") or self.queue or self.app.conf["task_default_queue"]
        embed = calling.workflow(options)
        return Context(id=task_id, task=self.name, args=args, kwargs=kwargs, retries=retries, is_eager=True,
                       called_directly=False, hostname=socket.gethostname(), headers=dict(headers or {}),
                       delivery_info={"is_eager": True, "exchange": "", "routing_key": queue, "priority": None},
                       root_id=task_id, correlation_id=task_id,
                       ignore_result=bool(options.get("ignore_result", ignores_result(self))),
                       callbacks=embed["callbacks"], errbacks=embed["errbacks"])

    def retry(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
              exc: BaseException | None = None, throw: bool = True, eta: Any = None,
              countdown: float | None = None, max_retries: int | None = None, **options: Any) -> Retry:
        """Run this task again later: raises ``Retry`` (or the exception, once retries are used up)."""
        request = self.request
        retries = request.retries + 1
        limit = self.max_retries if max_retries is None else max_retries
        if request.called_directly:
            raise exc or Retry("Task can be retried", None)
        if not eta and countdown is None:
            countdown = self.default_retry_delay
        new_args = list(args) if args is not None else list(request.args or ())
        new_kwargs = dict(kwargs) if kwargs is not None else dict(request.kwargs or {})
        if limit is not None and retries > limit:
            if exc is not None:
                raise exc
            raise self.MaxRetriesExceededError(
                f"Can't retry {self.name}[{request.id}] args:{new_args} kwargs:{new_kwargs}",
                task_args=new_args, task_kwargs=new_kwargs)
        ret = Retry(exc=exc, when=eta or countdown, is_eager=request.is_eager)
        ret.max_retries = limit
        if args is not None or kwargs is not None or options or not throw:
            ret.resend = {"args": new_args, "kwargs": new_kwargs, "options": options}
        if request.is_eager:
            if throw:
                raise ret
            return ret
        if not throw:
            send_retry(self, request, ret)
            return ret
        raise ret

    # -- signatures --------------------------------------------------------------------------

    def signature(self, args: Sequence[Any] | None = None, *starargs: Any, **starkwargs: Any) -> Signature:
        kwargs = starkwargs.pop("kwargs", None)
        options = starkwargs.pop("options", None) or {}
        immutable = starkwargs.pop("immutable", False)
        return Signature(self.name, args, kwargs, {**options, **starkwargs}, immutable=immutable, app=self.app)

    subtask = signature

    def s(self, *args: Any, **kwargs: Any) -> Signature:
        return self.signature(args, kwargs=kwargs)

    def si(self, *args: Any, **kwargs: Any) -> Signature:
        return self.signature(args, kwargs=kwargs, immutable=True)

    def map(self, it: Any) -> Signature:
        """One task calling this one for each item (``celery.map``), in a single worker."""
        return xmap(self.s(), it, app=self.app)

    def starmap(self, it: Any) -> Signature:
        """One task calling this one with each item's arguments (``celery.starmap``), in a single worker."""
        return xstarmap(self.s(), it, app=self.app)

    def chunks(self, it: Any, n: int) -> Signature:
        """The items in groups of ``n``, each group one ``starmap`` task, all of them a group."""
        return chunks(self.s(), it, n, app=self.app)

    def replace(self, sig: Any) -> Any:
        """Replace this running task by ``sig``: it takes this task's id, chain, callbacks and chord."""
        return eager.replace(self, sig)

    def add_to_chord(self, sig: Any, lazy: bool = False) -> Any:
        raise RefusedFeature(f"{self.name}.add_to_chord() is refused: a chord's join is a counter set to the "
                             "number of header tasks when it is applied, and the result stores cannot add to it "
                             "safely while header tasks count down; build the whole header first, or raise "
                             "self.replace(group(...)) so this task's place holds those tasks' results")

    # -- results -----------------------------------------------------------------------------

    def AsyncResult(self, task_id: str, **kwargs: Any) -> AsyncResult:
        return AsyncResult(task_id, app=self.app, task_name=self.name)

    def update_state(self, task_id: str | None = None, state: str | None = None, meta: Any = None,
                     **kwargs: Any) -> None:
        """Store a state (``PROGRESS``, ...) and its ``meta`` for this task, visible to a poller at once."""
        task_id = task_id or self.request.id
        if task_id is None:
            raise ValueError(f"{self.name}.update_state() outside a task run needs task_id=")
        if not self.app.backend.enabled:
            _warn_no_backend(self.name)  # Celery drops it without a word when there is no backend
            return
        self.app.backend.store_state(str(task_id), state or states.PENDING, meta, self.name)

    def send_event(self, type_: str, retry: bool = True, retry_policy: Any = None, **fields: Any) -> None:
        raise RefusedFeature("send_event() is refused: jobbridge workers send no Celery events")

    # -- handlers (override in a custom base class) ---------------------------------------------

    def before_start(self, task_id: str | None, args: Any, kwargs: Any) -> None:
        """Called before the body runs, in the worker (and in apply())."""

    def on_success(self, retval: Any, task_id: str | None, args: Any, kwargs: Any) -> None:
        """Called after the body returned."""

    def on_failure(self, exc: BaseException, task_id: str | None, args: Any, kwargs: Any, einfo: Any) -> None:
        """Called after the body raised (and no retry was asked)."""

    def on_retry(self, exc: BaseException | None, task_id: str | None, args: Any, kwargs: Any,
                 einfo: Any) -> None:
        """Called when the task is to be retried."""

    def after_return(self, status: str, retval: Any, task_id: str | None, args: Any, kwargs: Any,
                     einfo: Any) -> None:
        """Called after a success or a failure, after on_success / on_failure."""

    def __repr__(self) -> str:
        return f"<@task: {getattr(self, 'name', '?')} of {getattr(self.app, 'main', None) or '__main__'}>"

    @classmethod
    def bind(cls, app: AppPort) -> None:
        """Compat no-op: tasks are bound to their app when created."""


_warned: set[str] = set()


def _warn_no_backend(name: str) -> None:
    if name not in _warned:
        _warned.add(name)
        log.warning("%s.update_state() stores nothing: the app has no result_backend, so no one could read "
                    "it (set result_backend to make progress visible)", name)


def make_task(base: type[Task], app: AppPort, name: str, fun: Callable[..., Any], bind: bool,
              options: Mapping[str, Any]) -> Task:
    """The task ``@app.task`` makes of ``fun``: the one instance of a new subclass of ``base`` holding its options."""
    attrs = {"app": app, "name": name, "run": fun if bind else staticmethod(fun), "_bind": bind,
             "_fun": staticmethod(fun), "__doc__": fun.__doc__, "__module__": fun.__module__,
             "__wrapped__": fun, "abstract": False, **options}
    task: Task = type(fun.__name__, (base,), attrs)()
    task.__qualname__ = fun.__qualname__  # type: ignore[attr-defined]
    return task


def lookup(app: AppPort, name: str) -> TaskPort:
    try:
        return app.tasks[name]
    except KeyError:
        raise NotRegistered(name) from None
