"""The environment over the code, as in Celery: CELERY_BROKER_URL, CELERY_RESULT_BACKEND, CELERY_CONFIG_MODULE.

Celery's ``app.conf.broker_url`` and ``result_backend`` read CELERY_BROKER_URL and
CELERY_RESULT_BACKEND first (an empty one is no override), and with no
``config_from_object`` its loader reads the module CELERY_CONFIG_MODULE names. The
programs of tests/compat/parity/config_table.json were run on real Celery; here they run on
the facade and must read the same. A URL the environment replaces is never used, so it is
never refused; what the environment names is checked when the app is first used.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from jobbridge.compat import Celery, RefusedFeature
from jobbridge.compat.config.settings import jobbridge_settings

from .projects import Worker, load, use

TABLE = json.loads((Path(__file__).parent / "parity" / "config_table.json").read_text())


def run(program: str) -> Any:
    """``program``'s ``out`` on the facade, the environment and sys.modules restored afterwards."""
    env, modules = dict(os.environ), dict(sys.modules)
    scope: dict[str, Any] = {"os": os, "sys": sys, "types": types, "Celery": Celery}
    try:
        exec(program, scope)
        return scope["out"]
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"
    finally:
        os.environ.clear()
        os.environ.update(env)
        for name in set(sys.modules) - set(modules):
            del sys.modules[name]
        # the program's apps go now, not at some later collection: a live app takes every later
        # @shared_task, and one configured from a missing module would fail that import then
        scope.clear()
        gc.collect()


@pytest.mark.parametrize("name", sorted(TABLE["conf"]))
def test_the_facade_reads_what_celery_reads(name: str) -> None:
    assert run(TABLE["conf_programs"][name]) == TABLE["conf"][name]


def test_the_environment_points_a_refused_code_url_elsewhere(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    with pytest.raises(RefusedFeature, match="rpc://"):  # used as written: refused, with the reason
        Celery("proj", backend="rpc://")
    monkeypatch.setenv("CELERY_BROKER_URL", f"sqla+sqlite:///{tmp_path / 'jobs.sqlite3'}")
    monkeypatch.setenv("CELERY_RESULT_BACKEND", f"db+sqlite:///{tmp_path / 'jobs.sqlite3'}")
    app = Celery("proj", broker="qpid://localhost//", backend="rpc://")  # replaced, so never used
    app.conf.check()
    conn = jobbridge_settings(app.conf).connection()
    assert conn.driver == "database" and str(conn.options["url"]).endswith(f"{tmp_path}/jobs.sqlite3")
    assert app.conf.result_backend == f"db+sqlite:///{tmp_path / 'jobs.sqlite3'}"


def test_what_the_environment_names_is_refused_when_the_app_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CELERY_RESULT_BACKEND", "rpc://")
    app = Celery("proj", broker="memory://")  # made and configured: nothing is refused yet
    with pytest.raises(RefusedFeature, match="rpc://"):
        app.conf.check()


def test_a_second_broker_for_reads_or_writes_is_refused_unless_it_is_the_broker(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CELERY_BROKER_READ_URL", "memory://")
    Celery("same", broker="memory://").conf.check()
    monkeypatch.setenv("CELERY_BROKER_WRITE_URL", "redis://127.0.0.1:6379/9")
    with pytest.raises(RefusedFeature, match=r"CELERY_BROKER_WRITE_URL.*one store"):
        Celery("other", broker="memory://").conf.check()


def test_a_worker_runs_code_that_names_a_developers_urls_where_the_environment_points(tmp_path: Path,
                                                                                     monkeypatch: pytest.MonkeyPatch
                                                                                     ) -> None:
    """``Celery('deployed', broker='amqp://...', backend='rpc://')``, deployed with the two variables set."""
    broker, backend = f"sqla+sqlite:///{tmp_path / 'jobs.sqlite3'}", f"db+sqlite:///{tmp_path / 'jobs.sqlite3'}"
    monkeypatch.setenv("CELERY_BROKER_URL", broker)
    monkeypatch.setenv("CELERY_RESULT_BACKEND", backend)
    module = load("loadingproj.deployed")
    app = use(module.app)
    worker = Worker(tmp_path, "loadingproj.deployed", broker, env={"CELERY_RESULT_BACKEND": backend})
    try:
        assert module.add.delay(2, 3).get(timeout=30) == 5, worker.output()
        assert worker.stop() == 0, worker.output()
    finally:
        worker.kill()
        app.close()
