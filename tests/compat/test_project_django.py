"""The layout of Celery's "First steps with Django", unchanged but for one import line, under real workers.

tests/compat/projects/djangoproj is a project as ``django-admin startproject
proj .`` and ``startapp`` make it, with Celery's documented ``proj/celery.py``
(``config_from_object("django.conf:settings", namespace="CELERY")``, a bare
``autodiscover_tasks()``) and ``proj/__init__.py``, two apps whose ``tasks.py``
hold ``shared_task``s that read and write through the ORM, and jobs and
results in the project's own database (``django://default``).

One ``jobbridge worker -A proj`` per database (PostgreSQL, SQLite) serves every
check of its database; the test process talks to the project only through its
own processes (``manage.py shell``, the ``jobbridge`` command), as an operator
would, and never imports Django itself.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from .django_project import Database, ProjectWorker, environment, fresh_database, jobbridge, manage, run, shell

pytestmark = pytest.mark.slow

DEADLINE = 60.0


@dataclass
class Served:
    """A migrated database and the worker serving it."""

    db: Database
    env: dict[str, str]
    worker: ProjectWorker
    tables_after_migrate: set[str]


@pytest.fixture(scope="module", params=["postgresql", "sqlite"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp(request.param)
    with fresh_database(request.param, folder) as db:
        if db.vendor == "postgresql":
            # connections kept between tasks, as most deployments keep them, with Django's health check on
            db.extra.update(PROJ_CONN_MAX_AGE="600", PROJ_CONN_HEALTH_CHECKS="1")
        env = environment(db)
        manage(env, "migrate", "-v", "0")
        engine = db.engine()
        tables = set(inspect(engine).get_table_names())
        engine.dispose()
        # no DJANGO_SETTINGS_MODULE: proj/celery.py sets it, as Celery's layout has it
        worker = ProjectWorker(env, folder / "worker.log", "-A", "proj", "-Q", "celery,mail", "-c", "1",
                               "--sleep", "0.05")
        try:
            yield Served(db, env, worker, tables)
            assert worker.stop() == 0, worker.output()
        finally:
            if worker.alive():
                worker.proc.kill()


def check(served: Served, code: str) -> object:
    """Run ``code`` in the project; the worker must still be up afterwards."""
    found = shell(served.env, code)
    assert served.worker.alive(), served.worker.output()
    return found


def test_the_django_migration_and_jobbridge_migrate_make_the_tables(served: Served) -> None:
    assert {"jobbridge_jobs", "jobbridge_failed_jobs", "jobbridge_results", "blog_post"} <= \
        served.tables_after_migrate
    done = jobbridge(served.env, "migrate", "-A", "proj")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"migrated {served.db.vendor} at "), done.stdout


def test_shared_tasks_run_through_the_orm_and_their_results_are_read_back(served: Served) -> None:
    found = check(served, """
import json
from accounts.models import Account
from accounts.tasks import send_welcome
from blog.models import Post
from blog.tasks import publish, published_titles
post = Post.objects.create(title='first post', body='three little words')
words = publish.delay(post.pk).get(timeout=60)
account = Account.objects.create(email='ann@example.com')
welcome = send_welcome.delay(account.pk).get(timeout=60)
account.refresh_from_db()
print(json.dumps({'words': words, 'published': Post.objects.get(pk=post.pk).published,
                  'titles': published_titles.delay().get(timeout=60), 'welcome': welcome,
                  'account': account.pk, 'welcomed': account.welcomed_at is not None}))
""")
    assert isinstance(found, dict)
    assert found.pop("welcome") == {"account": found.pop("account"), "queue": "mail"}
    assert found == {"words": 3, "published": True, "titles": ["first post"], "welcomed": True}


def test_failed_retry_and_status_take_the_project(served: Served) -> None:
    task_id = check(served, """
import json
from accounts.models import Account
from accounts.tasks import send_welcome
account = Account.objects.create(email='bob@example.invalid')
result = send_welcome.delay(account.pk)
result.get(timeout=60, propagate=False)
print(json.dumps(result.id if result.state == 'FAILURE' else result.state))
""")
    listed = jobbridge(served.env, "failed", "-A", "proj")
    assert listed.returncode == 0, listed.stderr
    assert task_id in listed.stdout and "accounts.tasks.send_welcome" in listed.stdout
    check(served, "from accounts.models import Account; "
                  "Account.objects.filter(email='bob@example.invalid').update(email='bob@example.com'); print(1)")
    retried = jobbridge(served.env, "retry", "-A", "proj", str(task_id))
    assert retried.returncode == 0, retried.stderr
    assert wait_until_welcomed(served, "bob@example.com")
    status = jobbridge(served.env, "status", "-A", "proj")
    assert status.returncode == 0, status.stderr
    assert f"store        {served.db.vendor} at " in status.stdout
    assert task_id not in jobbridge(served.env, "failed", "-A", "proj").stdout


def wait_until_welcomed(served: Served, email: str) -> bool:
    return bool(check(served, f"""
import json, time
from accounts.models import Account
deadline = time.monotonic() + {DEADLINE}
while not Account.objects.filter(email={email!r}, welcomed_at__isnull=False).exists():
    if time.monotonic() > deadline:
        break
    time.sleep(0.05)
print(json.dumps(Account.objects.filter(email={email!r}, welcomed_at__isnull=False).exists()))
"""))


@pytest.mark.parametrize("served", ["postgresql"], indirect=True)
def test_a_connection_the_server_ended_between_two_tasks_is_replaced(served: Served) -> None:
    session = "from blog.tasks import database_session; print(database_session.delay().get(timeout=60))"
    first = check(served, session)
    engine = served.db.engine()
    with engine.begin() as conn:
        assert conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": first}).scalar() is True
    engine.dispose()
    second = check(served, session)
    assert isinstance(second, int) and second != first


def test_a_jobbridge_app_in_the_project_loads_django_first(served: Served) -> None:
    """``-A blog.jobs:bridge`` imports models at its top: Django must be set up before that import."""
    env = {**served.env, "DJANGO_SETTINGS_MODULE": "proj.settings", "JOBBRIDGE_DATABASE_URL": "django://default"}
    post = shell(env, "from blog.jobs import CountWords, bridge; from blog.models import Post; "
                      "post = Post.objects.create(title='jobbridge', body='a b c d e'); "
                      "bridge.dispatch(CountWords(post.pk)); print(post.pk)")
    drained = jobbridge(env, "worker", "-A", "blog.jobs:bridge", "-Q", "words", "--stop-when-empty")
    assert drained.returncode == 0, drained.stdout + drained.stderr
    assert shell(env, f"from blog.models import Post; print(Post.objects.get(pk={post}).word_count)") == 5


def test_the_projects_own_tests_pass_eagerly_under_manage_py_test_and_pytest(tmp_path: Path) -> None:
    with fresh_database("sqlite", tmp_path) as db:
        env = environment(db, CELERY_TASK_ALWAYS_EAGER="True")
        tested = manage(env, "test", "-v", "1")
        assert "Ran 5 tests" in tested.stderr and "OK" in tested.stderr, tested.stderr
        pytested = run(env, sys.executable, "-m", "pytest", "-q")
        assert pytested.returncode == 0, pytested.stdout + pytested.stderr
        assert "7 passed" in pytested.stdout, pytested.stdout
