"""``jobbridge failed``, ``failed show``, ``retry`` and ``flush`` through the real command, on SQLite.

The failures are real: ``cli.boom`` raises in a worker run in this process, so
the stored error holds a traceback. The filters are applied by the store,
on indexes that a database migrated by an older release gets from
``jobbridge migrate`` (schema version 3), which the query plan shows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import delete, insert, inspect, text

from jobbridge import JobBridge
from jobbridge.drivers.base import FailedFilter
from jobbridge.drivers.database import DatabaseDriver
from jobbridge.drivers.database.schema import SCHEMA_VERSION, failed_jobs, schema_versions
from tests.cli import cli_app
from tests.cli.support import jobbridge


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[dict[str, str], JobBridge]]:
    url = f"sqlite:///{tmp_path / 'jobs.sqlite3'}"
    bridge = cli_app.bridge_for(url)
    bridge.dispatch_many([cli_app.Boom(invoice=7), cli_app.Boom(invoice=8)])
    bridge.dispatch(cli_app.Boom(invoice=9), queue="billing")
    assert bridge.run_pending(["default", "billing"]).failed == 3
    yield {"JOBBRIDGE_DATABASE_URL": url}, bridge
    bridge.close()


def test_failed_lists_with_a_header_and_filters(store: tuple[dict[str, str], JobBridge]) -> None:
    env, _ = store
    ran = jobbridge("failed", env=env)
    assert ran.returncode == 0, ran.stderr
    header, *rows = ran.stdout.splitlines()
    assert header.startswith("ID") and header.index("QUEUE") == rows[0].index(rows[0].split()[1])
    assert len(rows) == 3 and all(row.endswith("ValueError: no such invoice") for row in rows)
    billing = jobbridge("failed", "--queue", "billing", env=env).stdout.splitlines()
    assert len(billing) == 2 and billing[1].split()[1:3] == ["billing", "cli.boom"]
    assert jobbridge("failed", "--job", "cli.noop", env=env).stdout.strip() == "no failed jobs match"
    assert len(jobbridge("failed", "--since", "1h", env=env).stdout.splitlines()) == 4
    assert jobbridge("failed", "--since", "2999-01-01", env=env).stdout.strip() == "no failed jobs match"
    bad = jobbridge("failed", "--since", "yesterday", env=env)
    assert bad.returncode == 2 and "neither a duration" in bad.stderr


def test_failed_json_has_the_documented_fields(store: tuple[dict[str, str], JobBridge]) -> None:
    env, _ = store
    data = json.loads(jobbridge("failed", "--json", "--queue", "billing", env=env).stdout)
    assert set(data) == {"total_failed", "jobs"} and data["total_failed"] == 3
    (job,) = data["jobs"]
    assert set(job) == {"id", "queue", "job", "attempts", "failed_at", "error"}
    assert (job["queue"], job["job"], job["attempts"], job["error"]) == ("billing", "cli.boom", 1,
                                                                       "ValueError: no such invoice")
    assert datetime.fromisoformat(job["failed_at"]).tzinfo == UTC


def test_failed_show_prints_the_traceback_and_the_payload_only_when_asked(
        store: tuple[dict[str, str], JobBridge]) -> None:
    env, bridge = store
    (one,) = bridge.driver().failed.list(1, FailedFilter(queue="billing"))
    ran = jobbridge("failed", "show", one.id, env=env)
    assert ran.returncode == 0, ran.stderr
    assert f"id         {one.id}" in ran.stdout and "queue      billing" in ran.stdout
    assert "Traceback (most recent call last):" in ran.stdout and 'raise ValueError("no such invoice")' in ran.stdout
    assert "payload" not in ran.stdout and '"invoice"' not in ran.stdout
    shown = jobbridge("failed", "show", one.id, "--payload", env=env)
    assert shown.stdout.rstrip().endswith('payload:\n{\n  "invoice": 9\n}')
    data = json.loads(jobbridge("failed", "show", one.id, "--json", "--payload", env=env).stdout)
    assert data["payload"] == {"invoice": 9} and data["error"] == one.error
    missing = jobbridge("failed", "show", "no-such-id", env=env)
    assert missing.returncode == 1 and "there is no failed job with id no-such-id" in missing.stderr


def test_retry_all_shows_progress_and_flush_asks_first(store: tuple[dict[str, str], JobBridge]) -> None:
    env, bridge = store
    driver = bridge.driver()
    assert isinstance(driver, DatabaseDriver)
    rows = [{"id": f"bulk-{i:05}", "queue": "bulk", "name": "cli.noop", "attempts": 1, "error": "x",
             "failed_at": 1.0 + i, "body": bridge.envelope(cli_app.Noop(n=i), queue="bulk").encode()}
            for i in range(1500)]
    with driver.engine.begin() as conn:
        conn.execute(insert(failed_jobs), rows)
    ran = jobbridge("retry", "all", env=env)
    assert ran.returncode == 0 and ran.stdout.strip() == "put 1503 failed job(s) back on their queues"
    assert "retrying" in ran.stderr
    assert bridge.run_pending(["default", "billing"]).failed == 3
    declined = jobbridge("flush", env=env)  # no answer: end of file aborts
    assert declined.returncode == 1 and "Delete all 3 failed job(s)" in declined.stderr
    assert driver.failed.count() == 3
    assert jobbridge("flush", "--yes", env=env).stdout.strip() == "deleted 3 failed job(s)"
    assert driver.failed.count() == 0


def test_an_older_schema_gets_the_filter_indexes_from_migrate(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    driver = DatabaseDriver(url)
    driver.migrate()
    with driver.engine.begin() as conn:  # the failed store as version 2 left it
        conn.execute(text("DROP INDEX jobbridge_failed_jobs_queue"))
        conn.execute(text("DROP INDEX jobbridge_failed_jobs_name"))
        conn.execute(delete(schema_versions))
        conn.execute(insert(schema_versions), {"version": 2, "applied_at": 0.0})
    ran = jobbridge("migrate", env={"JOBBRIDGE_DATABASE_URL": url})
    assert ran.returncode == 0, ran.stderr
    names = {index["name"] for index in inspect(driver.engine).get_indexes("jobbridge_failed_jobs")}
    assert {"jobbridge_failed_jobs_queue", "jobbridge_failed_jobs_name"} <= names
    with driver.engine.connect() as conn:
        assert conn.execute(text("SELECT max(version) FROM jobbridge_schema")).scalar() == SCHEMA_VERSION == 6
        plan = " ".join(str(row) for row in conn.execute(text(
            "EXPLAIN QUERY PLAN SELECT id FROM jobbridge_failed_jobs WHERE queue = 'x' ORDER BY failed_at DESC")))
    assert "jobbridge_failed_jobs_queue" in plan and "TEMP B-TREE" not in plan
    driver.close()
