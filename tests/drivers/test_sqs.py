"""The sqs driver: the contract suite against a real SQS-compatible server, then what only SQS does.

The server is ministack (tests/services.py starts it). Each test gets its own
set of queues (``jbt-<random>`` and its ``-high``, ``-low``, ``-other`` and
``-failed``), deleted afterwards. SQS runs delays and visibility timeouts on
the server's real clock, so the contract tests that advance a FixedClock past
one are replaced by tests below that wait a second or two of real time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import BotoCoreError

from jobbridge.clock import SYSTEM_CLOCK, Clock
from jobbridge.drivers import Resources, driver_for_url, load, schema_of
from jobbridge.drivers import sqs as sqs_module
from jobbridge.drivers.base import Driver
from jobbridge.drivers.sqs import MAX_BODY, SqsDriver
from jobbridge.drivers.sqs_client import send
from jobbridge.drivers.sqs_failed import MAX_ERROR, REDRIVEN
from jobbridge.drivers.sqs_settings import parse_settings
from jobbridge.envelope import Envelope, Reservation
from jobbridge.errors import (
    ConfigurationError,
    DriverError,
    DriverUnavailable,
    NoFailedJob,
    PayloadTooLarge,
    RefusedSetting,
    StoreRefused,
)
from jobbridge.settings import Settings
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import DriverContract, FailedStoreContract, make_envelope, pending
from tests.services import ensure_sqs

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

ACCOUNT = "000000000000"
REGION = "us-east-1"
SUFFIXES = ("high", "low", "other", "failed")
REAL_TIME = ("SQS runs delays and visibility timeouts on the server's real clock, which a FixedClock "
             "cannot advance; replaced by {} (real seconds)")


@pytest.fixture(scope="module")
def endpoint() -> str:
    return ensure_sqs()


@pytest.fixture(scope="module")
def admin(endpoint: str) -> SQSClient:
    """A plain client for what the driver never does: create and delete queues, send raw bodies."""
    return boto3.session.Session().client("sqs", endpoint_url=endpoint, region_name=REGION,
                                          aws_access_key_id="test", aws_secret_access_key="test")


def create_queues(admin: SQSClient, suffixes: tuple[str, ...] = SUFFIXES) -> tuple[str, list[str]]:
    base = f"jbt-{uuid.uuid4().hex[:12]}"
    urls = [admin.create_queue(QueueName=base)["QueueUrl"]]
    urls += [admin.create_queue(QueueName=f"{base}-{suffix}")["QueueUrl"] for suffix in suffixes]
    return base, urls


@pytest.fixture
def base(admin: SQSClient) -> Iterator[str]:
    """A fresh set of queues for this test, deleted when it ends."""
    name, urls = create_queues(admin)
    yield name
    for url in urls:
        admin.delete_queue(QueueUrl=url)


def options(endpoint: str, base: str, **extra: Any) -> dict[str, Any]:
    return {"queue_url": f"{endpoint}/{ACCOUNT}/{base}", "region": REGION, "key": "test", "secret": "test",
            **extra}


@pytest.fixture
def open_driver(endpoint: str, base: str) -> Iterator[Callable[..., SqsDriver]]:
    """Drivers on this test's queues, closed when it ends."""
    opened: list[SqsDriver] = []

    def make(clock: Clock = SYSTEM_CLOCK, **extra: Any) -> SqsDriver:
        opened.append(sqs_module.open(options(endpoint, base, **extra), Resources(clock=clock)))
        return opened[-1]

    yield make
    for driver in opened:
        driver.close()


def now_envelope(**fields: Any) -> Envelope:
    """An envelope stamped by the real clock (the drivers below run on it)."""
    return make_envelope(FixedClock(time.time()), **fields)


def inject(driver: SqsDriver, queue: str, body: str) -> None:
    """A message some other producer sent: a raw body, straight onto the queue."""
    driver.client.send_message(QueueUrl=driver.queues.url(queue), MessageBody=body)


