"""Poison messages on SQS and on Kafka, with a real `jobbridge worker` (issue 9).

Bad messages are written straight into the queue (boto3's ``send_message``)
or the topic (a confluent-kafka ``Producer``), as another producer, a bug or
an older release would leave them, between 50 good jobs dispatched through a
bridge. One worker subprocess works the queue with ``--stop-when-empty``;
then every good job ran exactly once, every bad message is in the failed
store once with a reason naming what was wrong, and the worker exited 0 (see
`tests.integration.poison`).

Beside the shared catalogue, the poison only each store can hold: on SQS,
message attributes the driver reads that are not numbers (``jb-wait``,
``jb-due``) and a body near its size limit; on Kafka, a tombstone (no value),
record headers that are malformed (the driver reads none, so those jobs run),
an id longer than the lock store's columns, and a record key that is not
UTF-8. SQS cannot hold the catalogue's non-UTF-8 body (its bodies are text)
nor its 10 MB one (1 MiB at most): those two are Kafka's alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import boto3
import orjson
import pytest
from confluent_kafka import Producer

from jobbridge import JobBridge
from jobbridge.envelope import new_id
from jobbridge.settings import Settings
from jobbridge.store_reports import FailedJob
from jobbridge.testing.contract import pending
from tests.drivers.database_servers import fresh_database
from tests.integration import poison_app
from tests.integration.poison import EXPECT, Expect, assert_outcome, envelope, poison_bodies, start_worker
from tests.integration.reliability_support import FileRunsReader, Workers
from tests.services import ensure_kafka, ensure_sqs

pytestmark = pytest.mark.slow

GOOD = 50
QUEUE = "poison"
ACCOUNT, REGION = "000000000000", "us-east-1"

SQS_KINDS: dict[str, Expect] = {
    "wait_not_a_number": Expect("fail", ("jb-wait",)),
    "wait_binary": Expect("fail", ("jb-wait",)),
    "due_not_finite": Expect("fail", ("jb-due",)),
    "foreign_attributes": Expect("run"),
    "body_near_the_limit": Expect("fail", ("field",)),
}
NOT_ON_SQS = ("non_utf8", "huge_body")

KAFKA_KINDS: dict[str, Expect] = {
    "tombstone": Expect("fail", ("json",)),
    "malformed_headers": Expect("run"),
    "no_key": Expect("run"),
    "long_id": Expect("fail", ("id",)),
    "binary_key": Expect("fail", ("json", "utf")),
}


def chunks(total: int, parts: int) -> list[int]:
    """``total`` good jobs in ``parts`` nearly equal runs, the bad messages going between them."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def good_body(job_id: str) -> bytes:
    return orjson.dumps(envelope(id=job_id, queue=QUEUE))


def verdict(workers: Workers, proc: Any, runs: FileRunsReader, good: list[str], bad: Mapping[str, str],
            failed: list[FailedJob], expect: Mapping[str, Expect]) -> None:
    code = workers.exited(proc, timeout=300)
    assert_outcome(good=good, bad=bad, runs=runs.all(), failed=failed, exit_code=code,
                   output=workers.output(proc), expect={**EXPECT, **expect})


# -- SQS ------------------------------------------------------------------------------------------------


def sqs_message(kind: str, job_id: str) -> tuple[str, dict[str, Any]]:
    """The body (text: SQS holds nothing else) and message attributes of one bad message."""
    def number(value: str) -> dict[str, Any]:
        return {"DataType": "Number", "StringValue": value}

    attributes: dict[str, dict[str, Any]] = {
        "wait_not_a_number": {"jb-wait": number("later")},
        "wait_binary": {"jb-wait": {"DataType": "Binary", "BinaryValue": b"\xff\xfe"}},
        "due_not_finite": {"jb-due": number("1e400")},
        "foreign_attributes": {"jb-attempts": number("many"), "trace": {"DataType": "Binary", "BinaryValue": b"\xff"}},
    }
    if kind in EXPECT:
        return poison_bodies(QUEUE, job_id, [kind])[kind].decode(), {}
    if kind == "body_near_the_limit":  # 250 KB: within what a push takes, the failed store must hold it whole
        return orjson.dumps(envelope(id=job_id, queue=QUEUE, payload={"n": 7, "blob": "x" * 250_000})).decode(), {}
    return good_body(job_id).decode(), attributes[kind]


