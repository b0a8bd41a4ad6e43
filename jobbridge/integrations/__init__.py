"""What jobbridge does inside the web framework a project runs on (Django: `jobbridge.integrations.django`).

Each integration module imports its framework at the top, so it is imported
only once that framework is known to be in use (`django_in_use`); jobbridge
itself never needs one. The integrations hook into the core through its own
seams: a ``call_next`` middleware around each attempt, the database driver's
URL schemes (`jobbridge.drivers.database.aliases`), and ``transaction=``
(`jobbridge.transactions`).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobbridge.app import JobBridge

__all__ = ["adopt_django", "django_in_use", "django_installed_apps", "django_on_commit", "setup_django"]


def django_in_use() -> bool:
    """Whether this process runs a Django project: Django installed and its settings named or configured.

    Named: ``DJANGO_SETTINGS_MODULE`` is set (by the environment, or by a module
    such as ``proj/celery.py`` that ``-A`` imported). Configured: the settings
    were made in code (``settings.configure(...)``). Django is not imported to
    answer, unless something imported it already.
    """
    if "django" not in sys.modules and importlib.util.find_spec("django") is None:
        return False
    if os.environ.get("DJANGO_SETTINGS_MODULE"):
        return True
    conf = sys.modules.get("django.conf")
    return bool(conf is not None and conf.settings.configured)


# Each entry point below imports its integration module inside the function, with Django, and only
# once `django_in_use` said yes: jobbridge runs without Django installed.


def setup_django() -> None:
    """``django.setup()`` in a Django project, before task modules are imported; nothing elsewhere."""
    if django_in_use():
        from jobbridge.integrations.django import setup

        setup()


def adopt_django(bridge: JobBridge) -> None:
    """In a Django project: ``bridge``'s attempts look after Django's connections (``-A`` loading does this)."""
    if django_in_use():
        from jobbridge.integrations.django import adopt

        adopt(bridge)


def django_installed_apps() -> list[str]:
    """The installed apps' packages (Django set up first), for autodiscovery; none outside a Django project."""
    if not django_in_use():
        return []
    from jobbridge.integrations.django import installed_app_names

    return installed_app_names()


def django_on_commit(action: Callable[[], Any]) -> None:
    """Run ``action`` when the default database's transaction commits (at once outside an atomic block)."""
    if not django_in_use():
        raise RuntimeError("no Django project is configured in this process: set DJANGO_SETTINGS_MODULE, "
                           "or send the job at once")
    from jobbridge.integrations.django_transactions import on_commit

    on_commit(action)