class TestSqsDriver(DriverContract, FailedStoreContract):
    """The protocol and the failed store; not the lock suite: SQS has no lock to give (``locks.shared`` is
    false, see test_sqs_holds_no_locks_and_says_so)."""

    #: SQS standard queues do not promise order within a queue
    ordered = False
    #: a delayed message is invisible, so a purge (receive and delete) cannot reach it
    purges_delayed = False

    @pytest.fixture
    def clock(self) -> FixedClock:
        return FixedClock()

    @pytest.fixture
    def driver(self, open_driver: Callable[..., SqsDriver], clock: FixedClock) -> SqsDriver:
        return open_driver(clock, visibility_timeout=int(self.RESERVATION))

    @pytest.mark.skip(reason=REAL_TIME.format("test_a_delayed_push_waits_for_its_time_in_real_time"))
    def test_delayed_job_waits_for_its_time(self, driver: Driver, clock: FixedClock) -> None: ...

    @pytest.mark.skip(reason=REAL_TIME.format("test_a_release_with_a_delay_comes_back_after_it"))
    def test_release_makes_the_job_available_after_its_delay(self, driver: Driver, clock: FixedClock) -> None: ...

    @pytest.mark.skip(reason=REAL_TIME.format("test_a_hand_back_comes_back_uncounted_after_its_delay"))
    def test_hand_back_counts_no_attempt(self, driver: Driver, clock: FixedClock) -> None: ...

    @pytest.mark.skip(reason=REAL_TIME.format("test_a_hand_back_comes_back_uncounted_after_its_delay"))
    def test_a_stale_hand_back_changes_nothing(self, driver: Driver, clock: FixedClock) -> None: ...

    @pytest.mark.skip(reason=REAL_TIME.format("test_a_lapsed_visibility_redelivers_as_a_new_attempt and "
                                              "test_a_worker_killed_holding_a_job_loses_nothing"))
    def test_a_lapsed_reservation_is_reclaimed_as_a_new_attempt(self, driver: Driver, clock: FixedClock) -> None: ...

    @pytest.mark.skip(reason=REAL_TIME.format("test_a_lapsed_visibility_redelivers_as_a_new_attempt"))
    def test_a_stale_reservation_settles_nothing(self, driver: Driver, clock: FixedClock) -> None: ...

    def test_an_undecodable_body_is_handed_out_to_be_failed(self, driver: Driver, clock: FixedClock) -> None:
        # the suite's body starts with NUL, which SQS refuses to store (InvalidMessageContents): a legal one
        assert isinstance(driver, SqsDriver)
        inject(driver, "default", "not json {\u00e9")
        res = self.reserve_one(driver)
        assert res.decode_error and res.attempt == 1 and res.envelope.queue == "default"
        driver.fail(res, res.decode_error)
        (failed,) = driver.failed.list(1)
        assert failed.body == "not json {\u00e9".encode() and failed.error == res.decode_error


# -- real time: delays, visibility, long polls ---------------------------------------------------


