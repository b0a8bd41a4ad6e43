"""Transactional dispatch inside the Django project, run by ``manage.py shell`` in its folder (`main`).

The project's database comes from the PROJ_DB_* variables, jobbridge's from
``JOBBRIDGE_DATABASE_URL=django://default``. Each scenario does what a view
would (ORM writes and a dispatch in an ``atomic()`` block), looks at the store
from jobbridge's own connections as a polling worker would, and reports what it
saw; the last line printed is one JSON object, scenario name -> observations,
which tests/compat/test_django_transactions.py asserts on.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from blog.jobs import CountWords, bridge
from blog.models import Post
from blog.tasks import publish
from django.core.management import call_command
from django.db import connection, transaction
from sqlalchemy import func, select

from jobbridge import Job, JobBridge, JobContext
from jobbridge.drivers.database.aliases import resolve
from jobbridge.drivers.database.schema import jobs, locks
from jobbridge.errors import ConfigurationError
from jobbridge.integrations.django import close_connections  # importing it sets the fork hook, as -A does
from jobbridge.settings import Settings

SCENARIOS: dict[str, Callable[[], dict[str, Any]]] = {}


class Rollback(Exception):
    pass


class NotifyAuthor(Job, name="blog.notify-author", queue="words"):
    post_id: int

    def unique_id(self) -> str:
        return str(self.post_id)

    def handle(self, ctx: JobContext) -> None:
        Post.objects.filter(pk=self.post_id).update(title="notified")


bridge.register(NotifyAuthor)


def scenario(fun: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    SCENARIOS[fun.__name__] = fun
    return fun


@contextmanager
def rolled_back() -> Iterator[None]:
    with suppress(Rollback), transaction.atomic():
        yield
        raise Rollback


def stored(job_id: str | None) -> int:
    """Job rows with this id, read by jobbridge's own connection (as a worker would read them)."""
    return _count(select(func.count()).select_from(jobs).where(jobs.c.id == job_id))


def held_locks(key: str) -> int:
    return _count(select(func.count()).select_from(locks).where(locks.c.key == key))


