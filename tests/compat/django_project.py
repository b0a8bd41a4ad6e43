"""The sample Django project (tests/compat/projects/djangoproj) run as its users run it: real processes.

`fresh_database` makes the project an empty database of its own on SQLite,
PostgreSQL or MariaDB (the PROJ_DB_* variables its settings read); `shell`
runs Python in it through ``manage.py shell`` and returns the JSON the code
printed last; `jobbridge` runs a command of the CLI in the project's folder, as
``jobbridge worker -A proj`` is run there; `ProjectWorker` is a worker process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from sqlalchemy import Engine, create_engine
from sqlalchemy.pool import NullPool

from jobbridge.drivers.database.engine import parse_url
from tests.drivers.database_servers import unique_name
from tests.services import ensure_mariadb, ensure_postgres

PROJECT = Path(__file__).resolve().parent / "projects" / "djangoproj"
HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
TIMEOUT = 120


@dataclass
class Database:
    """One empty database the project runs on: its PROJ_DB_* variables, and a URL to look inside it."""

    vendor: str
    env: dict[str, str]
    url: str
    extra: dict[str, str] = field(default_factory=dict)

    def engine(self) -> Engine:
        return create_engine(parse_url(self.url), poolclass=NullPool)


@contextmanager
def fresh_database(vendor: str, folder: Path) -> Iterator[Database]:
    """An empty database for the project, dropped afterwards (SQLite: a file in ``folder``)."""
    if vendor == "sqlite":
        path = folder / "db.sqlite3"
        yield Database(vendor, {"PROJ_DB_NAME": str(path)}, f"sqlite:///{path}")
        return
    name = unique_name()
    base = ensure_postgres() if vendor == "postgresql" else ensure_mariadb()
    admin = create_engine(parse_url(base), poolclass=NullPool, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    engine, user, port = (("postgresql", "postgres", "5432") if vendor == "postgresql"
                          else ("mysql", "root", "3306"))
    env = {"PROJ_DB_ENGINE": f"django.db.backends.{engine}", "PROJ_DB_NAME": name, "PROJ_DB_USER": user,
           "PROJ_DB_HOST": "127.0.0.1", "PROJ_DB_PORT": port}
    try:
        yield Database(vendor, env, f"{base.rsplit('/', 1)[0]}/{name}")
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE {name}" + (" WITH (FORCE)" if vendor == "postgresql" else ""))
        admin.dispose()


def environment(db: Database, **extra: str) -> dict[str, str]:
    """This process's environment without jobbridge, Celery or Django settings, plus the project's database."""
    own = ("JOBBRIDGE_", "CELERY_", "DJANGO_", "PROJ_", "PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if not k.startswith(own)}
    env.update({"PYTHONUNBUFFERED": "1", "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", **db.env, **db.extra,
                **extra})
    return env


def run(env: dict[str, str], *command: str) -> subprocess.CompletedProcess[str]:
    """A command in the project's folder; its output, whatever its exit status."""
    return subprocess.run(command, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=TIMEOUT,
                          check=False)


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = run(env, sys.executable, "manage.py", *args)
    assert done.returncode == 0, f"manage.py {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    return done


def shell(env: dict[str, str], code: str) -> Any:
    """Run ``code`` under ``manage.py shell`` (Django set up, as in the project's own processes); its last JSON line."""
    done = manage({**env, "PYTHONPATH": str(HERE)}, "shell", "-c", code)
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines, f"the shell printed nothing:\n{done.stderr}"
    return json.loads(lines[-1])


def jobbridge(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run(env, str(BIN / "jobbridge"), *args)


class ProjectWorker:
    """``jobbridge worker -A <spec> ...`` in the project's folder, its output in a file."""

    def __init__(self, env: dict[str, str], log: Path, *args: str) -> None:
        self.log = log
        out: IO[bytes] = log.open("wb")
        self.proc = subprocess.Popen([str(BIN / "jobbridge"), "worker", *args], cwd=PROJECT, env=env, stdout=out,
                                     stderr=subprocess.STDOUT)
        out.close()

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int:
        """SIGTERM: finish the running job and exit; the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"the worker did not stop on SIGTERM:\n{self.output()}") from None