def poll(driver: SqsDriver, seconds: float = 8.0, queues: tuple[str, ...] = ("default",)) -> tuple[Reservation, float]:
    """Reserve until one job comes out; (it, seconds waited). Fails after ``seconds``."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        got = driver.reserve(list(queues), 1)
        if got:
            return got[0], time.monotonic() - started
        time.sleep(0.1)
    raise AssertionError(f"nothing came out of {queues} within {seconds} s")


def test_a_delayed_push_waits_for_its_time_in_real_time(open_driver: Callable[..., SqsDriver]) -> None:
    driver = open_driver()
    (env,) = [now_envelope(delay=2)]
    driver.push([env])
    assert driver.reserve(["default"], 1) == []
    (counts,) = [c for c in driver.counts() if c.queue == "default"]
    assert (counts.ready, counts.delayed, counts.reserved) == (0, 1, 0)
    res, waited = poll(driver)
    assert res.id == env.id and res.attempt == 1 and waited > 1.2


def test_a_release_with_a_delay_comes_back_after_it(open_driver: Callable[..., SqsDriver]) -> None:
    driver = open_driver()
    driver.push([now_envelope()])
    first = driver.reserve(["default"], 1)[0]
    released_at = time.time()
    driver.release(first, 2)
    assert driver.reserve(["default"], 1) == []
    assert pending(driver, "default") == 1
    again, waited = poll(driver)
    assert again.id == first.id and again.attempt == 2 and waited > 1.2
    assert abs(again.envelope.available_at - (released_at + 2)) < 1


def test_a_hand_back_comes_back_uncounted_after_its_delay(open_driver: Callable[..., SqsDriver]) -> None:
    driver = open_driver()
    driver.push([now_envelope()])
    first = driver.reserve(["default"], 1)[0]
    driver.hand_back(first, 2)  # a rate-limited job that never started
    assert driver.reserve(["default"], 1) == []
    again, waited = poll(driver)
    assert again.id == first.id and again.attempt == 1 and waited > 1.2
    driver.release(again, 0)
    third, _ = poll(driver)
    assert third.attempt == 2


def test_a_lapsed_visibility_redelivers_as_a_new_attempt(open_driver: Callable[..., SqsDriver]) -> None:
    driver = open_driver(visibility_timeout=2)
    driver.push([now_envelope() for _ in range(3)])
    stale = driver.reserve(["default"], 3)
    assert [r.attempt for r in stale] == [1, 1, 1] and driver.reserve(["default"], 1) == []
    assert driver.reclaim_expired() == 0  # SQS does it by itself
    first, waited = poll(driver)
    fresh = {r.id: r for r in [first, *driver.reserve(["default"], 3)]}
    assert set(fresh) == {r.id for r in stale} and waited > 1.2
    assert {r.attempt for r in fresh.values()} == {2}
    # the worker that lost its leases finishes late: none of it may touch the new holders' jobs
    assert driver.extend(stale, 2) == []
    driver.acknowledge([stale[0]])
    driver.release(stale[1], 0)
    driver.fail(stale[2], "late")
    assert driver.failed.count() == 0 and pending(driver, "default") == 3
    assert driver.reserve(["default"], 3) == []
    assert {r.id for r in driver.extend(list(fresh.values()), 2)} == set(fresh)
    driver.acknowledge(list(fresh.values()))
    assert pending(driver, "default") == 0


def test_extend_holds_the_job_past_its_visibility(open_driver: Callable[..., SqsDriver]) -> None:
    driver = open_driver(visibility_timeout=2)
    driver.push([now_envelope()])
    res = driver.reserve(["default"], 1)[0]
    for _ in range(2):
        time.sleep(1.2)
        (res,) = driver.extend([res], 2)
        assert res.lease_until > time.time() + 1.5
    assert driver.reserve(["default"], 1) == []  # 2.4 s after the receive, still held
    driver.acknowledge([res])
    assert pending(driver, "default") == 0


def test_a_delay_longer_than_sqs_allows_is_resent_until_due(open_driver: Callable[..., SqsDriver]) -> None:
    driver = open_driver()
    sent: list[dict[str, Any]] = []
    driver.client.meta.events.register("provide-client-params.sqs.SendMessageBatch",
                                       lambda params, **_: sent.extend(params["Entries"]))
    driver.push([now_envelope(delay=3600)])
    # the wait counts from the send, on SQS's clock (its SentTimestamp): no worker's clock is asked
    assert sent[0]["DelaySeconds"] == 900 and float(sent[0]["MessageAttributes"]["jb-wait"]["StringValue"]) > 3599
    driver.max_delay = 1  # SQS's 15 minutes, scaled down so that the re-sending can be watched
    (env,) = [now_envelope(queue="high", delay=2.5)]
    driver.push([env])
    res, waited = poll(driver, queues=("high",))
    assert res.id == env.id and res.attempt == 1 and waited > 2.0
    assert len(sent) >= 3  # the push, then a re-send for each early receipt


def test_a_due_time_an_older_version_wrote_is_still_honoured(open_driver: Callable[..., SqsDriver]) -> None:
    driver = open_driver()
    env = now_envelope()
    due = {"DataType": "Number", "StringValue": repr(time.time() + 2)}
    driver.client.send_message(QueueUrl=driver.queues.url("default"), MessageBody=env.encode().decode(),
                               MessageAttributes={"jb-due": due})
    assert driver.reserve(["default"], 1) == []  # not due: sent again, with the wait that is left
    res, waited = poll(driver)
    assert res.id == env.id and waited > 0.5


def test_a_blocking_reserve_wakes_on_a_push_from_another_client(open_driver: Callable[..., SqsDriver]) -> None:
    driver, other = open_driver(), open_driver()
    timer = threading.Timer(0.3, lambda: other.push([now_envelope()]))
    timer.start()
    started = time.monotonic()
    got = driver.reserve(["default"], 10, wait=20.0)
    elapsed = time.monotonic() - started
    timer.join()
    assert len(got) == 1 and got[0].attempt == 1
    # it blocked until the push, then woke on it rather than at the end of its 20 s wait
    assert 0.25 < elapsed < 15, f"woke after {elapsed:.3f}s"
    driver.acknowledge(got)


def test_an_idle_blocking_reserve_returns_after_its_wait(open_driver: Callable[..., SqsDriver]) -> None:
    driver = open_driver()
    started = time.monotonic()
    assert driver.reserve(["high", "default"], 5, wait=2.0) == []  # a second's long poll on each
    assert time.monotonic() - started >= 1.8, "an idle long poll waits out its time"
    assert driver.capabilities.blocking_reserve
    never = open_driver(wait_time=0)
    assert never.reserve(["default"], 5, wait=2.0) == []
    assert not never.capabilities.blocking_reserve, "wait_time=0: the worker sleeps instead"


def test_a_worker_killed_holding_a_job_loses_nothing(open_driver: Callable[..., SqsDriver],
                                                      endpoint: str, base: str) -> None:
    driver = open_driver()
    (env,) = [now_envelope()]
    driver.push([env])
    script = (
        "import sys, time\n"
        "from jobbridge.drivers import Resources\n"
        "from jobbridge.drivers.sqs import open\n"
        f"driver = open({options(endpoint, base, visibility_timeout=2)!r}, Resources())\n"
        "(res,) = driver.reserve(['default'], 1)\n"
        "print(res.id, res.attempt, flush=True)\n"
        "time.sleep(60)\n"
    )
    worker = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              cwd=os.getcwd(), start_new_session=True)
    try:
        assert worker.stdout is not None
        assert worker.stdout.readline().split() == [env.id, "1"]
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(10)
    res, _ = poll(driver)
    assert res.id == env.id and res.attempt == 2
    driver.acknowledge([res])
    assert pending(driver, "default") == 0


# -- batches and the failed store ----------------------------------------------------------------


def test_a_push_of_25_is_three_batches(open_driver: Callable[..., SqsDriver]) -> None:
    driver = open_driver()
    calls: list[int] = []
    driver.client.meta.events.register("before-call.sqs.SendMessageBatch", lambda **_: calls.append(1))
    driver.push([now_envelope() for _ in range(25)])
    assert len(calls) == 3
    assert pending(driver, "default") == 25
    got = driver.reserve(["default"], 25)
    assert len(got) == 25 and len({r.id for r in got}) == 25
    deletes: list[int] = []
    driver.client.meta.events.register("before-call.sqs.DeleteMessageBatch", lambda **_: deletes.append(1))
    driver.acknowledge(got)
    assert len(deletes) == 3 and pending(driver, "default") == 0


def test_the_failed_store_round_trip(open_driver: Callable[..., SqsDriver]) -> None:
    clock = FixedClock()
    driver = open_driver(clock)
    envs = [make_envelope(clock, queue="high") for _ in range(12)]
    driver.push(envs)
    for res in sorted(driver.reserve(["high"], 12), key=lambda r: [e.id for e in envs].index(r.id)):
        clock.advance(1)
        driver.fail(res, f"failed {res.id}\x00")
    listed = driver.failed.list(50)
    assert [f.id for f in listed] == [e.id for e in reversed(envs)]  # the newest first
    assert listed[0].error == f"failed {envs[-1].id}\ufffd" and listed[0].queue == "high"
    assert listed[0].failed_at == clock.now() and listed[0].attempts == 1
    assert [f.id for f in driver.failed.list(5)] == [e.id for e in reversed(envs[-5:])]
    assert driver.failed.count() == 12  # reading hid nothing for long
    assert driver.failed.retry(envs[3].id) == 1
    with pytest.raises(NoFailedJob, match=envs[3].id):
        driver.failed.retry(envs[3].id)
    (back,) = driver.reserve(["high"], 5)
    assert back.id == envs[3].id and back.attempt == 1 and back.envelope.queue == "high"
    assert driver.failed.flush() == 11
    assert driver.failed.count() == 0 and driver.failed.list() == []


def test_a_long_error_keeps_its_end(open_driver: Callable[..., SqsDriver]) -> None:
    driver = open_driver()
    driver.push([now_envelope()])
    driver.fail(driver.reserve(["default"], 1)[0], "x" * 50_000 + "the end")
    (failed,) = driver.failed.list()
    assert len(failed.error) == MAX_ERROR + 1 and failed.error.endswith("the end")


def test_a_job_sqs_moved_to_the_failed_store_itself_is_listed_and_retried(
    open_driver: Callable[..., SqsDriver], admin: SQSClient
) -> None:
    driver = open_driver()
    env = now_envelope(queue="low", attempts=4)
    admin.send_message(QueueUrl=driver.queues.failed_url(), MessageBody=env.encode().decode())
    (failed,) = driver.failed.list()
    assert (failed.id, failed.queue, failed.attempts, failed.error) == (env.id, "low", 4, REDRIVEN)
    assert driver.failed.retry(env.id) == 1
    (back,) = driver.reserve(["low"], 1)
    assert back.id == env.id and back.attempt == 1


def test_an_undecodable_body_is_retried_as_it_was(open_driver: Callable[..., SqsDriver]) -> None:
    driver = open_driver()
    inject(driver, "other", "<xml/>")
    (res,) = driver.reserve(["other"], 1)
    assert res.decode_error and res.envelope.queue == "other"
    driver.fail(res, res.decode_error)
    assert driver.failed.retry("all") == 1
    (again,) = driver.reserve(["other"], 1)
    assert again.body == b"<xml/>" and again.decode_error


def test_sqs_holds_no_locks_and_says_so(open_driver: Callable[..., SqsDriver]) -> None:
    driver = open_driver()
    assert not driver.locks.shared
    assert driver.locks.acquire("job:invoice:7", "a", 100) and driver.locks.acquire("job:invoice:7", "b", 100)
    driver.locks.release("job:invoice:7", "a")


# -- queue names, errors ---------------------------------------------------------------------------


def test_a_missing_queue_is_named_and_never_created(open_driver: Callable[..., SqsDriver], base: str) -> None:
    driver = open_driver()
    with pytest.raises(DriverError, match=rf"'{base}-nope' \(jobbridge queue 'nope'\) does not exist"):
        driver.reserve(["nope"], 1)
    with pytest.raises(DriverError, match="failed store"):
        driver.push([now_envelope(queue="failed")])
    with pytest.raises(DriverError, match="letters, digits"):
        driver.push([now_envelope(queue="mail.high")])
    assert {c.queue for c in driver.counts()} == {"default", "high", "low", "other"}


def test_migrate_names_a_missing_failed_store(admin: SQSClient, endpoint: str) -> None:
    name, urls = create_queues(admin, suffixes=())
    driver = sqs_module.open(options(endpoint, name), Resources())
    try:
        with pytest.raises(DriverError, match=rf"'{name}-failed' \(the failed store\) does not exist"):
            driver.migrate()
    finally:
        driver.close()
        admin.delete_queue(QueueUrl=urls[0])


def test_an_unreachable_server_is_driver_unavailable() -> None:
    driver = sqs_module.open(options("http://127.0.0.1:9", "nowhere"), Resources())
    started = time.monotonic()
    with pytest.raises(DriverUnavailable, match="SQS is unreachable") as caught:
        driver.push([now_envelope()])
    assert isinstance(caught.value.__cause__, BotoCoreError)
    assert time.monotonic() - started < 10


# -- settings ---------------------------------------------------------------------------------------


def test_the_module_follows_the_driver_convention() -> None:
    assert load("sqs") is sqs_module and driver_for_url("sqs://123/jobs") == "sqs"
    assert set(sqs_module.SETTINGS) == set(schema_of("sqs").fields)
    assert not set(sqs_module.REFUSED) & set(sqs_module.SETTINGS)


def test_a_connection_from_settings_opens_with_its_visibility_as_the_reservation(endpoint: str, base: str) -> None:
    settings = Settings.from_mapping({"connections": {"bulk": {"driver": "sqs", **options(endpoint, base)}},
                                      "reservation": 30.2})
    conn = settings.connection("bulk")
    driver = sqs_module.open(conn.options, Resources())
    try:
        assert driver.settings.visibility_timeout == 31 and driver.reservation == conn.reservation == 31
        assert driver.describe() == f"sqs {endpoint}/{ACCOUNT}/{base} ({REGION}, via {endpoint})"
        assert pending(driver, "default") == 0
    finally:
        driver.close()


@pytest.mark.parametrize(("key", "instead"), [("prefix", "queue_url"), ("suffix", "queue_url"),
                                              ("url", "queue_url"), ("retry_after", "visibility_timeout")])
def test_foreign_keys_are_refused_with_what_to_write(key: str, instead: str) -> None:
    with pytest.raises(RefusedSetting, match=rf"'{key}'.*Write instead: {instead}"):
        parse_settings({"queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q", key: "x"})
    with pytest.raises(RefusedSetting, match=rf"'{key}'.*{instead}"):
        Settings.from_mapping({"connections": {"a": {"driver": "sqs", "queue_url": "https://h/1/q", key: "x"}}})


def test_urls_regions_and_endpoints_are_derived_not_guessed() -> None:
    aws = parse_settings({"queue_url": "https://sqs.eu-west-1.amazonaws.com/123/jobs"})
    assert (aws.region, aws.endpoint, aws.base) == ("eu-west-1", None, "jobs")
    short = parse_settings({"queue_url": "sqs://123/jobs", "region": "eu-central-1"})
    assert short.queue_url == "https://sqs.eu-central-1.amazonaws.com/123/jobs" and short.endpoint is None
    local = parse_settings({"queue_url": "sqs://000000000000/jobs", "endpoint": "http://localhost:4566",
                            "region": REGION})
    assert local.queue_url == "http://localhost:4566/000000000000/jobs"
    derived = parse_settings({"queue_url": "http://localhost:4566/000000000000/jobs", "region": REGION})
    assert derived.endpoint == "http://localhost:4566"
    assert parse_settings({"queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q", "reservation": 7.5,
                           "visibility_timeout": 20}).visibility_timeout == 20
    assert parse_settings({"queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q",
                           "reservation": 7.5}).visibility_timeout == 8


@pytest.mark.parametrize(("given", "match"), [
    ({"queue_url": "https://sqs.eu-west-1.amazonaws.com/1/jobs.fifo"}, "FIFO"),
    ({"queue_url": "https://sqs.eu-west-1.amazonaws.com/1/jobs", "key": "k"}, "both key and secret"),
    ({"queue_url": "sqs://1/a/b", "region": REGION}, "sqs://<account>/<queue-name>"),
    ({"queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q", "wait_time": 21}, "from 0 to 20"),
    ({"queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q", "visibility_timeout": 0}, "from 1 to 43200"),
    ({"queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q", "shards": 2}, "unknown setting 'shards'"),
    ({}, "needs queue_url"),
])
def test_a_connection_it_cannot_honour_is_refused(given: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        parse_settings(given)


def test_a_queue_url_with_no_region_anywhere_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    with pytest.raises(ConfigurationError, match="set region"):
        parse_settings({"queue_url": "http://localhost:4566/000000000000/jobs"})


def test_an_envelope_round_trips_through_a_body(open_driver: Callable[..., SqsDriver]) -> None:
    driver = open_driver()
    env = now_envelope(payload={"text": "\u00e9\U0001f600\x00"}, headers={"h": 1})
    driver.push([env])
    (res,) = driver.reserve(["default"], 1)
    assert res.envelope == env.replace(attempts=1)
    assert Envelope.decode(res.envelope.encode()) == res.envelope


# -- poison: messages that cannot become jobs, and the size limit -------------------------------------


def attr(kind: str, value: str | bytes) -> dict[str, Any]:
    if isinstance(value, bytes):
        return {"DataType": kind, "BinaryValue": value}
    return {"DataType": kind, "StringValue": value}


@pytest.mark.parametrize(("name", "value"), [("jb-wait", attr("Number", "soon")), ("jb-wait", attr("Binary", b"\xff")),
                                             ("jb-due", attr("String", "nan")), ("jb-wait", attr("Number", "1e400"))])
def test_a_wait_attribute_that_is_not_a_number_is_failed_with_why(
    open_driver: Callable[..., SqsDriver], name: str, value: dict[str, Any]
) -> None:
    """Re-sent for ever, or crashing the reserve, it would never settle: it is handed out to be failed."""
    driver = open_driver()
    env = now_envelope()
    sent = driver.client.send_message(QueueUrl=driver.queues.url("default"), MessageBody=env.encode().decode(),
                                      MessageAttributes={name: value})
    (res,) = driver.reserve(["default"], 5)
    assert res.id == sent["MessageId"] and res.attempt == 1
    assert res.decode_error == f"the message attribute {name} is not a finite number of seconds"
    driver.fail(res, res.decode_error)
    (failed,) = driver.failed.list()
    assert failed.body == env.encode() and failed.error == res.decode_error and failed.queue == "default"
    assert pending(driver, "default") == 0


def test_attributes_the_driver_does_not_read_change_nothing(open_driver: Callable[..., SqsDriver]) -> None:
    driver = open_driver()
    env = now_envelope()
    driver.client.send_message(QueueUrl=driver.queues.url("default"), MessageBody=env.encode().decode(),
                               MessageAttributes={"jb-attempts": attr("String", "many"),
                                                  "trace": attr("Binary", b"\xff\xfe")})
    (res,) = driver.reserve(["default"], 5)
    assert res.decode_error is None and res.envelope == env.replace(attempts=1)


@pytest.mark.parametrize(("body", "why"), [
    (now_envelope(attempts=2**40).encode(), "attempts"),  # past a 32-bit count
    (now_envelope().replace(name="n" * 300).encode(), "name"),
    (b'{"v": 1, "id": 7}', "id"),
])
def test_an_envelope_out_of_range_is_handed_out_to_be_failed(
    open_driver: Callable[..., SqsDriver], body: bytes, why: str
) -> None:
    driver = open_driver()
    sent = driver.client.send_message(QueueUrl=driver.queues.url("default"), MessageBody=body.decode())
    (res,) = driver.reserve(["default"], 5)
    assert res.id == sent["MessageId"] and res.decode_error and why in res.decode_error
    driver.fail(res, res.decode_error)
    (failed,) = driver.failed.list()
    assert failed.body == body and failed.id == sent["MessageId"]


def test_a_failed_job_near_the_size_limit_keeps_its_body_and_the_end_of_its_error(
    open_driver: Callable[..., SqsDriver]
) -> None:
    driver = open_driver()
    body = "not json " + "\u00e9" * (MAX_BODY // 2 - 10)  # two bytes a character: just under MAX_BODY
    inject(driver, "default", body)
    (res,) = driver.reserve(["default"], 1)
    driver.failed._max = 256 * 1024  # the failed queue at SQS's old default size (this server takes 1 MiB)
    driver.fail(res, "x" * 40_000 + "the end")
    (failed,) = driver.failed.list()
    assert failed.body == body.encode() and failed.error.endswith("the end")
    assert 1024 < len(failed.error) < 4096, "the error keeps what fits beside the body"


def test_a_body_larger_than_the_failed_store_takes_is_kept_cut_with_its_length(
    open_driver: Callable[..., SqsDriver]
) -> None:
    """A job queue may take more than the failed store: the failure is stored all the same."""
    driver = open_driver()
    inject(driver, "default", "y" * 20_000)
    (res,) = driver.reserve(["default"], 1)
    driver.failed._max = 10_000  # as if the failed queue's MaximumMessageSize were 10,000 bytes
    driver.fail(res, "too big: " + "z" * 20_000)
    got = driver.client.receive_message(QueueUrl=driver.queues.failed_url(), MessageAttributeNames=["All"])
    (raw,) = got["Messages"]
    attrs = raw["MessageAttributes"]
    assert attrs["jb-truncated"]["StringValue"] == "20000" and raw["Body"] == "y" * len(raw["Body"])
    assert len(raw["Body"].encode()) + sum(len(v["StringValue"]) for v in attrs.values()) <= 10_000
    assert attrs["jb-error"]["StringValue"].endswith("z" * 100)


def test_a_push_over_the_limit_is_refused_before_anything_is_sent(open_driver: Callable[..., SqsDriver]) -> None:
    driver = open_driver()
    assert driver.capabilities.max_message_bytes == MAX_BODY == 256 * 1024 - 4096
    small, big = now_envelope(), now_envelope(payload={"text": "x" * MAX_BODY})
    with pytest.raises(PayloadTooLarge, match=rf"job {big.id} .* at most {MAX_BODY}") as caught:
        driver.push([small, big])
    assert "xxxxxxxxxx" not in str(caught.value)
    assert pending(driver, "default") == 0


def test_malformed_failed_store_attributes_are_read_as_far_as_they_go(
    open_driver: Callable[..., SqsDriver], admin: SQSClient
) -> None:
    driver = open_driver()
    env = now_envelope(attempts=2)
    admin.send_message(QueueUrl=driver.queues.failed_url(), MessageBody=env.encode().decode(), MessageAttributes={
        "jb-id": attr("String", env.id), "jb-attempts": attr("Number", "several"),
        "jb-failed-at": attr("String", "yesterday"), "jb-error": attr("String", "boom")})
    (failed,) = driver.failed.list()
    assert (failed.id, failed.attempts, failed.error) == (env.id, 2, "boom")
    assert abs(failed.failed_at - time.time()) < 60  # the server's SentTimestamp stands in


def test_data_sqs_refuses_is_store_refused_not_unavailable(open_driver: Callable[..., SqsDriver]) -> None:
    driver = open_driver()
    with pytest.raises(StoreRefused, match="refused"):
        send(driver.client, driver.queues.url("default"), [{"Id": "0", "MessageBody": "\x00"}])


def test_a_receiver_whose_clock_is_an_hour_ahead_waits_out_a_long_delay(open_driver: Callable[..., SqsDriver]) -> None:
    """The wait past SQS's 15 minutes is measured by SQS's clock, not by whoever receives the message."""
    sender, receiver = open_driver(), open_driver(FixedClock(time.time() + 3600))
    sender.max_delay = receiver.max_delay = 1  # SQS's 15 minutes, scaled down
    (env,) = [now_envelope(delay=2.5)]
    sender.push([env])
    res, waited = poll(receiver)
    assert res.id == env.id and waited > 2.0
