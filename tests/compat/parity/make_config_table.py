"""Write config_table.json: which app ``-A`` finds, and what ``app.conf`` reads, as real Celery does.

Run it with a Python that has Celery and Django installed, in a virtualenv of its own (never the project's):

    python3 -m venv /tmp/celery-venv3 && /tmp/celery-venv3/bin/pip install celery django
    /tmp/celery-venv3/bin/python tests/compat/parity/make_config_table.py

Three tables, each checked against the facade by a test, without Celery:

- ``found``: for module layouts written to a folder, the app ``celery.app.utils.find_app`` finds for each
  ``-A`` spelling (by its ``main``), or the error (tests/compat/test_app_loading.py);
- ``conf``: small programs run with ``Celery`` bound to Celery's class, and what they read: the environment
  over the code, the code over a source, a namespaced source over the code, a source read again at each
  lookup, CELERY_CONFIG_MODULE (tests/compat/test_env_overrides.py);
- ``django``: the same under ``settings.configure()`` and ``override_settings`` (tests/compat/test_lazy_config.py).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("config_table.json")
IMPORT = "from celery import Celery"  # the facade's test writes its own import in its place

#: module layouts: path -> source, with IMPORT where the app class is imported
LAYOUTS: dict[str, str] = {
    "pkgsub/__init__.py": "",
    "pkgsub/celery.py": "IMPORT\napp = Celery('pkgsub.celery:app')\n",
    "pkgw/__init__.py": "",
    "pkgw/worker.py": "IMPORT\ncelery = Celery('pkgw.worker:celery')\n",
    "make_celery.py": ("IMPORT\nclass Flask:\n    pass\nflask_app = Flask()\n"
                       "celery_app = Celery('make_celery:celery_app')\n"),
    "both.py": "IMPORT\ncelery = Celery('both:celery')\napp = Celery('both:app')\n",
    "onlycelery.py": "IMPORT\nimport os\ncelery = Celery('onlycelery:celery')\nother = Celery('onlycelery:other')\n",
    "importsit.py": "IMPORT\nimport celery\nthe_app = Celery('importsit:the_app')\n",
    "pkgboth/__init__.py": "IMPORT\ncelery_app = Celery('pkgboth:celery_app')\n",
    "pkgboth/celery.py": "IMPORT\napp = Celery('pkgboth.celery:app')\n",
    "pkginit/__init__.py": "from .celery import app as celery_app\n",
    "pkginit/celery.py": "IMPORT\napp = Celery('pkginit.celery:app')\n",
    "noapp.py": "value = 3\n",
}
SPECS = ["pkgsub", "pkgsub.celery", "pkgsub.celery:app", "pkgsub.celery.app", "pkgw.worker.celery", "pkgw.worker",
         "pkgw.worker:celery", "make_celery", "make_celery.celery_app", "make_celery:celery_app", "both",
         "onlycelery", "onlycelery.other", "importsit", "pkgboth", "pkginit", "noapp", "missing_module",
         "missing_module.app", "pkgw.missing"]

#: small programs: ``out`` is what is recorded; ``Celery``, ``os`` and ``types`` are given
CONF: dict[str, str] = {
    "environment_over_the_code": """
os.environ['CELERY_BROKER_URL'] = 'redis://127.0.0.1:6379/5'
os.environ['CELERY_RESULT_BACKEND'] = 'redis://127.0.0.1:6379/6'
app = Celery('proj', broker='amqp://guest@localhost//', backend='rpc://')
out = [app.conf.broker_url, app.conf.result_backend]
""",
    "an_empty_variable_is_no_override": """
os.environ['CELERY_BROKER_URL'] = ''
app = Celery('proj', broker='redis://127.0.0.1:6379/1')
out = app.conf.broker_url
""",
    "the_environment_over_a_source": """
os.environ['CELERY_BROKER_URL'] = 'redis://127.0.0.1:6379/5'
app = Celery('proj')
app.config_from_object(types.SimpleNamespace(broker_url='redis://127.0.0.1:6379/2'))
out = app.conf.broker_url
""",
    "the_code_over_a_source_without_namespace": """
app = Celery('proj', broker='redis://127.0.0.1:6379/1', task_default_queue='code')
app.config_from_object(types.SimpleNamespace(broker_url='redis://127.0.0.1:6379/2', task_default_queue='source',
                                             timezone='Europe/Paris'))
out = [app.conf.broker_url, app.conf.task_default_queue, app.conf.timezone]
""",
    "a_namespaced_source_over_the_code": """
app = Celery('proj', broker='redis://127.0.0.1:6379/1', task_default_queue='code')
app.config_from_object(types.SimpleNamespace(CELERY_BROKER_URL='redis://127.0.0.1:6379/2',
                                             CELERY_TASK_DEFAULT_QUEUE='source'), namespace='CELERY')
app.conf.task_default_queue = 'set-after'
out = [app.conf.broker_url, app.conf.task_default_queue]
""",
    "a_source_is_read_again_at_each_lookup": """
source = types.SimpleNamespace(task_default_queue='first')
app = Celery('proj')
app.config_from_object(source)
first = app.conf.task_default_queue
source.task_default_queue = 'second'
source.task_always_eager = True
out = [first, app.conf.task_default_queue, app.conf.task_always_eager]
""",
    "old_names_in_a_source": """