@pytest.fixture
def sqs_base() -> Iterator[str]:
    """A fresh connection's queues: the default one, ``-poison`` and ``-failed``, deleted afterwards."""
    endpoint = ensure_sqs()
    admin = boto3.session.Session().client("sqs", endpoint_url=endpoint, region_name=REGION,
                                           aws_access_key_id="test", aws_secret_access_key="test")
    base = f"jbp-{uuid.uuid4().hex[:12]}"
    urls = [admin.create_queue(QueueName=name)["QueueUrl"] for name in (base, f"{base}-{QUEUE}", f"{base}-failed")]
    yield f"{endpoint}/{ACCOUNT}/{base}"
    for url in urls:
        admin.delete_queue(QueueUrl=url)


def test_poison_on_sqs_beside_fifty_good_jobs(sqs_base: str, tmp_path: Path) -> None:
    variables = {"JOBBRIDGE_SQS_QUEUE_URL": sqs_base, "JOBBRIDGE_SQS_REGION": REGION,
                 "JOBBRIDGE_SQS_KEY": "test", "JOBBRIDGE_SQS_SECRET": "test", "JOBBRIDGE_RESERVATION": "30"}
    bridge = JobBridge(Settings.from_env(variables), jobs=poison_app.ALL)
    runs = FileRunsReader(tmp_path / "runs.log")
    workers = Workers(tmp_path, {**variables, **runs.variable})
    try:
        driver: Any = bridge.driver()
        url = driver.queues.url(QUEUE)
        kinds = [kind for kind in [*EXPECT, *SQS_KINDS] if kind not in NOT_ON_SQS]
        good: list[str] = []
        sent: dict[str, tuple[str, str]] = {}  # kind -> (the id in its body, SQS's MessageId)
        for kind, count in zip([*kinds, ""], chunks(GOOD, len(kinds) + 1), strict=True):
            good += [i for i in bridge.dispatch_many([poison_app.Good(n=n) for n in range(count)], queue=QUEUE) if i]
            if kind:
                job_id = new_id()
                body, attributes = sqs_message(kind, job_id)
                answer = driver.client.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attributes)
                sent[kind] = (job_id, answer["MessageId"])
        proc = start_worker(workers, [QUEUE])
        workers.exited(proc, timeout=300)
        failed = driver.failed.list(1000)
        bad = sqs_ids(sent, failed, runs)
        verdict(workers, proc, runs, good, bad, failed, SQS_KINDS)
        assert pending(driver, QUEUE) == 0
    finally:
        workers.close()
        bridge.close()


def sqs_ids(sent: Mapping[str, tuple[str, str]], failed: list[FailedJob], runs: FileRunsReader) -> dict[str, str]:
    """Each bad message under the id its outcome carries: its envelope's, or SQS's when it never decoded.

    A message with an outcome under both ids was settled twice: that is reported, never chosen between.
    """
    failed_ids = {f.id for f in failed}
    ran = {run.job_id for run in runs.all()}
    bad: dict[str, str] = {}
    for kind, (job_id, message_id) in sent.items():
        under_body = job_id in failed_ids or job_id in ran
        assert not (under_body and message_id in failed_ids), f"{kind}: settled under both of its ids"
        bad[job_id if under_body else message_id] = kind
    return bad


# -- Kafka ----------------------------------------------------------------------------------------------


