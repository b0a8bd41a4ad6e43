"""Nothing waits forever: every driver fails a call to a store that accepts the connection and never answers.

The stores are local (tests/drivers/silent_servers.py: a socket on 127.0.0.1
that accepts and stays silent, an HTTP server), and the real servers for what
only they can show (a statement timeout). No timing is asserted: a call still
running after `HANG` seconds has hung, and fails the test. The bound is shown
by the error instead, which names the store and the setting (with its value)
that ended the wait, and by what the silent server saw (one connection per try).

Drivers run side by side, each in a thread (or a process) of its own, so the
defaults' waits (5 to 10 s) overlap instead of adding up; and those waits,
with nothing configured, start with the module and run while its other tests
do (`unconfigured`), to be collected by the last test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from jobbridge import Job, JobBridge, JobContext, signals
from jobbridge.errors import DriverUnavailable, RefusedSetting
from jobbridge.settings import Settings
from jobbridge.worker import Worker, WorkerOptions
from tests.drivers.silent_servers import Silent, http_server
from tests.services import ensure_mariadb, ensure_postgres, ensure_redis

#: a call still running after this long hangs (no timing is asserted below it)
HANG = 90.0
SECRET = "s3cret"
REPO = Path(__file__).resolve().parents[2]
DRIVERS = ("postgresql", "mariadb", "redis", "sqs", "kafka")


class Ping(Job, name="timeouts.ping"):
    n: int = 0

    def handle(self, ctx: JobContext) -> None:
        pass


def settings_for(driver: str, port: int, tmp: Path, **written: Any) -> dict[str, Any]:
    """The one-driver settings of a store at ``port``: its URL only, plus whatever the test writes."""
    extra = {f"{'database' if driver in ('postgresql', 'mariadb') else driver}_{k}": v for k, v in written.items()}
    if driver == "postgresql":
        return {"database_url": f"postgresql://postgres:{SECRET}@127.0.0.1:{port}/test", **extra}
    if driver == "mariadb":
        return {"database_url": f"mysql://root:{SECRET}@127.0.0.1:{port}/test", **extra}
    if driver == "redis":
        return {"redis_url": f"redis://:{SECRET}@127.0.0.1:{port}/0", **extra}
    if driver == "sqs":
        return {"driver": "sqs", "sqs_queue_url": f"http://127.0.0.1:{port}/000000000000/jobs",
                "sqs_region": "us-east-1", "sqs_key": "test", "sqs_secret": SECRET, **extra}
    kafka = {"driver": "kafka", "brokers": [f"127.0.0.1:{port}"], "locks": "locks", **written}
    return {"connections": {"default": "kafka", "kafka": kafka,
                            "locks": {"driver": "database", "url": f"sqlite:///{tmp / 'locks.sqlite3'}"}}}


def store_named(driver: str, port: int) -> str:
    """How the error names the store: its URL with the password masked, or its endpoint, or its brokers."""
    return {"postgresql": f"postgresql at postgresql://postgres@127.0.0.1:{port}/test",
            "mariadb": f"mysql at mysql://root@127.0.0.1:{port}/test",
            "redis": f"redis at redis://:***@127.0.0.1:{port}/0",
            "sqs": f'"http://127.0.0.1:{port}/"', "kafka": f"127.0.0.1:{port}"}[driver]


#: with nothing configured, the setting (and its default) that ends the wait on a silent store
DEFAULT_BOUND = {"postgresql": ("connect_timeout = 5 s", "JOBBRIDGE_DATABASE_CONNECT_TIMEOUT"),
                 "mariadb": ("statement_timeout = 10 s", "JOBBRIDGE_DATABASE_CONNECT_TIMEOUT"),
                 "redis": ("response_timeout_ms = 5000", "JOBBRIDGE_REDIS_RESPONSE_TIMEOUT_MS"),
                 "sqs": ("read_timeout", "JOBBRIDGE_SQS_READ_TIMEOUT"),
                 "kafka": ("request_timeout", "JOBBRIDGE_KAFKA_REQUEST_TIMEOUT")}


class Started:
    """Calls running each in a thread of its own, all started at once; `raised` collects them."""

    def __init__(self, calls: Mapping[str, Callable[[], object]]) -> None:
        self.names = set(calls)
        self._raised: dict[str, BaseException | None] = {}
        self._threads = [threading.Thread(target=self._run, args=item, daemon=True) for item in calls.items()]
        self._began = time.monotonic()
        for thread in self._threads:
            thread.start()

    def _run(self, name: str, call: Callable[[], object]) -> None:
        try:
            call()
            self._raised[name] = None
        except BaseException as exc:
            self._raised[name] = exc

    def raised(self) -> dict[str, BaseException | None]:
        """What each call raised (None: it returned); a call still running `HANG` s after the start fails."""
        for thread in self._threads:
            thread.join(max(0.0, self._began + HANG - time.monotonic()))
        hung = sorted(self.names - set(self._raised))
        assert not hung, f"still waiting after {HANG:g} s: {hung}"
        return dict(self._raised)


def each_at_once(calls: Mapping[str, Callable[[], object]]) -> dict[str, BaseException | None]:
    """Run every call in a thread of its own, all at once; what each raised (None: it returned)."""
    return Started(calls).raised()


def assert_names(text: str, driver: str, port: int, bound: tuple[str, ...]) -> None:
    """The message names the store (its password masked) and the setting that bounded the wait."""
    assert all(part in text for part in (store_named(driver, port), *bound)), f"{driver}: {text}"
    assert SECRET not in text


def assert_unavailable(error: BaseException | None, driver: str, port: int, bound: tuple[str, ...]) -> None:
    assert isinstance(error, DriverUnavailable), f"{driver}: {error!r}"
    assert_names(str(error), driver, port, bound)


def dispatch(settings: Mapping[str, Any]) -> Callable[[], object]:
    def call() -> object:
        bridge = JobBridge(Settings.from_mapping(settings), jobs=[Ping])
        try:
            return bridge.dispatch(Ping(n=1))
        finally:
            bridge.close()
    return call


@pytest.fixture
def silent() -> Iterator[dict[str, Silent]]:
    """A silent server per driver, so that each counts its own connections."""
    servers = {driver: Silent() for driver in DRIVERS}
    yield servers
    for server in servers.values():
        server.close()


@pytest.fixture(scope="module", autouse=True)
def unconfigured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Silent], Started]]:
    """A dispatch with nothing configured to a silent server of each driver, started with the module.

    Their default waits (up to 10 s) are the longest here: they run while the module's other tests do,
    each of which has silent servers of its own, and the last test collects them.
    """
    servers = {driver: Silent() for driver in DRIVERS}
    tmp = tmp_path_factory.mktemp("unconfigured")
    started = Started({d: dispatch(settings_for(d, servers[d].port, tmp)) for d in DRIVERS})
    yield servers, started
    for server in servers.values():
        server.close()


#: short timeouts, written as settings: each driver is bounded by what it is told
SHORT = {"postgresql": {"connect_timeout": 2}, "mariadb": {"statement_timeout": 1.5},
         "redis": {"response_timeout_ms": 400}, "sqs": {"read_timeout": 0.5, "max_attempts": 3},
         "kafka": {"request_timeout": 1.5, "connect_timeout": 1}}
SHORT_BOUND = {"postgresql": ("connect_timeout = 2 s",), "mariadb": ("statement_timeout = 1.5 s",),
               "redis": ("response_timeout_ms = 400",), "sqs": ("read_timeout", "JOBBRIDGE_SQS_MAX_ATTEMPTS"),
               "kafka": ("request_timeout 1.5 s",)}


def start_worker(settings: Mapping[str, Any]) -> Callable[[], object]:
    """A worker on the store: its start fails (the database driver), or its first store call does."""
    def call() -> object:
        bridge = JobBridge(Settings.from_mapping(settings), jobs=[Ping])
        failures: list[BaseException] = []
        try:
            worker = Worker(bridge, WorkerOptions(sleep=0.05))

            def failed(sender: object, **info: Any) -> None:
                failures.append(info["exception"])
                worker.stop()

            signals.queue_operation_failed.connect(failed, sender=worker)
            try:
                worker.run()
            finally:
                signals.queue_operation_failed.disconnect(failed, sender=worker)
        finally:
            bridge.close()
        raise failures[0]
    return call


def test_a_worker_on_a_silent_store_fails_its_start_or_its_first_call(
        silent: dict[str, Silent], tmp_path: Path) -> None:
    raised = each_at_once({d: start_worker(settings_for(d, silent[d].port, tmp_path, **SHORT[d])) for d in DRIVERS})
    for driver in DRIVERS:
        assert_unavailable(raised[driver], driver, silent[driver].port, SHORT_BOUND[driver])
    assert silent["sqs"].accepted >= 3  # max_attempts = 3: each try a connection of its own


def status_environment(driver: str, port: int, tmp: Path) -> tuple[dict[str, str], Path]:
    """``jobbridge status``'s environment and working directory: variables, or a jobbridge.toml for kafka."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBBRIDGE_")}
    cwd = tmp / driver
    cwd.mkdir()
    settings = settings_for(driver, port, cwd, **SHORT[driver])
    if driver == "kafka":
        kafka, locks = settings["connections"]["kafka"], settings["connections"]["locks"]
        _migrated(locks["url"])  # the lock store exists (status never creates one): only the brokers are silent
        (cwd / "jobbridge.toml").write_text(
            '[connections]\ndefault = "kafka"\n[connections.kafka]\ndriver = "kafka"\n'
            f'brokers = ["{kafka["brokers"][0]}"]\nlocks = "locks"\nrequest_timeout = 1.5\nconnect_timeout = 1\n'
            f'[connections.locks]\ndriver = "database"\nurl = "{locks["url"]}"\n')
        return env, cwd
    env.update({f"JOBBRIDGE_{key.upper()}": str(value) for key, value in settings.items()})
    return env, cwd


