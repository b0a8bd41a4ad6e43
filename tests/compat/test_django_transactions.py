"""Jobs inside Django's transaction, on PostgreSQL, SQLite and MariaDB: one project process per database.

The scenarios (tests/compat/django_scenarios.py) run inside the sample Django
project with ``JOBBRIDGE_DATABASE_URL=django://default``: the job row, its unique
lock and PostgreSQL's NOTIFY are written through Django's own connection in the
open ``atomic()`` block, so they commit with it, vanish with a rollback, and no
worker polling from jobbridge's own connections sees them before the commit. A
Redis store, which cannot join, is pushed to from ``on_commit`` instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.services import ensure_redis

from .django_project import environment, fresh_database, shell

pytestmark = pytest.mark.slow

EVERYWHERE = ["rollback", "commit", "savepoint", "unique_lock", "outside_atomic", "facade", "other_store", "fork"]
SQLITE_ONLY = ["another_database", "connections_around_attempts", "refusals"]


@pytest.fixture(scope="module", params=["postgresql", "sqlite", "mariadb"])
def seen(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """What every scenario observed on one database, from a single ``manage.py shell`` run."""
    folder = tmp_path_factory.mktemp(request.param)
    redis_url, prefix = ensure_redis(), f"django-{uuid.uuid4().hex[:8]}:"
    names = EVERYWHERE + (SQLITE_ONLY if request.param == "sqlite" else [])
    with fresh_database(request.param, folder) as db:
        env = environment(db, JOBBRIDGE_DATABASE_URL="django://default", SCENARIO_REDIS_URL=redis_url,
                          SCENARIO_REDIS_PREFIX=prefix, SCENARIO_OTHER_SQLITE=f"sqlite:///{folder / 'other.db'}")
        try:
            found = shell(env, f"import django_scenarios; django_scenarios.main({names!r})")
        finally:
            _forget_redis_keys(redis_url, prefix)
    yield {"vendor": request.param, **found}


def _forget_redis_keys(url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=prefix + "*"))
    if keys:
        client.delete(*keys)
    client.close()


def test_a_rolled_back_dispatch_leaves_no_row_and_never_runs(seen: dict[str, Any]) -> None:
    assert seen["rollback"] == {"inside": 0, "written_in_the_transaction": 1, "after": 0, "posts": 0, "ran": 0}


def test_a_committed_dispatch_runs_once_and_no_worker_sees_it_before_the_commit(seen: dict[str, Any]) -> None:
    found = seen["commit"]
    assert (found["seen_inside"], found["stored_after"], found["ran"], found["left"]) == (0, 1, 1, 0)
    assert found["word_count"] == 4  # the job read the post its own transaction wrote
    if seen["vendor"] == "postgresql":
        # NOTIFY was sent in the transaction: delivered at the commit, not before
        assert (found["woken_inside"], found["woken_after"]) == ([], ["words"])


def test_a_rolled_back_savepoint_takes_its_job_with_it(seen: dict[str, Any]) -> None:
    assert seen["savepoint"] == {"inner": 0, "outer": 1}


def test_a_unique_lock_is_taken_in_the_transaction_and_dropped_by_its_rollback(seen: dict[str, Any]) -> None:
    assert seen["unique_lock"] == {
        "rolled_back_id": True, "held_inside": 0, "lock_in_the_transaction": 1, "lock_after_rollback": 0,
        "first": True, "duplicate_dropped": True, "ran": 1}


def test_outside_an_atomic_block_the_job_is_stored_at_once(seen: dict[str, Any]) -> None:
    assert seen["outside_atomic"] == {"stored_at_once": 1}


def test_delay_on_commit_and_apply_async_with_a_transaction(seen: dict[str, Any]) -> None:
    assert seen["facade"] == {
        "after_rollback": 0,        # neither delay_on_commit nor apply_async(transaction=) sent anything
        "held_until_commit": 0, "sent_at_commit": 1,
        "outside_atomic": 1,        # no atomic block: delay_on_commit sends at once, as on_commit runs at once
        "joined_inside": [0, 1],    # apply_async(transaction=): in the transaction, invisible outside it
        "ran": 3}


def test_a_store_that_cannot_join_is_pushed_to_from_on_commit(seen: dict[str, Any]) -> None:
    assert seen["other_store"] == {"after_rollback": 0, "lock_given_back": True, "held_until_commit": 0,
                                   "after_commit": 1}


def test_a_forked_child_never_shares_the_parents_connection(seen: dict[str, Any]) -> None:
    assert seen["fork"] == {"child_dropped_the_inherited": True, "child_counted": True, "parent_counts": True}


@pytest.mark.parametrize("seen", ["sqlite"], indirect=True)
def test_a_transaction_on_another_database_is_refused(seen: dict[str, Any]) -> None:
    assert "a push can join only a transaction on the driver's own database" in seen["another_database"]["refused"]


@pytest.mark.parametrize("seen", ["sqlite"], indirect=True)
def test_the_middleware_closes_idle_connections_and_never_one_in_an_atomic_block(seen: dict[str, Any]) -> None:
    found = dict(seen["connections_around_attempts"])
    assert isinstance(found.pop("counted"), int)  # the attempt ran, and its result came back through
    assert found == {"opened": True, "closed_after": True, "kept_in_block": True}


@pytest.mark.parametrize("seen", ["sqlite"], indirect=True)
def test_what_is_refused_says_what_to_do(seen: dict[str, Any]) -> None:
    found = seen["refusals"]
    assert found["resolved"].startswith("sqlite:////") and found["resolved"].endswith("/db.sqlite3")
    assert "'django://nope' names the alias 'nope'" in found["unknown_alias"] and "'default'" in found[
        "unknown_alias"]
    assert found["unknown_transaction_alias"].startswith("ValueError: transaction='nope' names no database")
    for key in ("model_argument", "model_argument_on_commit"):
        assert found[key].startswith("EncodeError: argument 'post_id' (position 0) of blog.tasks.publish is a "
                                     "blog.models.Post"), found[key]
        assert "an object's id" in found[key]
