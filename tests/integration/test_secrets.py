"""Secrets never shown: not by ``jobbridge status``, the worker's banner and log, ``jobbridge failed``, or an error.

Everything runs through the real ``jobbridge`` command, in subprocesses, on
SQLite, on a Redis server of the test's own that requires a password, and on
PostgreSQL (trust auth, so a password in the URL is accepted and ignored). A
store's password is given in the URL's userinfo, then in its query string,
both forms the clients accept; and each store gets jobs whose payloads hold a
secret in a way the worker's job classes cannot decode (the producer and the
worker disagree on a field's type, or on the fields), so their errors, the
per-attempt log lines and the failed listing are where a secret would show.

This module is also the worker's app: ``-A tests.integration.test_secrets:make_bridge``.
"""

from __future__ import annotations

import os
import subprocess
import types
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jobbridge import Backoff, Job, JobBridge, JobContext
from jobbridge.settings import Settings
from tests.drivers.database_servers import fresh_postgres
from tests.drivers.redis_server import own_redis
from tests.integration.reliability_support import REPO, Workers

APP = "tests.integration.test_secrets:make_bridge"
QUEUE = "secrets"
#: the store's password, in every URL form
URL_SECRET = "Zq8vK3urlpw"
#: what the payloads hold that must never be shown (an identifier, so it can also be a field's name)
PAYLOAD_SECRET = "Xk4payloadT9"
PAYLOAD_INT = 73519046281
SECRETS = (URL_SECRET, PAYLOAD_SECRET, str(PAYLOAD_INT))
OWN_REDIS_PORT = 6397
_BAD = {"queue": QUEUE, "tries": 1, "backoff": Backoff.fixed(0)}


# -- the worker's job classes -----------------------------------------------------------------


class Ok(Job, name="secrets.ok", queue=QUEUE):
    """Decodes and runs: the proof that the worker reached the store through the password."""

    n: int

    def handle(self, ctx: JobContext) -> None:
        pass


class UuidFromText(Job, name="secrets.uuid-text", **_BAD):
    ref: uuid.UUID

    def handle(self, ctx: JobContext) -> None:
        pass


class UuidFromInt(Job, name="secrets.uuid-int", **_BAD):
    ref: uuid.UUID

    def handle(self, ctx: JobContext) -> None:
        pass


class IntFromText(Job, name="secrets.int", **_BAD):
    n: int

    def handle(self, ctx: JobContext) -> None:
        pass


class Labels(Job, name="secrets.labels", **_BAD):
    labels: dict[str, int]

    def handle(self, ctx: JobContext) -> None:
        pass


class Named(Job, name="secrets.named", **_BAD):
    n: int

    def handle(self, ctx: JobContext) -> None:
        pass


def make_bridge() -> JobBridge:
    return JobBridge(Settings.load(), jobs=[Ok, UuidFromText, UuidFromInt, IntFromText, Labels, Named])


# -- what an older (or confused) producer dispatches under the same names ------------------------


class SendsText(Job, name="secrets.uuid-text", queue=QUEUE):
    ref: str


class SendsInt(Job, name="secrets.uuid-int", queue=QUEUE):
    ref: int


class SendsTextForInt(Job, name="secrets.int", queue=QUEUE):
    n: str


class SendsTextLabels(Job, name="secrets.labels", queue=QUEUE):
    labels: dict[str, str]


def _with_secret_field(ns: dict[str, Any]) -> None:
    ns["__annotations__"] = {"n": int, PAYLOAD_SECRET: str}


#: a payload with a field the worker's class does not have, named by the secret
SendsSecretField: Any = types.new_class("SendsSecretField", (Job,), {"name": "secrets.named", "queue": QUEUE},
                                        _with_secret_field)


