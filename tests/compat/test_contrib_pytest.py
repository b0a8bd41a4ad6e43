"""Celery's pytest fixtures on the facade: ``celery_app``, ``celery_worker``, ``start_worker``, run by pytest itself.

Each case runs pytest in a subprocess on a small project, so the project's conftest
(``install_as_celery()`` first, then ``pytest_plugins``) runs as a user's would, and a
test passes only when ``delay().get()`` returned what the jobbridge worker thread computed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROJECT = REPO / "tests" / "compat" / "projects" / "fixtureproj"


def pytest_in(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CELERY_", "JOBBRIDGE_", "PYTEST_"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=120)


def test_a_project_using_celerys_fixtures_passes_under_install_as_celery() -> None:
    done = pytest_in(PROJECT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "9 passed" in done.stdout, done.stdout


def write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text))


def test_the_fixtures_are_loaded_only_when_a_project_asks(tmp_path: Path) -> None:
    write(tmp_path, {"pytest.ini": "[pytest]\n", "test_plain.py": """
        def test_uses_celery_app(celery_app):
            pass
        """})
    done = pytest_in(tmp_path)
    assert done.returncode != 0
    assert "fixture 'celery_app' not found" in done.stdout, done.stdout


def test_the_plugin_by_its_jobbridge_name_beside_the_real_celery_on_sqlite(tmp_path: Path) -> None:
    """Without install_as_celery, the real Celery importable in the same process, the store a SQLite file."""
    store = tmp_path / "jobs.sqlite3"
    write(tmp_path, {"pytest.ini": "[pytest]\n", "conftest.py": f"""
        import pytest

        @pytest.fixture(scope="session")
        def celery_config():
            return {{"broker_url": "sqla+sqlite:///{store}", "result_backend": "db+sqlite:///{store}"}}
        """, "test_sqlite.py": """
        import importlib

        import celery
        from jobbridge.compat import shared_task

        @shared_task
        def square(n):
            return n * n

        def test_the_real_celery_is_untouched():
            assert not getattr(celery, "__jobbridge__", False)
            real = importlib.import_module("celery.contrib.pytest")  # the real one imports as it always did
            assert real.__file__.startswith(celery.__path__[0])

        def test_a_worker_thread_on_sqlite(celery_app, celery_worker):
            assert square.delay(9).get(timeout=10) == 81
            assert celery_app.jobbridge_app().settings.connection().driver == "database"
        """})
    done = pytest_in(tmp_path, "-p", "jobbridge.compat.contrib.pytest")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout, done.stdout
    assert store.exists()