def kafka_record(kind: str, job_id: str) -> tuple[bytes | None, bytes | None, Any]:
    """The key, value and headers of one bad message; the key is its id wherever a key can name it."""
    key = job_id.encode()
    special: dict[str, tuple[bytes | None, bytes | None, Any]] = {
        "tombstone": (key, None, None),
        "malformed_headers": (key, good_body(job_id), [("jb-attempts", b"\xff\xfe"), ("attempts", b"NaN"),
                                                       ("empty", None)]),
        "no_key": (None, good_body(job_id), None),
        "long_id": (key, orjson.dumps(envelope(id="j" * 300, queue=QUEUE)), None),
        "binary_key": (b"\xff\xfe", b"\xff\xfe not JSON", None),
    }
    if kind in EXPECT:
        return key, poison_bodies(QUEUE, job_id, [kind])[kind], None
    return special[kind]


def kafka_settings(path: Path, lock_url: str) -> Path:
    tag = uuid.uuid4().hex[:10]
    path.write_text(
        '[connections]\ndefault = "events"\n\n'
        f'[connections.events]\ndriver = "kafka"\nbrokers = "{ensure_kafka()}"\ngroup = "jbp-{tag}"\n'
        f'topic_prefix = "jbp{tag}."\nlocks = "locks"\n\n'
        f'[connections.locks]\ndriver = "database"\nurl = "{lock_url}"\n')
    return path


def write_kafka_mix(bridge: JobBridge, driver: Any) -> tuple[list[str], dict[str, str]]:
    """Good jobs through the bridge, bad records through another producer between them: (good ids, bad)."""
    kinds = [*EXPECT, *KAFKA_KINDS]
    topic = driver.topic(QUEUE)
    driver.admin.ensure([topic])
    # another producer, configured for larger messages than this connection's (the 10 MB body)
    producer = Producer({"bootstrap.servers": ",".join(driver.settings.brokers), "message.max.bytes": 16 * 1024 * 1024})
    good: list[str] = []
    bad: dict[str, str] = {}
    spots: dict[str, str] = {}

    def landed(job_id: str) -> Any:
        return lambda _error, m: spots.__setitem__(job_id, f"{m.topic()}/{m.partition()}/{m.offset()}")

    for kind, count in zip([*kinds, ""], chunks(GOOD, len(kinds) + 1), strict=True):
        good += [i for i in bridge.dispatch_many([poison_app.Good(n=n) for n in range(count)], queue=QUEUE) if i]
        if kind:
            job_id = new_id()
            key, value, headers = kafka_record(kind, job_id)
            producer.produce(topic, value=value, key=key, headers=headers, on_delivery=landed(job_id))
            bad[job_id] = kind
            assert producer.flush(30) == 0
    # a key that is not a plain id names nothing: the message's place does
    (binary,) = [job_id for job_id, kind in bad.items() if kind == "binary_key"]
    bad[str(uuid.uuid5(uuid.NAMESPACE_URL, f"kafka:{spots[binary]}"))] = bad.pop(binary)
    return good, bad


def test_poison_on_kafka_beside_fifty_good_jobs(tmp_path: Path) -> None:
    """The lock store is PostgreSQL, the strictest: 191-character id columns, no NUL in text."""
    with fresh_database("postgresql", tmp_path) as lock_url:
        settings = kafka_settings(tmp_path / "jobbridge.toml", lock_url)
        bridge = JobBridge(Settings.from_file(settings), jobs=poison_app.ALL)
        runs = FileRunsReader(tmp_path / "runs.log")
        workers = Workers(tmp_path, {poison_app.SETTINGS_FILE: str(settings), poison_app.KAFKA_SESSION_MS: "2000",
                                     **runs.variable})
        try:
            driver: Any = bridge.driver()
            good, bad = write_kafka_mix(bridge, driver)
            proc = start_worker(workers, [QUEUE])
            workers.exited(proc, timeout=300)
            verdict(workers, proc, runs, good, bad, driver.failed.list(1000), KAFKA_KINDS)
            assert pending(driver, QUEUE) == 0
        finally:
            workers.close()
            bridge.close()