def in_the_transaction(table: str, column: str, value: Any) -> int:
    """Rows the caller's own transaction sees, through Django's connection (what it wrote but did not commit)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {table} WHERE {column} = %s", [value])
        return int(cursor.fetchone()[0])


def _count(query: Any) -> int:
    with bridge.driver().engine.connect() as conn:  # type: ignore[attr-defined]
        conn.execution_options(jobbridge_begin="BEGIN")  # SQLite: a read, which waits on no writer
        return int(conn.execute(query).scalar_one())


def polled() -> int:
    """What a polling worker finds now: reserved jobs (PostgreSQL, MariaDB), or pending ones (SQLite).

    A claim on SQLite takes the write lock, which the open transaction holds until it ends: a
    worker's claim waits for the commit. A read does not wait, and shows what it would find.
    """
    driver = bridge.driver()
    if connection.vendor == "sqlite":
        return sum(c.pending for c in driver.counts() if c.queue == "words")
    return len(driver.reserve(["words"], 10))


@scenario
def rollback() -> dict[str, Any]:
    with rolled_back():
        post = Post.objects.create(title="draft", body="a b c")
        job_id = bridge.dispatch(CountWords(post.pk), transaction=connection)
        inside, own = stored(job_id), in_the_transaction("jobbridge_jobs", "id", job_id)
    return {"inside": inside, "written_in_the_transaction": own, "after": stored(job_id),
            "posts": Post.objects.filter(pk=post.pk).count(), "ran": bridge.run_pending(["words"]).processed}


@scenario
def commit() -> dict[str, Any]:
    listener = _listener()
    with transaction.atomic():
        post = Post.objects.create(title="kept", body="one two three four")
        job_id = bridge.dispatch(CountWords(post.pk), transaction="default")
        seen, woken_inside = polled(), _notified(listener, 0.2)
    stored_after, woken = stored(job_id), _notified(listener, 10)
    ran = bridge.run_pending(["words"]).processed
    post.refresh_from_db()
    return {"seen_inside": seen, "stored_after": stored_after, "ran": ran, "word_count": post.word_count,
            "woken_inside": woken_inside, "woken_after": woken, "left": stored(job_id)}


@scenario
def savepoint() -> dict[str, Any]:
    with transaction.atomic():
        post = Post.objects.create(title="outer", body="x")
        with rolled_back():
            inner = bridge.dispatch(CountWords(post.pk), transaction=connection)
        outer = bridge.dispatch(CountWords(post.pk), transaction=connection)
    found = {"inner": stored(inner), "outer": stored(outer)}
    bridge.run_pending(["words"])
    return found


@scenario
def unique_lock() -> dict[str, Any]:
    post = Post.objects.create(title="unique", body="x")
    key = f"blog.notify-author:{post.pk}"
    with rolled_back():
        dropped = bridge.dispatch(NotifyAuthor(post.pk), transaction=connection)
        held, own = held_locks(key), in_the_transaction("jobbridge_locks", "owner", dropped)
    lock_after_rollback = held_locks(key)
    with transaction.atomic():
        first = bridge.dispatch(NotifyAuthor(post.pk), transaction=connection)
        second = bridge.dispatch(NotifyAuthor(post.pk), transaction=connection)
    ran = bridge.run_pending(["words"]).processed
    return {"rolled_back_id": dropped is not None, "held_inside": held, "lock_in_the_transaction": own,
            "lock_after_rollback": lock_after_rollback,
            "first": first is not None, "duplicate_dropped": second is None, "ran": ran}


@scenario
def outside_atomic() -> dict[str, Any]:
    post = Post.objects.create(title="autocommit", body="x y")
    job_id = bridge.dispatch(CountWords(post.pk), transaction=connection)
    found = stored(job_id)
    bridge.run_pending(["words"])
    return {"stored_at_once": found}


@scenario
def facade() -> dict[str, Any]:
    app = publish.app.jobbridge_app()

    def pending() -> list[Any]:
        return app.driver().counts()

    before = sum(c.pending for c in pending())
    with rolled_back():
        post = Post.objects.create(title="facade", body="x")
        publish.apply_async((post.pk,), transaction=connection)
        publish.delay_on_commit(post.pk)
    after_rollback = sum(c.pending for c in pending()) - before
    with transaction.atomic():
        post = Post.objects.create(title="facade kept", body="x y")
        publish.delay_on_commit(post.pk)
        held = sum(c.pending for c in pending()) - before
    sent = sum(c.pending for c in pending()) - before
    publish.delay_on_commit(post.pk)  # no atomic block: sent at once
    at_once = sum(c.pending for c in pending()) - before - sent
    with transaction.atomic():
        joined = publish.apply_async((post.pk,), transaction=connection).id
        joined_inside = stored(joined), in_the_transaction("jobbridge_jobs", "id", joined)
    ran = app.run_pending().succeeded
    return {"after_rollback": after_rollback, "held_until_commit": held, "sent_at_commit": sent,
            "outside_atomic": at_once, "joined_inside": list(joined_inside), "ran": ran}


def _listener() -> Any:
    if connection.vendor != "postgresql":
        return None
    import psycopg

    settings = connection.settings_dict
    listen = psycopg.connect(host=settings["HOST"], port=settings["PORT"], user=settings["USER"],
                             dbname=settings["NAME"], autocommit=True)
    listen.execute("LISTEN jobbridge_jobs")
    return listen


def _notified(listener: Any, seconds: float) -> list[str] | None:
    """NOTIFY payloads received within ``seconds`` (PostgreSQL only; None elsewhere)."""
    if listener is None:
        return None
    return [n.payload for n in listener.notifies(timeout=seconds, stop_after=1)]


@scenario
def other_store() -> dict[str, Any]:
    """A store that cannot join the transaction (Redis): pushed from on_commit, the lock given back on rollback."""
    settings = Settings.from_mapping({"driver": "redis", "redis_url": os.environ["SCENARIO_REDIS_URL"],
                                      "redis_prefix": os.environ["SCENARIO_REDIS_PREFIX"]})
    redis = JobBridge(settings, jobs=[CountWords, NotifyAuthor])

    def count() -> int:
        return sum(c.pending for c in redis.driver().counts())

    post = Post.objects.create(title="elsewhere", body="x")
    with rolled_back():
        redis.dispatch(NotifyAuthor(post.pk), transaction=connection)
    after_rollback = count()
    with transaction.atomic():
        kept = redis.dispatch(NotifyAuthor(post.pk), transaction=connection)
        held = count()
    result = {"after_rollback": after_rollback, "lock_given_back": kept is not None, "held_until_commit": held,
              "after_commit": count()}
    redis.close()
    return result


@scenario
def another_database() -> dict[str, Any]:
    elsewhere = JobBridge(Settings.from_mapping({"database_url": os.environ["SCENARIO_OTHER_SQLITE"]}),
                          jobs=[CountWords])
    with transaction.atomic():
        try:
            elsewhere.dispatch(CountWords(1), transaction=connection)
            refused = ""
        except ValueError as exc:
            refused = str(exc)
    elsewhere.close()
    return {"refused": refused}


@scenario
def connections_around_attempts() -> dict[str, Any]:
    """The worker's middleware: an idle connection closed after an attempt (CONN_MAX_AGE 0), none in a block."""
    Post.objects.count()
    opened = connection.connection is not None
    counted = close_connections(None, lambda: Post.objects.count())  # type: ignore[arg-type]
    closed_after = connection.connection is None
    with transaction.atomic():
        Post.objects.count()
        close_connections(None, lambda: None)  # type: ignore[arg-type]
        kept_in_block = connection.connection is not None
    return {"opened": opened, "counted": counted, "closed_after": closed_after, "kept_in_block": kept_in_block}


@scenario
def fork() -> dict[str, Any]:
    """A forked child drops the connection it inherited unclosed, and opens its own; the parent's goes on."""
    Post.objects.count()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, and leave without running any of the parent's exit handlers
        os.close(read)
        dropped = connection.connection is None
        os.write(write, json.dumps([dropped, Post.objects.count()]).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as out:
        dropped, counted = json.loads(out.read())
    return {"child_dropped_the_inherited": dropped, "child_counted": isinstance(counted, int),
            "parent_counts": isinstance(Post.objects.count(), int)}


@scenario
def refusals() -> dict[str, Any]:
    found: dict[str, Any] = {"resolved": resolve("django://default")}
    for key, attempt in (("unknown_alias", lambda: resolve("django://nope")),
                         ("unknown_transaction_alias", lambda: bridge.dispatch(CountWords(1), transaction="nope")),
                         ("model_argument", lambda: publish.delay(Post.objects.create(title="m"))),
                         ("model_argument_on_commit", lambda: publish.delay_on_commit(Post.objects.first()))):
        try:
            attempt()
            found[key] = None
        except (ConfigurationError, ValueError, TypeError) as exc:
            found[key] = f"{type(exc).__name__}: {exc}"
    return found


def main(names: Sequence[str]) -> None:
    """Migrate, run the scenarios named, in order, and print what each saw as the last line: one JSON object."""
    call_command("migrate", verbosity=0)
    print(json.dumps({name: SCENARIOS[name]() for name in names}))
