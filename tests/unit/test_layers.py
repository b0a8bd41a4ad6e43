"""The public API and the import rules of design.md §1, checked on the source.

The layers themselves (compat/'s, and what a driver or a result store may import) are
import-linter contracts in pyproject.toml, run by `make lint`; what the import graph cannot
see is checked here: a core module spelling ``jobbridge.compat``, the facade's import paths
users write, and the few imports compat/ makes inside functions.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import jobbridge.compat

import jobbridge

ROOT = Path(jobbridge.__file__).parent
COMPAT = Path(jobbridge.compat.__file__).parent

#: every import path a Celery user writes for the facade, with the names read from it
PUBLIC_PATHS = {
    "jobbridge.compat": (
        "AsyncResult", "Celery", "EagerResult", "GroupResult", "Ignore", "ImproperlyConfigured",
        "MaxRetriesExceededError", "RefusedFeature", "Reject", "Request", "ResultSet", "ResultsNotEnabled", "Retry",
        "Signature", "SoftTimeLimitExceeded", "Task", "TimeLimitExceeded", "TimeoutError", "chain", "chord",
        "chunks", "current_app", "current_task", "exceptions", "get_task_logger", "group", "install_as_celery",
        "logging_is_configured_by_app", "maybe_signature", "shared_task", "signals", "signature", "states",
        "subtask", "xmap", "xstarmap"),
    "jobbridge.compat.exceptions": (
        "AlwaysEagerIgnored", "CeleryError", "ChordError", "Ignore", "ImproperlyConfigured", "InvalidTaskError",
        "MaxRetriesExceededError", "NotRegistered", "QueueNotFound", "RefusedFeature", "Reject", "ResultsNotEnabled",
        "Retry", "SoftTimeLimitExceeded", "TaskError", "TaskPredicate", "TaskRevokedError", "TimeLimitExceeded",
        "TimeoutError", "WorkerLostError"),
    "jobbridge.compat.signals": (
        "Signal", "after_setup_logger", "after_setup_task_logger", "after_task_publish", "before_task_publish",
        "celeryd_after_setup", "celeryd_init", "import_modules", "logging_is_configured_by_app", "setup_logging",
        "task_failure", "task_internal_error", "task_postrun", "task_prerun", "task_received", "task_rejected",
        "task_retry", "task_revoked", "task_sent", "task_success", "task_unknown", "worker_init",
        "worker_process_init", "worker_process_shutdown", "worker_ready", "worker_shutdown",
        "worker_shutting_down"),
    "jobbridge.compat.states": (
        "ALL_STATES", "EXCEPTION_STATES", "FAILURE", "IGNORED", "PENDING", "PROPAGATE_STATES", "READY_STATES",
        "RECEIVED", "REJECTED", "RETRY", "REVOKED", "STARTED", "SUCCESS", "UNREADY_STATES", "precedence", "state"),
    "jobbridge.compat.schedules": ("crontab", "schedule", "solar"),
    "jobbridge.compat.result": (
        "AsyncResult", "EagerResult", "GroupResult", "ResultSet", "assert_not_in_task", "result_from_tuple",
        "results_of"),
    "jobbridge.compat.canvas": (
        "Signature", "chain", "chord", "chunks", "group", "maybe_signature", "signature", "subtask", "xmap",
        "xstarmap"),
}
#: what install_as_celery() puts in sys.modules, with the facade object each name must be
CELERY_NAMES = {
    "celery": ("Celery", "Signature", "Task", "chain", "chord", "chunks", "current_app", "current_task", "group",
               "maybe_signature", "shared_task", "signature", "subtask", "xmap", "xstarmap"),
    "celery.app": ("Celery", "shared_task"),
    "celery.app.base": ("Celery",),
    "celery.app.task": ("Task",),
    "celery.utils.log": ("get_task_logger",),
    "celery.canvas": PUBLIC_PATHS["jobbridge.compat.canvas"],
    "celery.result": PUBLIC_PATHS["jobbridge.compat.result"],
    "celery.exceptions": PUBLIC_PATHS["jobbridge.compat.exceptions"],
    "celery.signals": PUBLIC_PATHS["jobbridge.compat.signals"],
    "celery.states": PUBLIC_PATHS["jobbridge.compat.states"],
    "celery.schedules": PUBLIC_PATHS["jobbridge.compat.schedules"],
}
#: the imports compat/ makes inside a function (each with a comment saying why): chain, group and chord
#: build one another, which Celery's API forces (Django, optional, is imported by jobbridge.integrations)
LOCAL_IMPORTS = {("canvas/signature.py", "primitives"), ("canvas/primitives.py", "chords")}


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_public_api_is_all_and_importable() -> None:
    assert sorted(jobbridge.__all__) == jobbridge.__all__
    for name in jobbridge.__all__:
        assert hasattr(jobbridge, name), name
    assert (ROOT / "py.typed").exists()


def test_the_core_never_imports_compat() -> None:
    for path in ROOT.rglob("*.py"):
        assert not any(m.startswith("jobbridge.compat") for m in imports_of(path)), path


def test_drivers_never_import_the_worker_or_the_app() -> None:
    forbidden = ("jobbridge.worker", "jobbridge.app", "jobbridge.execution", "jobbridge.cli", "jobbridge.supervisor")
    for path in (ROOT / "drivers").rglob("*.py"):
        assert not any(m.startswith(forbidden) for m in imports_of(path)), path


def test_no_client_exceptions_outside_drivers() -> None:
    clients = ("redis", "botocore", "boto3", "confluent_kafka", "psycopg", "pymysql")
    paths = [ROOT / name for name in ("worker.py", "execution.py", "supervisor.py")]
    paths += sorted((ROOT / "cli").glob("*.py"))  # the CLI is a package, one module per command family
    assert len(paths) > 5
    for path in paths:
        assert not any(m.split(".")[0] in clients for m in imports_of(path)), path


def test_the_facade_import_paths_users_write_resolve() -> None:
    for path, names in PUBLIC_PATHS.items():
        module = importlib.import_module(path)
        assert [n for n in names if not hasattr(module, n)] == [], path


def test_install_as_celery_maps_each_celery_name_to_the_facade() -> None:
    from jobbridge.compat import install

    modules = install.build()
    facade = {**vars(jobbridge.compat), **{n: getattr(importlib.import_module(p), n)
                                           for p, names in PUBLIC_PATHS.items() for n in names}}
    for path, names in CELERY_NAMES.items():
        for name in names:
            assert getattr(modules[path], name) is facade[name], (path, name)
    assert modules["celery"].result is modules["celery.result"]
    assert modules["celery.app.task"].Context is jobbridge.compat.Request


def test_compat_imports_inside_functions_only_where_it_must_and_says_why() -> None:
    found = set()
    for path in COMPAT.rglob("*.py"):
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    module = inner.module if isinstance(inner, ast.ImportFrom) else inner.names[0].name
                    found.add((path.relative_to(COMPAT).as_posix(), module or ""))
                    said = "#" in lines[inner.lineno - 2]  # the line above it
                    assert said, f"{path}:{inner.lineno}: say in a comment above it why this import is here"
    assert found == LOCAL_IMPORTS
