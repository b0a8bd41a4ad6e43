"""``celery.contrib``: the parts of Celery's contrib real code uses — abortable tasks and the test fixtures.

Under `install_as_celery` these are ``celery.contrib.abortable``, ``celery.contrib.pytest``
and ``celery.contrib.testing``; without it, import them as ``jobbridge.compat.contrib...``.
The rest of Celery's contrib (rdb, migrate, sphinx) is refused by name
(compat/module_map.py says what to use instead).
"""
