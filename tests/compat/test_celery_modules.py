"""The ``celery.*`` modules real code imports, under install_as_celery(): provided, or refused by name.

Each case runs in a subprocess: install_as_celery() changes sys.modules for the rest of
the process, and the real Celery is installed in this environment too (django-celery-beat
needs it), so the last case checks that it still imports once the facade is uninstalled.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DJANGO_PROJECT = REPO / "tests" / "compat" / "projects" / "djangoproj"


def run(program: str, cwd: Path = REPO, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CELERY_", "JOBBRIDGE_", "DJANGO_"))}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(program)], cwd=cwd, capture_output=True,
                          text=True, timeout=60, env={**clean, "PYTHONDONTWRITEBYTECODE": "1", **env})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_every_provided_module_imports_with_what_real_code_uses() -> None:
    out = run("""
        from jobbridge.compat import install_as_celery
        install_as_celery()
        from datetime import datetime, timedelta
        from celery.utils.time import (maybe_make_aware, is_naive, make_aware, localize, timezone, to_utc,
                                       get_exponential_backoff_interval, remaining, maybe_iso8601)
        from celery.utils import cached_property, uuid
        from celery.utils.log import get_task_logger
        from celery.worker.control import Panel, control_command, inspect_command, revoke
        from celery.contrib.abortable import AbortableTask, AbortableAsyncResult, ABORTED
        from celery.contrib.testing.worker import start_worker, TestWorkController
        from celery.contrib.testing.app import TestApp, setup_default_app, DEFAULT_TEST_CONFIG
        from celery.contrib.testing.tasks import ping
        from celery._state import get_current_app, get_current_task
        import celery.contrib.pytest as plugin
        import celery, celery.app.task, celery.result, celery.exceptions, celery.signals, celery.states
        import celery.schedules, celery.canvas
        from jobbridge.compat import Task, RefusedFeature

        assert issubclass(AbortableTask, Task) and celery.contrib.abortable.AbortableTask is AbortableTask
        assert callable(plugin.celery_worker) and callable(plugin.pytest_configure)
        assert DEFAULT_TEST_CONFIG["broker_url"] == "memory://"
        aware = maybe_make_aware(datetime(2024, 1, 1, 12))
        assert not is_naive(aware) and aware.utcoffset() == timedelta(0)
        assert str(timezone.get_timezone("Europe/Paris")) == "Europe/Paris"

        @control_command(args=[("n", int)])
        def grow(state, n=1):
            return n

        @inspect_command()
        def depth(state):
            return 0

        assert Panel.data["grow"] is grow and Panel.meta["depth"].type == "inspect" and grow(None, 2) == 2
        try:
            revoke(None, "some-id")
        except RefusedFeature as exc:
            assert "app.control.revoke" in str(exc)
        else:
            raise AssertionError("calling a worker command must be refused")
        print("ok")
    """)
    assert out == "ok"


REFUSED = [
    ("celery.contrib.rdb", "celery.contrib.rdb", "debugger"),
    ("celery.contrib.migrate", "celery.contrib.migrate", "jobbridge purge"),
    ("celery.worker.state", "celery.worker.state", "jobbridge worker -A"),
    ("celery.beat", "celery.beat", "jobbridge beat"),
    ("celery.bin.worker", "celery.bin", "jobbridge worker -A"),
    ("celery.backends.redis", "celery.backends", "result_backend"),
    ("celery.app.control", "celery.app.control", "app.control.revoke"),
    ("celery.utils.functional", "celery.utils.functional", "celery.utils.time"),
    ("celery.platforms", "celery.platforms", "process manager"),
    ("celery.no_such_module", "celery.no_such_module", "internal"),
]


def test_any_other_celery_module_is_refused_naming_it_and_the_replacement() -> None:
    out = run(f"""
        import json
        from jobbridge.compat import install_as_celery, RefusedFeature
        install_as_celery()
        seen = {{}}
        for name in {[name for name, _, _ in REFUSED]!r}:
            try:
                __import__(name)
            except ImportError as exc:
                seen[name] = [type(exc).__name__, isinstance(exc, RefusedFeature),
                              isinstance(exc, ModuleNotFoundError), str(exc)]
        try:
            from celery.worker import WorkController
        except ImportError as exc:
            seen["WorkController"] = [type(exc).__name__, isinstance(exc, RefusedFeature), False, str(exc)]
        print(json.dumps(seen))
    """)
    seen = json.loads(out)
    for name, named, instead in REFUSED:
        kind, refused, not_found, message = seen[name]
        assert (kind, refused, not_found) == ("RefusedModule", True, False), name
        assert message.startswith(f"{named} is not provided by jobbridge's Celery facade"), message
        assert instead in message, message
    assert seen["WorkController"][:2] == ["RefusedModule", True]
    assert seen["WorkController"][3].startswith("celery.worker.WorkController is not provided")


def test_django_celery_beat_imports_under_install_as_celery() -> None:
    out = run("""
        from jobbridge.compat import install_as_celery
        install_as_celery()
        import django
        django.setup()  # INSTALLED_APPS has django_celery_beat and the admin: its admin module is imported
        from datetime import UTC, datetime
        from django_celery_beat.models import ClockedSchedule, CrontabSchedule, IntervalSchedule, PeriodicTask
        import django_celery_beat.admin
        import celery

        assert celery.__jobbridge__ and PeriodicTask._meta.app_label == "django_celery_beat"
        assert IntervalSchedule(every=10, period="seconds").schedule.run_every.total_seconds() == 10
        assert CrontabSchedule(minute="*/5").schedule.minute == set(range(0, 60, 5))
        due = ClockedSchedule(clocked_time=datetime(2000, 1, 1, tzinfo=UTC)).schedule
        assert due.is_due(datetime(2000, 1, 2, tzinfo=UTC)).is_due
        print("ok")
    """, cwd=DJANGO_PROJECT, DJANGO_SETTINGS_MODULE="proj.settings_beat")
    assert out == "ok"


def test_time_helpers_agree_with_celerys() -> None:
    """The same inputs through the real celery.utils.time and the facade's (no install: both in one process)."""
    out = run("""
        import json
        from datetime import datetime, timedelta, timezone as tz
        from zoneinfo import ZoneInfo
        import celery.utils.time as real
        from jobbridge.compat import timezones as ours

        paris = ZoneInfo("Europe/Paris")
        cases = [
            ("maybe_make_aware", (datetime(2024, 1, 1, 12),)),
            ("maybe_make_aware", (datetime(2024, 7, 1, 12), paris)),
            ("maybe_make_aware", (datetime(2024, 7, 1, 12), paris, False)),
            ("maybe_make_aware", (datetime(2024, 7, 1, 12, tzinfo=tz.utc), paris)),
            ("make_aware", (datetime(2024, 3, 31, 2, 30), paris)),   # skipped by the clock change
            ("make_aware", (datetime(2024, 10, 27, 2, 30), paris)),  # happens twice
            ("make_aware", (datetime(2024, 10, 27, 5, 30), paris)),
            ("localize", (datetime(2024, 7, 1, 12, tzinfo=tz.utc), paris)),
            ("localize", (datetime(2024, 7, 1, 12), paris)),
            ("to_utc", (datetime(2024, 7, 1, 12),)),
            ("is_naive", (datetime(2024, 7, 1),)),
            ("maybe_iso8601", ("2024-07-01T12:00:00+02:00",)),
            ("maybe_timedelta", (30,)),
            ("remaining", (datetime(2024, 1, 1, tzinfo=tz.utc), timedelta(hours=1),
                           datetime(2024, 1, 1, 0, 20, tzinfo=tz.utc))),
            ("get_exponential_backoff_interval", (2, 3, 100)),
            ("get_exponential_backoff_interval", (2, 10, 100)),
            ("rate", ("30/m",)), ("rate", ("2/h",)), ("rate", ("5",)),
            ("weekday", ("Tuesday",)),
        ]
        differ = []
        for name, args in cases:
            mine, theirs = getattr(ours, name)(*args), getattr(real, name)(*args)
            # equal, and shown alike (a datetime's str carries its offset): dateutil's tzoffset and the
            # standard library's timezone print differently under repr for the same offset
            if mine != theirs or str(mine) != str(theirs) or type(mine) is not type(theirs):
                differ.append([name, repr(args), repr(mine), repr(theirs)])
        local = datetime(2024, 7, 1, 12, tzinfo=tz.utc)
        if ours.timezone.to_local(local, paris) != real.timezone.to_local(local, paris):
            differ.append(["timezone.to_local"])
        print(json.dumps(differ))
    """)
    assert json.loads(out) == []


def test_the_real_celery_imports_again_once_the_facade_is_uninstalled() -> None:
    out = run("""
        from jobbridge.compat import install_as_celery
        from jobbridge.compat.install import uninstall
        install_as_celery()
        import celery.contrib.abortable
        uninstall()
        import celery, celery.utils.time, celery.contrib.abortable, celery.worker.control
        assert not getattr(celery, "__jobbridge__", False) and celery.utils.time.__file__.startswith(celery.__path__[0])
        from celery.worker import WorkController
        print("ok")
    """)
    assert out == "ok"