app = Celery('proj')
app.config_from_object(types.SimpleNamespace(CELERY_ALWAYS_EAGER=True, BROKER_URL='redis://127.0.0.1:6379/3'))
out = [app.conf.task_always_eager, app.conf.broker_url]
""",
    "the_config_module_variable_without_a_source": """
module = types.ModuleType('jb_parity_celeryconfig')
module.task_default_queue = 'from-module'
sys.modules['jb_parity_celeryconfig'] = module
os.environ['CELERY_CONFIG_MODULE'] = 'jb_parity_celeryconfig'
out = Celery('proj').conf.task_default_queue
""",
    "the_config_module_variable_under_a_source": """
module = types.ModuleType('jb_parity_celeryconfig')
module.task_default_queue = 'from-module'
sys.modules['jb_parity_celeryconfig'] = module
os.environ['CELERY_CONFIG_MODULE'] = 'jb_parity_celeryconfig'
app = Celery('proj')
app.config_from_object(types.SimpleNamespace(task_default_queue='from-source'))
out = app.conf.task_default_queue
""",
    "a_missing_source_module_fails_when_read": """
app = Celery('proj')
app.config_from_object('jb_parity_no_such_module')
try:
    app.conf.task_default_queue
    out = 'read'
except ImportError as exc:
    out = type(exc).__name__
""",
}

#: run after ``settings.configure(**DJANGO_SETTINGS)``; ``override_settings`` and ``settings`` are given
DJANGO_SETTINGS = {"INSTALLED_APPS": [], "CELERY_TASK_ALWAYS_EAGER": False, "CELERY_ALWAYS_EAGER": False}
DJANGO: dict[str, str] = {
    "a_namespace_reads_the_live_settings": """
app = Celery('lib')
app.config_from_object('django.conf:settings', namespace='CELERY')
out = [app.conf.task_always_eager]
with override_settings(CELERY_TASK_ALWAYS_EAGER=True, CELERY_TASK_DEFAULT_QUEUE='overridden'):
    out += [app.conf.task_always_eager, app.conf.task_default_queue]
out += [app.conf.task_always_eager, app.conf.task_default_queue]
settings.CELERY_RESULT_EXTENDED = True
out.append(app.conf.result_extended)
del settings.CELERY_RESULT_EXTENDED
""",
    "without_a_namespace_old_names_are_read_live": """
app = Celery('lib')
app.config_from_object('django.conf:settings')
out = [app.conf.task_always_eager]
with override_settings(CELERY_ALWAYS_EAGER=True):
    out.append(app.conf.task_always_eager)
""",
    "a_namespaced_override_wins_over_the_code": """
app = Celery('lib', task_default_queue='code')
app.config_from_object('django.conf:settings', namespace='CELERY')
app.conf.task_always_eager = False
with override_settings(CELERY_TASK_ALWAYS_EAGER=True, CELERY_TASK_DEFAULT_QUEUE='settings'):
    out = [app.conf.task_always_eager, app.conf.task_default_queue]
""",
}


def run(program: str, names: dict[str, Any]) -> Any:
    """``program``'s ``out``, with the environment and sys.modules as they were before it."""
    env, modules = dict(os.environ), dict(sys.modules)
    scope = {"os": os, "sys": sys, "types": __import__("types"), **names}
    try:
        exec(program, scope)
        return scope["out"]
    except Exception as exc:  # recorded: the facade must fail the same way
        return f"error: {type(exc).__name__}"
    finally:
        os.environ.clear()
        os.environ.update(env)
        for name in set(sys.modules) - set(modules):
            del sys.modules[name]


def write_layouts(folder: Path, import_line: str) -> None:
    for path, text in LAYOUTS.items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text.replace("IMPORT", import_line))


def found_by_celery() -> dict[str, str]:
    from celery.app.utils import find_app

    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        write_layouts(Path(tmp), IMPORT)
        sys.path.insert(0, tmp)
        for spec in SPECS:
            before = set(sys.modules)
            try:
                out[spec] = find_app(spec).main
            except Exception as exc:
                out[spec] = f"error: {type(exc).__name__}"
            for name in set(sys.modules) - before:
                if not name.startswith(("celery", "kombu", "billiard", "vine", "amqp")):
                    del sys.modules[name]
    return out


def main() -> None:
    import celery
    import django
    from celery import Celery
    from django.conf import settings
    from django.test import override_settings

    settings.configure(**DJANGO_SETTINGS)
    django.setup()
    with contextlib.redirect_stderr(io.StringIO()):
        table = {
            "celery": celery.__version__,
            "layouts": LAYOUTS,
            "found": found_by_celery(),
            "conf": {name: run(p, {"Celery": Celery}) for name, p in CONF.items()},
            "django_settings": DJANGO_SETTINGS,
            "django_programs": DJANGO,
            "django": {name: run(p, {"Celery": Celery, "settings": settings, "override_settings": override_settings})
                       for name, p in DJANGO.items()},
            "conf_programs": CONF,
        }
    table["django_version"] = django.__version__
    OUT.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT}: {len(table['found'])} -A spellings, {len(CONF)} + {len(DJANGO)} programs")


if __name__ == "__main__":
    main()