def dispatch_all(env: Mapping[str, str], cwd: Path) -> tuple[str, dict[str, str]]:
    """The good job's id, and the id of each undecodable one by kind."""
    bridge = JobBridge(Settings.load(environ=env, cwd=cwd),
                       jobs=[Ok, SendsText, SendsInt, SendsTextForInt, SendsTextLabels, SendsSecretField])
    try:
        bad = {
            "uuid holds text": bridge.dispatch(SendsText(ref=f"not-a-uuid-{PAYLOAD_SECRET}")),
            "uuid holds an int": bridge.dispatch(SendsInt(ref=PAYLOAD_INT)),
            "int holds text": bridge.dispatch(SendsTextForInt(n=PAYLOAD_SECRET)),
            "mapping value": bridge.dispatch(SendsTextLabels(labels={PAYLOAD_SECRET: "one"})),
            "unknown field": bridge.dispatch(SendsSecretField(n=1, **{PAYLOAD_SECRET: "x"})),
        }
        good = bridge.dispatch(Ok(n=1))
    finally:
        bridge.close()
    assert good is not None and all(bad.values())
    return good, {kind: str(job_id) for kind, job_id in bad.items()}


# -- running the command ----------------------------------------------------------------------


@dataclass
class Cli:
    """``jobbridge`` subprocesses with one environment (nothing inherited from the test's JOBBRIDGE_*)."""

    tmp: Path
    variables: dict[str, str]

    @property
    def env(self) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("JOBBRIDGE_")}
        return {**base, **self.variables, "PYTHONUNBUFFERED": "1"}

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        script = REPO / ".venv" / "bin" / "jobbridge"
        return subprocess.run([str(script), *args], cwd=self.tmp, env=self.env, capture_output=True, text=True,
                              timeout=120, check=False)


def shows_no_secret(text: str, where: str) -> None:
    found = [secret for secret in SECRETS if secret in text]
    assert not found, f"{where} shows {found}:\n{text}"


def drain_and_check(cli: Cli, tmp: Path) -> None:
    """Dispatch, look with status, drain with a real worker, list the failures: no secret anywhere."""
    good, bad = dispatch_all(cli.env, tmp)
    before = cli("status")
    assert before.returncode == 0, before.stderr
    shows_no_secret(before.stdout + before.stderr, "jobbridge status")

    workers = Workers(tmp, cli.variables)
    try:
        proc = workers.start("-Q", QUEUE, "--stop-when-empty", "--concurrency", "2", app=APP)
        code = workers.exited(proc)
        log = workers.output(proc)
    finally:
        workers.close()
    assert code == 0, log
    assert "store" in log and "Processed" in log, log  # the banner and the summary are in it
    shows_no_secret(log, "the worker's banner and log")

    listing = cli("failed")
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    for kind, job_id in bad.items():
        assert any(line.startswith(job_id) for line in lines), f"{kind} ({job_id}) is not listed:\n{listing.stdout}"
    assert not any(line.startswith(good) for line in lines), listing.stdout
    for kind, job_id in bad.items():
        line = next(line for line in lines if line.startswith(job_id))
        shows_no_secret(line, f"jobbridge failed, the {kind} line")

    after = cli("status")
    shows_no_secret(after.stdout + after.stderr, "jobbridge status after the drain")
    assert f"failed       {len(bad)}" in after.stdout, after.stdout


# -- the stores -------------------------------------------------------------------------------


def test_sqlite_shows_no_payload_secret(tmp_path: Path) -> None:
    drain_and_check(Cli(tmp_path, {"JOBBRIDGE_DATABASE_URL": f"sqlite:///{tmp_path / 'jobs.sqlite3'}"}), tmp_path)


@pytest.fixture
def secured_redis(tmp_path: Path) -> Iterator[int]:
    """A redis-server of the test's own that refuses every client without the password."""
    (tmp_path / "redis").mkdir()
    with own_redis(OWN_REDIS_PORT, tmp_path / "redis", "--requirepass", URL_SECRET) as server:
        yield server.port


