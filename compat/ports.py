"""What the facade's lower layers use of the app and of a task, as Protocols.

`Celery` (compat/app.py) and `Task` (compat/task.py) sit at the top of the facade,
because they are made of everything below them. The modules below still act on an
app and its tasks — publishing reads ``app.conf``, the tracer calls a task's
handlers, a chord writes to ``app.backend`` — so they take these ports instead of
the classes: an import that would point up becomes a type that names only the
members really used. Each port lists exactly those members; the classes satisfy
them structurally (mypy checks it wherever an app or a task is passed down).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from jobbridge import JobBridge
from jobbridge.results import ResultRecord, ResultStore

from .request import Request, RequestStack


class ConfPort(Protocol):
    """``app.conf``: a setting by its name (Celery's default when unset), read by key or attribute, and updated.

    The lower layers only read by key; the attribute read and `update` are here
    because ``Task.app`` is typed with this port, and a task's own code writes
    ``self.app.conf.update(...)`` and ``self.app.conf.task_default_queue``.
    """

    def __getitem__(self, key: str) -> Any: ...

    def __getattr__(self, key: str) -> Any: ...

    def update(self, *mappings: Any, **kwargs: Any) -> None: ...

    def check(self) -> None:
        """Refuse, at the app's first use for work, what the configuration source asks and cannot be honoured."""


class BackendPort(Protocol):
    """``app.backend`` (compat/results/backend.py): the result store as the facade uses it."""

    @property
    def enabled(self) -> bool: ...

    @property
    def ttl(self) -> float: ...

    def require(self, what: str) -> ResultStore: ...

    def get(self, task_id: str, what: str = ...) -> ResultRecord | None: ...

    def wait(self, task_id: str, timeout: float) -> ResultRecord | None: ...

    def get_many(self, ids: Sequence[str]) -> dict[str, ResultRecord]: ...

    def write(self, task_id: str, state: str, *, name: str | None = ..., result: Any = ..., meta: Any = ...,
              exc: BaseException | None = ..., traceback: str | None = ...) -> None: ...

    def store_state(self, task_id: str, state: str, meta: Any, name: str | None) -> None: ...

    def forget(self, task_id: str) -> None: ...

    def save_group(self, group_id: str, ids: Sequence[str]) -> None: ...

    def restore_group(self, group_id: str) -> list[str] | None: ...

    def forget_group(self, group_id: str) -> None: ...

    def save_children(self, task_id: str, children: Sequence[Any]) -> None: ...

    def children(self, task_id: str) -> list[Any] | None: ...

    def mark_joined(self, group_id: str, body_id: str | None) -> None: ...

    def joined(self, group_id: str) -> bool: ...

    def mark_sizing(self, group_id: str) -> None: ...

    def sizing(self, group_id: str) -> bool: ...


class ControlPort(Protocol):
    """``app.control`` (compat/results/control.py): revoking, which results and result sets offer."""

    def revoke(self, task_id: str | Sequence[str], destination: Any = ..., terminate: bool = ...,
               signal: Any = ..., **kwargs: Any) -> None: ...


class AppPort(Protocol):
    """A Celery app, as everything below compat/app.py uses it."""

    @property
    def main(self) -> str | None: ...

    @property
    def strict_typing(self) -> bool: ...

    @property
    def finalized(self) -> bool:
        """Whether the app was finalized (its configuration checked, its modules imported)."""

    @property
    def conf(self) -> ConfPort: ...

    @property
    def backend(self) -> BackendPort: ...

    @property
    def control(self) -> ControlPort: ...

    @property
    def tasks(self) -> Mapping[str, TaskPort]: ...

    def jobbridge_app(self) -> JobBridge: ...

    def finalize(self, auto: bool = ...) -> None: ...

    def task_from_fun(self, fun: Callable[..., Any], name: str | None = ..., base: Any = ...,
                      bind: bool = ..., **options: Any) -> TaskPort: ...

    def send_task(self, name: str, args: Sequence[Any] | None = ..., kwargs: Mapping[str, Any] | None = ...,
                  countdown: float | None = ..., eta: Any = ..., task_id: str | None = ...,
                  **options: Any) -> Any: ...


class TaskPort(Protocol):
    """A Celery task, as everything below compat/task.py uses it: its options, handlers and calls."""

    @property
    def app(self) -> AppPort: ...

    @property
    def name(self) -> str: ...

    @property
    def queue(self) -> str | None: ...

    @property
    def max_retries(self) -> int | None: ...

    @property
    def time_limit(self) -> float | None: ...

    @property
    def soft_time_limit(self) -> float | None: ...

    @property
    def expires(self) -> Any: ...

    @property
    def ignore_result(self) -> bool | None: ...

    @property
    def track_started(self) -> bool | None: ...

    @property
    def autoretry_for(self) -> Sequence[type[BaseException]]: ...

    @property
    def dont_autoretry_for(self) -> Sequence[type[BaseException]]: ...

    @property
    def retry_kwargs(self) -> Mapping[str, Any]: ...

    @property
    def retry_backoff(self) -> bool | int | float: ...

    @property
    def retry_backoff_max(self) -> int: ...

    @property
    def retry_jitter(self) -> bool: ...

    @property
    def request(self) -> Request: ...

    @property
    def request_stack(self) -> RequestStack: ...

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

    def jobbridge_body(self) -> Callable[..., Any]: ...

    def positional_names(self) -> tuple[str, ...]: ...

    def apply_async(self, args: Sequence[Any] | None = ..., kwargs: Mapping[str, Any] | None = ...,
                    task_id: str | None = ..., producer: Any = ..., link: Any = ..., link_error: Any = ...,
                    shadow: str | None = ..., **options: Any) -> Any: ...

    def apply(self, args: Sequence[Any] | None = ..., kwargs: Mapping[str, Any] | None = ..., link: Any = ...,
              link_error: Any = ..., task_id: str | None = ..., retries: int | None = ...,
              throw: bool | None = ..., logfile: Any = ..., loglevel: Any = ...,
              headers: Mapping[str, Any] | None = ..., **options: Any) -> Any: ...

    def retry(self, args: Sequence[Any] | None = ..., kwargs: Mapping[str, Any] | None = ...,
              exc: BaseException | None = ..., throw: bool = ..., eta: Any = ..., countdown: float | None = ...,
              max_retries: int | None = ..., **options: Any) -> Any: ...

    def before_start(self, task_id: str | None, args: Any, kwargs: Any) -> None: ...

    def on_success(self, retval: Any, task_id: str | None, args: Any, kwargs: Any) -> None: ...

    def on_failure(self, exc: BaseException, task_id: str | None, args: Any, kwargs: Any, einfo: Any) -> None: ...

    def on_retry(self, exc: BaseException | None, task_id: str | None, args: Any, kwargs: Any,
                 einfo: Any) -> None: ...

    def after_return(self, status: str, retval: Any, task_id: str | None, args: Any, kwargs: Any,
                     einfo: Any) -> None: ...


__all__ = ["AppPort", "BackendPort", "ConfPort", "ControlPort", "TaskPort"]
