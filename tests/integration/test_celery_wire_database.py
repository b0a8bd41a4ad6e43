"""Celery's wire with Celery's database result backend: real Celery 5.7 and jobbridge share its tables.

The broker is Redis (database 13, flushed per test); results are in ``celery_taskmeta`` on
PostgreSQL (a schema of this module's own, chosen by ``search_path`` in the URL, so both
sides' tables land in it) and on SQLite (a file of the test's own). Each test runs both
directions on PostgreSQL: a Celery client whose tasks a jobbridge worker runs, read back by Celery's own
database backend, and at the same time (on a broker database of their own, 14) the facade's tasks
run by ``celery worker``, read back by the facade. On SQLite, Celery's backend object and the store
write and read each other's rows directly.
The harness (processes, the client, the app) is tests/integration/test_celery_wire.py's.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa

from jobbridge.clock import SYSTEM_CLOCK
from jobbridge.results import SUCCESS, ResultRecord, open_store
from jobbridge.results.celery_database import UnreadableResult
from tests.integration import test_celery_wire as harness
from tests.services import ensure_postgres, ensure_redis, exclusive

URL = "redis://127.0.0.1:6379/4"
#: the broker of the other direction (the facade's tasks, run by celery worker)
OTHER = "redis://127.0.0.1:6379/8"
ROOT = harness.ROOT
SCHEMA = "jb_celery_wire_db"
PG = f"postgresql+psycopg://127.0.0.1:5432/test?options=-csearch_path%3D{SCHEMA}"
celery_bin = harness.celery_bin


@pytest.fixture(scope="module")
def celery_db_bin(celery_bin: Path) -> Path:
    """Celery's venv, with the PostgreSQL client its database backend needs (SQLAlchemy is there already)."""
    with exclusive("venv-celery-5.7"):  # the venv is shared with the other wire modules, on the other worker
        marker = celery_bin.parent / ".psycopg"
        if not marker.exists():
            done = subprocess.run([str(celery_bin / "pip"), "install", "-q", "psycopg[binary]==3.3.9"],
                                  capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, done.stderr[-2000:]
            marker.touch()
    return celery_bin


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> Iterator[redis.Redis]:
    ensure_redis()
    monkeypatch.setattr(harness, "URL", URL)
    client = redis.Redis.from_url(URL)
    client.flushdb()
    yield client
    client.flushdb()


@pytest.fixture
def postgres() -> Iterator[str]:
    ensure_postgres()
    engine = sa.create_engine("postgresql+psycopg://127.0.0.1:5432/test")
    with engine.begin() as conn:
        conn.execute(sa.text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
        conn.execute(sa.text(f"CREATE SCHEMA {SCHEMA}"))
    try:
        yield PG
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
        engine.dispose()


def _both_ways(tmp: Path, broker: redis.Redis, bin: Path, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both directions at once, each on a broker database of its own, results in the one set of tables."""
    monkeypatch.setenv("WIRE_BACKEND", "db+" + backend)
    other = redis.Redis.from_url(OTHER)
    other.flushdb()
    open_store("celery+db+" + backend, clock=SYSTEM_CLOCK).close()  # the tables as jobbridge makes them, for both
    started = time.monotonic()
    workers = [harness.jobbridge_worker(tmp), harness.celery_worker(tmp, bin, WIRE_BROKER=OTHER)]
    clients = [_client(bin / "python", "celery", URL), _client(Path(sys.executable), "jobbridge", OTHER)]
    try:
        outs = [c.communicate(timeout=120) for c in clients]
        print(f"\nboth clients done in {time.monotonic() - started:.1f}s")
    finally:
        for worker in workers:
            worker.stop()
        other.flushdb()
    for c, (_, err) in zip(clients, outs, strict=True):
        assert c.returncode == 0, err[-3000:]
    by_side = {"celery": json.loads(outs[0][0].strip().splitlines()[-1]),
               "jobbridge": json.loads(outs[1][0].strip().splitlines()[-1])}
    for client_side, worker in (("celery", workers[0]), ("jobbridge", workers[1])):
        _check(by_side[client_side], worker)
    # which side ran each direction: every attempt of each client's retrying task, and what each worker ran
    flaky = {side: [x.decode() for x in broker.lrange(f"wire:flaky:{side}-flaky", 0, -1)] for side in by_side}
    assert flaky == {"celery": ["0|jobbridge", "1|jobbridge", "2|jobbridge"],
                     "jobbridge": ["0|celery", "1|celery", "2|celery"]}


def _client(python: Path, side: str, broker_url: str) -> subprocess.Popen[str]:
    return subprocess.Popen([str(python), "-m", "tests.integration.celery_wire_client", "10", "few"], cwd=ROOT,
                            env=harness._env(side, WIRE_BROKER=broker_url), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _check(got: dict[str, object], worker: harness.Proc) -> None:
    assert got["adds"] == [2 * i for i in range(10)], worker.output()
    assert got["echo"] == [[1, "two", [3]], {"four": {"five": 5}}]
    assert (got["countdown"], got["retrying"], got["chain"]) == (101, 2, 10)


def test_celery_and_jobbridge_share_celerys_tables_on_postgresql(
        tmp_path: Path, broker: redis.Redis, celery_db_bin: Path, postgres: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    _both_ways(tmp_path, broker, celery_db_bin, postgres, monkeypatch)
    engine = sa.create_engine(postgres)
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT status, count(*) FROM celery_taskmeta GROUP BY status")).all()
        tables = set(conn.execute(sa.text(
            "SELECT tablename FROM pg_tables WHERE schemaname = :s"), {"s": SCHEMA}).scalars())
    engine.dispose()
    print(f"\ncelery_taskmeta on PostgreSQL: {dict(rows)}")  # type: ignore[arg-type]
    assert dict(rows).get("SUCCESS", 0) >= 2 * 14  # type: ignore[arg-type]
    assert {"celery_taskmeta", "celery_tasksetmeta", "jobbridge_results"} <= tables


CELERY_SIDE = """
import json, sys
from celery import Celery
app = Celery("wire", backend="db+" + sys.argv[1])
read = app.AsyncResult("jb-ok").get(timeout=10), app.AsyncResult("jb-progress").state
try:
    app.AsyncResult("jb-failed").get(timeout=10)
    raised = None
except Exception as exc:
    raised = [type(exc).__name__, str(exc)]
app.backend.store_result("c-ok", {"rows": [1, 2]}, "SUCCESS")
app.backend.mark_as_failure("c-failed", KeyError("gone"))
app.GroupResult("c-group", [app.AsyncResult("c-ok"), app.AsyncResult("c-failed")]).save()
group = [r.id for r in app.GroupResult.restore("jb-group").results]
print(json.dumps({"read": read, "raised": raised, "group": group}))
"""


def test_celerys_database_backend_and_the_store_read_each_other_on_sqlite(tmp_path: Path, celery_bin: Path) -> None:
    """On SQLite, Celery's own backend object against the store (the worker round trip is PostgreSQL's test):
    results both ways, and a group saved by each side restored by the other (celery_tasksetmeta)."""
    url = f"sqlite:///{tmp_path / 'results.sqlite3'}"
    store = open_store("celery+db+" + url, clock=SYSTEM_CLOCK)
    try:
        store.store(ResultRecord("jb-ok", SUCCESS, name="wire.add", result={"n": [1, "two"]}), 600)
        store.store(ResultRecord("jb-progress", "PROGRESS", meta={"done": 3}), 600)
        store.store(ResultRecord("jb-failed", "FAILURE", error="ValueError: boom",
                                 exception_type="builtins.ValueError"), 600)
        store.store(ResultRecord("celery-group-meta:jb-group", "GROUP", result=["jb-ok", "jb-failed"]), 600)
        done = subprocess.run([str(celery_bin / "python"), "-c", CELERY_SIDE, url], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr[-3000:]
        assert json.loads(done.stdout.strip().splitlines()[-1]) == {
            "read": [{"n": [1, "two"]}, "PROGRESS"], "raised": ["ValueError", "boom"],
            "group": ["jb-ok", "jb-failed"]}
        ok, failed = store.get("c-ok"), store.get("c-failed")
        assert ok is not None and (ok.state, ok.result) == (SUCCESS, {"rows": [1, 2]})
        assert failed is not None and failed.state == "FAILURE"
        assert (failed.exception_type, failed.error) == ("builtins.KeyError", "KeyError: gone")
        group = store.get("celery-group-meta:c-group")  # a group Celery saved, as the facade restores it
        assert group is not None and group.result == ["c-ok", "c-failed"]
    finally:
        store.close()


def test_a_pickled_row_is_refused_unread_and_celerys_older_table_is_read(tmp_path: Path) -> None:
    """Celery 5.6 and earlier pickle the result column: jobbridge names that and never loads it."""
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # the table an older Celery made without result_extended: no name column
        conn.execute(sa.text("CREATE TABLE celery_taskmeta (id INTEGER PRIMARY KEY AUTOINCREMENT, task_id "
                             "VARCHAR(155) UNIQUE, status VARCHAR(50), result BLOB, date_done DATETIME, "
                             "traceback TEXT)"))
        conn.execute(sa.text("INSERT INTO celery_taskmeta (task_id, status, result) VALUES (:i, 'SUCCESS', :r)"),
                     {"i": "pickled", "r": pickle.dumps({"would": "run code"})})
    engine.dispose()
    store = open_store("celery+db+" + url, clock=SYSTEM_CLOCK)
    try:
        with pytest.raises(UnreadableResult, match=r"pickle.*never loads.*Celery 5\.7"):
            store.get("pickled")
        store.store(ResultRecord("fresh", SUCCESS, name="wire.add", result=[1, {"a": 2}]), 600)
        got = store.get("fresh")
        assert got is not None and got.state == SUCCESS and got.result == [1, {"a": 2}]
        store.store(ResultRecord("fresh", "STARTED"), 600)  # a late state never turns a SUCCESS back
        again = store.get("fresh")
        assert again is not None and again.state == SUCCESS
    finally:
        store.close()
