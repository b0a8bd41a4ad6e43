"""A project that tests its Celery tasks with Celery's fixtures, changed only by install_as_celery()."""

from jobbridge.compat import install_as_celery

install_as_celery()

import pytest  # noqa: E402

pytest_plugins = ("celery.contrib.pytest",)


@pytest.fixture(scope="session")
def celery_includes():
    return ["shop.tasks"]