@pytest.mark.parametrize("form", ["userinfo", "query"])
def test_redis_shows_neither_password_nor_payload_secret(form: str, secured_redis: int, tmp_path: Path) -> None:
    host = f"127.0.0.1:{secured_redis}"
    url = f"redis://:{URL_SECRET}@{host}/0" if form == "userinfo" else f"redis://{host}/0?password={URL_SECRET}"
    drain_and_check(Cli(tmp_path, {"JOBBRIDGE_REDIS_URL": url}), tmp_path)


@pytest.mark.parametrize("form", ["userinfo", "query"])
def test_postgresql_shows_neither_password_nor_payload_secret(form: str, tmp_path: Path) -> None:
    with fresh_postgres() as url:
        base, query = url.split("?", 1)
        if form == "userinfo":
            url = f"{base.replace('postgres@', f'postgres:{URL_SECRET}@', 1)}?{query}"
        else:
            url = f"{base}?{query}&password={URL_SECRET}"
        drain_and_check(Cli(tmp_path, {"JOBBRIDGE_DATABASE_URL": url}), tmp_path)


# -- URLs that fail validation ----------------------------------------------------------------

#: each a variable holding a URL that cannot be used, and the command that finds out
INVALID = [
    ("JOBBRIDGE_DATABASE_URL", f"postgres:{URL_SECRET}@127.0.0.1/test", "status"),  # no //: not a URL at all
    ("JOBBRIDGE_DATABASE_URL", f"host=127.0.0.1 user=postgres password={URL_SECRET}", "status"),  # keyword DSN
    ("JOBBRIDGE_DATABASE_URL", f"redis://:{URL_SECRET}@127.0.0.1:6379/0", "status"),  # another driver's scheme
    ("JOBBRIDGE_DATABASE_URL", f"ftp://u:{URL_SECRET}@127.0.0.1/x?password={URL_SECRET}", "status"),
    ("JOBBRIDGE_DATABASE_URL", f"postgresql://postgres:{URL_SECRET}@127.0.0.1:port/test", "status"),
    ("JOBBRIDGE_DATABASE_URL", f"postgresql://postgres:{URL_SECRET}@127.0.0.1:5432/test?sslmode=no", "status"),
    ("JOBBRIDGE_REDIS_URL", f"http://:{URL_SECRET}@127.0.0.1/0", "status"),
    ("JOBBRIDGE_REDIS_URL", f"redis://:{URL_SECRET}@127.0.0.1:port/0", "status"),  # a port that is none
    ("JOBBRIDGE_REDIS_URL", f"redis://:{URL_SECRET}@[::1/0", "status"),  # an IPv6 host never closed
    ("JOBBRIDGE_DRIVER", f"postgresql://postgres:{URL_SECRET}@127.0.0.1/test", "status"),
    # the result store is opened by the worker
    ("JOBBRIDGE_RESULTS", f"ftp://u:{URL_SECRET}@127.0.0.1/results", "worker"),
    ("JOBBRIDGE_RESULTS", f"postgresql://u:{URL_SECRET}@127.0.0.1:port/test", "worker"),
    ("JOBBRIDGE_RESULTS", f"redis://127.0.0.1:6379/0?password={URL_SECRET}&db=nonsense", "worker"),
]


@pytest.mark.parametrize(("variable", "value", "command"), INVALID,
                         ids=[f"{v}-{i}" for i, (v, _, _) in enumerate(INVALID)])
def test_a_url_that_fails_is_never_echoed_with_its_password(variable: str, value: str, command: str,
                                                            tmp_path: Path) -> None:
    cli = Cli(tmp_path, {variable: value, "PYTHONPATH": str(REPO)})
    args = ["worker", "-A", APP, "-Q", QUEUE, "--stop-when-empty"] if command == "worker" else [command]
    result = cli(*args)
    assert result.returncode != 0, result.stdout
    shows_no_secret(result.stdout + result.stderr, f"the error for {variable}")
