"""``-A`` finds the app Celery's ``-A`` finds, for every spelling (tests/compat/parity/config_table.json).

The table was written by real Celery's ``find_app`` (tests/compat/parity/make_config_table.py) over
module layouts that this test writes again with the facade's ``Celery``; then the spellings of the
example projects run under real ``jobbridge worker -A`` processes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from jobbridge.compat import Celery

from jobbridge import JobBridge
from jobbridge.loading import AppNotFound, load_app

from .projects import Worker, load, use

TABLE = json.loads((Path(__file__).parent / "parity" / "config_table.json").read_text())


@pytest.fixture
def layouts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Celery's layouts, written with the facade's Celery, importable from the working directory."""
    for path, text in TABLE["layouts"].items():
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text.replace("IMPORT", "from jobbridge.compat import Celery"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CELERY_BROKER_URL", "memory://")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        del sys.modules[name]


def _found(spec: str, folder: Path) -> str:
    """Which app ``spec`` loads, by its ``main`` (the table names them so), or that it is an error."""
    try:
        bridge = load_app(spec)
    except (AppNotFound, ModuleNotFoundError, AttributeError):
        return "error"
    layouts = [m for m in list(sys.modules.values()) if str(getattr(m, "__file__", "")).startswith(str(folder))]
    for module in layouts:
        for value in vars(module).values():
            if isinstance(value, Celery) and value._bridge is bridge:
                return str(value.main)
    raise AssertionError(f"-A {spec} loaded a JobBridge that is no layout's app")


@pytest.mark.parametrize("spec", sorted(TABLE["found"]))
def test_each_spelling_finds_the_app_celerys_find_app_finds(layouts: Path, spec: str) -> None:
    expected = TABLE["found"][spec]
    assert _found(spec, layouts) == ("error" if expected.startswith("error") else expected)


def test_a_jobbridge_app_is_still_found_by_module_colon_attr(layouts: Path) -> None:
    (layouts / "native.py").write_text(
        "from jobbridge import JobBridge\nfrom jobbridge.settings import Settings\n"
        "jobs = JobBridge(Settings.from_mapping({'driver': 'memory'}))\n"
        "def make():\n    return JobBridge(Settings.from_mapping({'driver': 'memory'}))\n")
    assert load_app("native:jobs") is load("native").jobs
    assert isinstance(load_app("native:make"), JobBridge)
    assert load_app("native.jobs") is load("native").jobs  # Celery's dotted spelling, for a JobBridge too


def test_the_error_says_what_was_tried(layouts: Path) -> None:
    with pytest.raises(AppNotFound, match=r"noapp:bridge, noapp:app, noapp:celery, noapp\.celery:app and every "
                                          r"attribute of 'noapp'"):
        load_app("noapp")
    with pytest.raises(AppNotFound, match="no module named 'missing_module'"):
        load_app("missing_module.app")


def test_the_example_projects_spellings_run_under_real_workers(tmp_path: Path) -> None:
    """``celery -A`` as the FastAPI and Flask examples spell it, one worker each (``-A proj``, Celery's Django
    layout, runs in test_project_django.py)."""
    broker = f"sqla+sqlite:///{tmp_path / 'jobs.sqlite3'}"
    cases = {"loadingproj.worker.celery": ("loadingproj.worker", "celery"),
             "loadingproj.make_celery": ("loadingproj.make_celery", "celery_app")}
    workers: dict[str, Worker] = {}
    for spec in cases:
        (tmp_path / spec).mkdir()
        workers[spec] = Worker(tmp_path / spec, spec, broker)
    apps: list[Celery] = []
    try:
        for module, attr in cases.values():
            app = getattr(load(module), attr)
            app.conf.broker_url = broker
            apps.append(use(app))
            load(module).which.delay()
        for spec, (module, attr) in cases.items():
            events = workers[spec].wait_for(lambda ev: bool(ev), f"the task of -A {spec}")
            assert events == [["which", f"{module}:{attr}"]], workers[spec].output()
        for worker in workers.values():
            assert worker.stop() == 0, worker.output()
    finally:
        for worker in workers.values():
            worker.kill()
        for app in apps:
            app.close()
