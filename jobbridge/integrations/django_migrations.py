"""jobbridge's tables from a Django migration, for a project whose schema changes all go through ``migrate``.

::

    # accounts/migrations/0002_jobbridge_tables.py
    from django.db import migrations

    from jobbridge.integrations.django_migrations import create_tables


    class Migration(migrations.Migration):
        atomic = False  # jobbridge creates its tables on a connection of its own
        dependencies = [("accounts", "0001_initial")]
        operations = [migrations.RunPython(create_tables, migrations.RunPython.noop)]

`create_tables` does what ``jobbridge migrate`` does, on the migration's own
database (``django://<alias>``): the jobs, failed jobs, locks and schema
tables, and the result store's. Both are idempotent, so running both is
harmless. On an in-memory SQLite database (Django's test runner makes one by
default) it does nothing: no other connection can see that database, so no job
can be queued in it; run tasks eagerly in such tests.
"""

from __future__ import annotations

from typing import Any

from jobbridge.clock import SYSTEM_CLOCK
from jobbridge.drivers import Resources
from jobbridge.drivers import database as database_driver
from jobbridge.errors import ConfigurationError
from jobbridge.results.database import open_database_store

__all__ = ["create_tables"]


def create_tables(apps: Any, schema_editor: Any) -> None:
    """A ``RunPython`` operation: jobbridge's tables in the database the migration runs on."""
    conn = schema_editor.connection
    if conn.vendor == "sqlite" and conn.is_in_memory_db():
        return
    if conn.vendor == "sqlite" and conn.in_atomic_block:
        raise ConfigurationError(
            "create_tables runs in a migration with atomic = True, whose transaction holds SQLite's write "
            "lock, which jobbridge's own connection would wait for: set atomic = False on that migration")
    url = f"django://{conn.alias}"
    database_driver.open({"url": url}, Resources()).close()
    open_database_store(url, clock=SYSTEM_CLOCK).close()
