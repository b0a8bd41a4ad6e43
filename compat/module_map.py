"""Which ``celery.*`` modules the facade provides under `install_as_celery`, and what to use for the others.

Real code imports more of Celery than its top-level API: django-celery-beat reads
``celery.utils.time``, task modules register remote-control commands through
``celery.worker.control``, test suites load ``celery.contrib.pytest``. Each module
named in `PROVIDED` is built from the facade module it names, when it is first
imported (``celery.contrib.pytest`` imports pytest, which a web process never
needs). Any other ``celery.*`` name raises `RefusedModule`, naming the module and
what to write instead, rather than a bare ModuleNotFoundError that reads as if
Celery were missing from the environment. `RefusedModule` is an ``ImportError``,
so code that probes an optional module (``try: import celery.contrib.rdb``) still
takes its fallback.
"""

from __future__ import annotations

from .exceptions import RefusedFeature

#: celery module -> the facade module (relative to jobbridge.compat) whose public names it holds
PROVIDED: dict[str, str] = {
    "celery.worker.control": "remote_commands",
    "celery.utils.serialization": "results.serialization",
    "celery.contrib.abortable": "contrib.abortable",
    "celery.contrib.pytest": "contrib.pytest",
    "celery.contrib.testing.app": "contrib.testing.app",
    "celery.contrib.testing.worker": "contrib.testing.worker",
    "celery.contrib.testing.tasks": "contrib.testing.tasks",
}

#: packages: they hold only submodules (and what their parent sets on them)
PACKAGES = ("celery.worker", "celery.contrib", "celery.contrib.testing")

_SEE = "docs/compat.md (Modules) lists every celery module the facade provides"

#: a module (or package prefix) -> why it is not provided and what to write instead; the longest prefix wins
REFUSED: dict[str, str] = {
    "celery.worker": "jobbridge runs its own worker (jobbridge worker -A proj), which takes no broadcast "
                     "commands; celery.worker.control (Panel, control_command, inspect_command) is provided "
                     "so that task modules registering commands still import",
    "celery.app.control": "app.control.revoke(id), app.control.terminate(id), app.control.ping() and "
                          "app.control.inspect().ping() (from the workers' heartbeats) are provided through "
                          "app.control; other inspections and broadcast commands are not: watch workers with "
                          "jobbridge status",
    "celery.bin": "the command line is jobbridge's: jobbridge worker -A proj, jobbridge beat -A proj, "
                  "jobbridge status (jobbridge --help)",
    "celery.beat": "periodic tasks run on jobbridge's scheduler: jobbridge beat -A proj, or jobbridge worker "
                   "-A proj -B; django-celery-beat's tables are read by it directly (docs/schedules.md)",
    "celery.apps": "the worker and beat programs are jobbridge's: jobbridge worker -A proj, jobbridge beat -A "
                   "proj",
    "celery.backends": "result stores are chosen by URL: result_backend = 'redis://...', 'db+<database "
                       "URL>' or 'django://default' (docs/compat.md, Result backends)",
    "celery.contrib.rdb": "remote debugging over a socket is not provided: run the task with "
                          "task_always_eager=True (or app.task's .apply()) under your debugger",
    "celery.contrib.migrate": "moving messages between brokers is not provided: jobbridge purge and "
                              "jobbridge enqueue work on the store, and a rolling migration shares queues "
                              "through the Celery-wire driver",
    "celery.contrib.sphinx": "the Sphinx extension for documenting tasks is not provided: document task "
                             "functions with sphinx.ext.autodoc",
    "celery.contrib.testing.mocks": "Celery's message mocks are not provided: call the task with "
                                    ".apply() or test against the celery_worker fixture",
    "celery.contrib.testing.manager": "the integration-test manager is not provided: use the celery_worker "
                                      "fixture or start_worker(app)",
    "celery.contrib.django": "Django's task helpers are not provided: jobbridge's Django integration covers "
                             "transactions (docs/django.md)",
    "celery.events": "Celery events are not sent: watch workers and queues with jobbridge status, and "
                     "connect receivers to Celery's task signals",
    "celery.concurrency": "the worker's pool is jobbridge's (threads per process, -c, --processes)",
    "celery.loaders": "there is no loader: config_from_object and autodiscover_tasks are the app's",
    "celery.security": "message signing is not provided: arguments travel as JSON, which nothing can turn "
                       "into code",
    "celery.platforms": "daemonizing helpers are not provided: run jobbridge worker under systemd or another "
                        "process manager; for signals use the standard library's signal module",
    "celery.utils": "the facade provides celery.utils.log, celery.utils.time, celery.utils.serialization, uuid and "
                    "cached_property; "
                    "Celery's other helpers are its internals: use the standard library or your own helper",
    "celery.local": "Celery's proxies are its internals: current_app and current_task are provided in "
                    "celery itself",
    "celery.task": "the pre-4.0 celery.task API is gone from Celery too: use @shared_task or @app.task",
}


class RefusedModule(RefusedFeature, ImportError):
    """A ``celery.*`` module the facade does not provide; an ImportError, so optional imports fall back."""

    def __init__(self, module: str) -> None:
        super().__init__(f"{module} is not provided by jobbridge's Celery facade (install_as_celery): "
                         f"{replacement(module)}. {_SEE}")
        self.name = module


def replacement(module: str) -> str:
    """What to write instead of ``module``: the reason under its longest refused prefix."""
    parts = module.split(".")
    for end in range(len(parts), 1, -1):
        found = REFUSED.get(".".join(parts[:end]))
        if found is not None:
            return found
    return ("it is one of Celery's internal modules; the facade provides celery's top-level API and the "
            "modules listed there")


__all__ = ["PACKAGES", "PROVIDED", "REFUSED", "RefusedModule", "replacement"]
