"""``config_from_object`` keeps its source and reads it when a setting is used, as Celery does; with real Django.

Why cookiecutter-django's ``test_user_count`` passes on Celery: its app holds
``django.conf.settings`` itself (``config_from_object('django.conf:settings', namespace='CELERY')``)
and looks ``CELERY_TASK_ALWAYS_EAGER`` up in it at each ``delay()``, so pytest-django's
``settings.CELERY_TASK_ALWAYS_EAGER = True`` (an ``override_settings``) is seen by the next call.
The facade does the same. And because nothing is read at ``config_from_object``, a Celery
setting jobbridge refuses never breaks the import of a Django settings module (every
``manage.py`` command): it is refused, with its reason, when the app is first used for work.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
from jobbridge.compat import Celery, RefusedFeature

from .django_project import PROJECT, environment, fresh_database, jobbridge, manage, run, shell

TABLE = json.loads((Path(__file__).parent / "parity" / "config_table.json").read_text())

#: run in a fresh process: settings.configure() as a library's test suite does, then Celery's programs
CONFIGURED = """
import json, sys
import django
from django.conf import settings
from django.test import override_settings
from jobbridge.compat import Celery
table = json.loads(sys.stdin.read())
settings.configure(**table["django_settings"])
django.setup()
out = {}
for name, program in table["django_programs"].items():
    scope = {"Celery": Celery, "settings": settings, "override_settings": override_settings}
    exec(program, scope)
    out[name] = scope["out"]
# a library's suite: no namespace, every name dir() lists (gettext_noop raises AttributeError when read)
app = Celery("lib")
app.config_from_object("django.conf:settings")
app.conf.check()
@app.task
def add(x, y):
    return x + y
with override_settings(CELERY_ALWAYS_EAGER=True):
    out["eager_add"] = add.delay(2, 3).get()
print(json.dumps(out))
"""


def test_after_settings_configure_the_settings_are_read_live_as_celery_reads_them() -> None:
    done = subprocess.run([sys.executable, "-c", CONFIGURED], input=json.dumps(TABLE), capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert found.pop("eager_add") == 5
    assert found == TABLE["django"]


def test_a_refused_setting_in_a_source_is_refused_at_the_first_dispatch_not_before() -> None:
    source = types.SimpleNamespace(task_default_priority=5, broker_url="memory://")
    app = Celery("lazy")
    app.config_from_object(source)

    @app.task
    def ping() -> str:
        return "pong"

    with pytest.raises(RefusedFeature, match=r"task_default_priority = 5 is refused.*queue"):
        ping.delay()
    source.task_default_priority = None  # fixed: the next use is checked again
    app.config_from_object(source)
    assert app.conf.task_default_priority is None
    app.conf.task_always_eager = True
    assert ping.delay().get() == "pong"


def test_a_value_changed_to_a_refused_one_after_the_first_use_is_refused_when_read() -> None:
    source = types.SimpleNamespace(task_serializer="json")
    app = Celery("lazy2", broker="memory://")
    app.config_from_object(source)
    app.conf.check()
    source.task_serializer = "pickle"
    with pytest.raises(RefusedFeature, match="pickle"):
        app.conf["task_serializer"]


COOKIECUTTER_TEST = '''
import pytest
from accounts.models import Account
from jobbridge.compat import shared_task
from jobbridge.compat.result import EagerResult


@shared_task()
def get_users_count():
    """cookiecutter-django's users/tasks.py, on this project's model."""
    return Account.objects.count()


@pytest.mark.django_db
def test_user_count(settings):
    """cookiecutter-django's users/tests/test_tasks.py, as it is written there."""
    batch_size = 3
    for n in range(batch_size):
        Account.objects.create(email=f"user{n}@example.com")
    settings.CELERY_TASK_ALWAYS_EAGER = True
    task_result = get_users_count.delay()
    assert isinstance(task_result, EagerResult)
    assert task_result.result == batch_size
'''


@pytest.mark.slow
def test_cookiecutter_djangos_task_test_passes(tmp_path: Path) -> None:
    (tmp_path / "test_tasks.py").write_text(textwrap.dedent(COOKIECUTTER_TEST))
    with fresh_database("sqlite", tmp_path) as db:
        env = environment(db, PYTHONPATH=str(PROJECT))
        done = run(env, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c",
                   str(PROJECT / "pytest.ini"), "--rootdir", str(PROJECT), str(tmp_path / "test_tasks.py"))
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr


@pytest.mark.slow
def test_a_refused_setting_never_breaks_manage_py_and_is_refused_at_first_use(tmp_path: Path) -> None:
    with fresh_database("sqlite", tmp_path) as db:
        env = environment(db, DJANGO_SETTINGS_MODULE="proj.settings_refused")
        manage(env, "migrate", "-v", "0")  # every command runs: the settings module imports
        worker = jobbridge(env, "worker", "-A", "proj", "--once")
        assert worker.returncode != 0
        assert "CELERY_TASK_DEFAULT_PRIORITY" in worker.stdout + worker.stderr, worker.stdout + worker.stderr
        assert "route urgent tasks to a queue" in worker.stdout + worker.stderr
        said = shell(env, "import json\nfrom accounts.tasks import send_welcome\n"
                          "try:\n    send_welcome.delay(1)\n    print(json.dumps('sent'))\n"
                          "except Exception as exc:\n    print(json.dumps(str(exc)))")
        assert "CELERY_TASK_DEFAULT_PRIORITY (task_default_priority) = 5 is refused" in said