def _migrated(url: str) -> None:
    from jobbridge.drivers.database.driver import DatabaseDriver

    store = DatabaseDriver(url)
    try:
        store.migrate()
    finally:
        store.close()


def test_jobbridge_status_on_a_silent_store_exits_with_the_error(silent: dict[str, Silent], tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("jobbridge")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "jobbridge.cli"]
    procs = {}
    for driver in DRIVERS:
        env, cwd = status_environment(driver, silent[driver].port, tmp_path)
        env["PYTHONPATH"] = str(REPO)
        procs[driver] = subprocess.Popen([*command, "status"], cwd=cwd, env=env, text=True,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    for driver, proc in procs.items():
        try:
            output, _ = proc.communicate(timeout=HANG)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError(f"jobbridge status on a silent {driver} store still waiting after {HANG:g} s") \
                from None
        assert proc.returncode != 0, f"{driver}: {output}"
        assert_names(" ".join(output.split()), driver, silent[driver].port, SHORT_BOUND[driver])


def test_a_store_of_another_kind_is_named_as_such(silent: dict[str, Silent], tmp_path: Path) -> None:
    redis_port = int(ensure_redis().rsplit(":", 1)[1].split("/")[0])
    pg_port = int(ensure_postgres().rsplit(":", 1)[1].split("/")[0])
    with http_server() as http:
        raised = each_at_once({
            "postgresql at http": dispatch(settings_for("postgresql", http, tmp_path, connect_timeout=2)),
            "postgresql at redis": dispatch(settings_for("postgresql", redis_port, tmp_path, connect_timeout=2)),
            "redis at http": dispatch(settings_for("redis", http, tmp_path)),
            "redis at postgresql": dispatch(settings_for("redis", pg_port, tmp_path)),
        })
    assert_unavailable(raised["postgresql at http"], "postgresql", http, ("connect_timeout = 2 s", "PostgreSQL"))
    assert_unavailable(raised["postgresql at redis"], "postgresql", redis_port, ("connect_timeout = 2 s",))
    assert_unavailable(raised["redis at http"], "redis", http, ("is not a Redis server",))
    assert "Protocol error" not in str(raised["redis at http"])
    assert_unavailable(raised["redis at postgresql"], "redis", pg_port, ("cannot be reached",))


def test_a_statement_that_runs_out_of_time_is_stopped_naming_the_setting() -> None:
    from sqlalchemy import text

    from jobbridge.drivers.database.driver import DatabaseDriver
    from jobbridge.drivers.database.settings import Timeouts

    postgres, mariadb = ensure_postgres(), ensure_mariadb()
    default = DatabaseDriver(postgres)
    with default.engine.connect() as conn:
        assert conn.execute(text("SHOW statement_timeout")).scalar() == "10s"  # the default, on the server
    default.close()
    for url, sleep in ((postgres, "SELECT pg_sleep(30)"), (mariadb, "SELECT SLEEP(30)")):
        driver = DatabaseDriver(url, timeouts=Timeouts(statement=0.5))
        try:
            with pytest.raises(DriverUnavailable, match=r"did not finish a statement within statement_timeout = "
                                                        r"0.5 s.*JOBBRIDGE_DATABASE_STATEMENT_TIMEOUT"), \
                    driver.engine.connect() as conn:
                conn.execute(text(sleep))
            with driver.engine.connect() as conn:  # the next call gets a working connection
                assert conn.execute(text("SELECT 1")).scalar() == 1
        finally:
            driver.close()


def test_sqlite_refuses_a_connect_timeout_and_waits_statement_timeout_for_a_lock(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.sqlite3'}"
    with pytest.raises(RefusedSetting, match=r"connect_timeout.*no connection to wait for"):
        Settings.from_mapping({"database_url": url, "database_connect_timeout": 3})
    unwritten_url = JobBridge(Settings.from_mapping({"database_connect_timeout": 3}, source=str(tmp_path)))
    with pytest.raises(RefusedSetting, match="connect_timeout"):
        unwritten_url.driver()  # the default SQLite file: refused when the driver opens it
    bridge = JobBridge(Settings.from_mapping({"database_url": url, "database_statement_timeout": 1.5}))
    try:
        driver: Any = bridge.driver()
        with driver.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 1500
    finally:
        bridge.close()


def test_a_timeout_in_the_url_is_kept_and_one_written_twice_is_refused(silent: dict[str, Silent],
                                                                        tmp_path: Path) -> None:
    port = silent["postgresql"].port
    url = f"postgresql://postgres:{SECRET}@127.0.0.1:{port}/test?connect_timeout=2"
    raised = each_at_once({"url": dispatch({"database_url": url})})
    assert_unavailable(raised["url"], "postgresql", port, ("connect_timeout = 2 s",))
    twice = JobBridge(Settings.from_mapping({"database_url": url, "database_connect_timeout": 3}))
    with pytest.raises(RefusedSetting, match=r"connect_timeout.*query string sets it too"):
        twice.driver()


def test_the_redis_clients_get_their_timeouts_and_a_timeout_is_never_retried(silent: dict[str, Silent]) -> None:
    from jobbridge.drivers.redis.driver import RedisDriver
    from jobbridge.drivers.redis.settings import parse_settings

    driver = RedisDriver(parse_settings({"url": ensure_redis()}))
    try:
        for client, read in ((driver.client, 5.0), (driver._blocking, 10.0)):  # the block: 5 s more
            kwargs = client.connection_pool.connection_kwargs
            assert (kwargs["socket_connect_timeout"], kwargs["socket_timeout"]) == (5.0, read)
    finally:
        driver.close()
    server = silent["redis"]
    retrying = RedisDriver(parse_settings({"url": f"redis://:{SECRET}@127.0.0.1:{server.port}/0", "reconnect": True,
                                           "reconnect_attempts": 10, "response_timeout_ms": 300}))
    raised = each_at_once({"counts": retrying.counts})
    retrying.close()
    assert_unavailable(raised["counts"], "redis", server.port, ("response_timeout_ms = 300",))
    assert server.accepted == 1  # reconnect retries a dropped connection, never a silent one


def test_the_result_stores_are_bounded_too(silent: dict[str, Silent]) -> None:
    from jobbridge.results import open_store
    from jobbridge.testing.clock import FixedClock

    pg, redis_port = silent["postgresql"].port, silent["redis"].port
    raised = each_at_once({
        "postgresql": lambda: open_store(f"postgresql://postgres:{SECRET}@127.0.0.1:{pg}/test", clock=FixedClock(),
                                         connect_timeout=2),
        "redis": lambda: open_store(f"redis://:{SECRET}@127.0.0.1:{redis_port}/0", clock=FixedClock(),
                                    response_timeout_ms=300).get("an-id"),
    })
    assert_unavailable(raised["postgresql"], "postgresql", pg, ("connect_timeout = 2 s",))
    assert_unavailable(raised["redis"], "redis", redis_port, ("response_timeout_ms = 300",))


def test_with_nothing_configured_a_dispatch_to_a_silent_store_fails_naming_it(
        unconfigured: tuple[dict[str, Silent], Started]) -> None:
    silent, started = unconfigured  # last in the module: the dispatches have been waiting since its start
    raised = started.raised()
    for driver in DRIVERS:
        assert_unavailable(raised[driver], driver, silent[driver].port, DEFAULT_BOUND[driver])
    # one connection per try: the database driver's clock sample and its statement share one wait,
    # and SQS's two tries (max_attempts) are the only retry
    assert silent["postgresql"].accepted == 1 and silent["sqs"].accepted == 2
