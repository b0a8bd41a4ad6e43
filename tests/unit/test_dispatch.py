"""Dispatching: ids, delays, unique jobs, connections, transactions, async callers."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from jobbridge import JobBridge, PayloadEncodeError, UnknownConnection
from jobbridge.envelope import Envelope
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import pending
from tests.unit.jobs import RAN, Flaky, Notify, Rich, Unique


@pytest.fixture
def bridge(jobbridge_memory: JobBridge) -> JobBridge:
    jobbridge_memory.register(Notify, Flaky, Unique, Rich)
    RAN.clear()
    return jobbridge_memory


def test_dispatch_returns_a_uuid7_and_stores_the_envelope(bridge: JobBridge) -> None:
    job_id = bridge.dispatch(Notify(post_id=1))
    assert job_id is not None and len(job_id) == 36 and job_id[14] == "7"
    (res,) = bridge.driver().reserve(["mail"], 5)
    env = res.envelope
    assert (env.id, env.name, env.queue, dict(env.payload), env.tries) == (
        job_id, "tests.notify", "mail", {"post_id": 1}, 5)


def test_ids_sort_by_creation() -> None:
    from jobbridge.envelope import new_id

    ids = [new_id() for _ in range(50)]
    assert ids == sorted(ids)


def test_queue_delay_and_at(bridge: JobBridge, jobbridge_clock: FixedClock) -> None:
    bridge.dispatch(Notify(post_id=1), queue="high", delay=30)
    bridge.dispatch(Notify(post_id=2), delay=timedelta(minutes=1))
    at = datetime.fromtimestamp(jobbridge_clock.now() + 90, tz=UTC)
    bridge.dispatch(Notify(post_id=3), at=at)
    assert bridge.run_pending(["high", "mail"]).processed == 0
    jobbridge_clock.advance(31)
    assert bridge.run_pending(["high", "mail"]).processed == 1
    jobbridge_clock.advance(30)
    assert bridge.run_pending(["high", "mail"]).processed == 1
    jobbridge_clock.advance(30)
    assert bridge.run_pending(["high", "mail"]).processed == 1
    with pytest.raises(ValueError, match="not both"):
        bridge.dispatch(Notify(post_id=4), delay=1, at=at)
    with pytest.raises(ValueError, match="negative"):
        bridge.dispatch(Notify(post_id=4), delay=-1)


def test_an_unencodable_payload_fails_at_dispatch_naming_the_field(bridge: JobBridge) -> None:
    with pytest.raises(PayloadEncodeError, match=r"Notify\.post_id holds a set|Notify\.post_id"):
        bridge.dispatch(Notify(post_id=object()))  # type: ignore[arg-type]
    assert pending(bridge.driver(), "mail") == 0


def test_unique_job_is_dropped_while_pending_and_freed_after_success(bridge: JobBridge) -> None:
    first = bridge.dispatch(Unique(invoice_id=7))
    assert first is not None
    assert bridge.dispatch(Unique(invoice_id=7)) is None
    assert bridge.dispatch(Unique(invoice_id=8)) is not None
    bridge.run_pending()
    assert bridge.dispatch(Unique(invoice_id=7)) is not None


def test_unique_lock_survives_a_release_and_is_freed_by_final_failure(
        bridge: JobBridge, jobbridge_clock: FixedClock) -> None:
    class UniqueFlaky(Flaky, name="tests.unique-flaky", tries=2):
        def unique_id(self) -> str | None:
            return ""

    bridge.register(UniqueFlaky)
    assert bridge.dispatch(UniqueFlaky(fail_times=9))
    bridge.run_pending()  # released for a retry: still pending
    assert bridge.dispatch(UniqueFlaky(fail_times=9)) is None
    jobbridge_clock.advance(11)
    assert bridge.run_pending().failed == 1
    assert bridge.dispatch(UniqueFlaky(fail_times=0)) is not None


def test_unique_lock_expires_after_unique_for(bridge: JobBridge, jobbridge_clock: FixedClock) -> None:
    assert bridge.dispatch(Unique(invoice_id=1))
    jobbridge_clock.advance(601)
    assert bridge.dispatch(Unique(invoice_id=1)) is not None


def test_dispatch_many_keeps_order_and_drops_duplicates(bridge: JobBridge) -> None:
    ids = bridge.dispatch_many([Notify(post_id=1), Unique(invoice_id=3), Unique(invoice_id=3), Notify(post_id=2)])
    assert ids[0] and ids[1] and ids[2] is None and ids[3]
    assert pending(bridge.driver(), "mail") == 2


def test_a_connection_nobody_declared_is_an_error(bridge: JobBridge) -> None:
    with pytest.raises(UnknownConnection):
        bridge.dispatch(Notify(post_id=1), connection="bulk")


def test_adispatch_takes_the_same_path(bridge: JobBridge) -> None:
    job_id = asyncio.run(bridge.adispatch(Notify(post_id=9), queue="q"))
    (res,) = bridge.driver().reserve(["q"], 1)
    assert res.id == job_id


def test_after_commit_push_for_a_driver_outside_the_database(bridge: JobBridge, tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'app.db'}")
    orders = sa.Table("orders", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True))
    orders.metadata.create_all(engine)
    with Session(engine) as session, session.begin():
        session.execute(orders.insert().values(id=1))
        bridge.dispatch(Notify(post_id=1), transaction=session)
        assert pending(bridge.driver(), "mail") == 0  # held until commit
    assert pending(bridge.driver(), "mail") == 1
    with Session(engine) as session:
        session.begin()
        session.execute(orders.insert().values(id=2))
        bridge.dispatch(Notify(post_id=2), transaction=session)
        assert bridge.dispatch(Unique(invoice_id=5), transaction=session)
        session.rollback()
    assert pending(bridge.driver(), "mail") == 1
    assert bridge.dispatch(Unique(invoice_id=5)) is not None  # the rolled-back job's lock was dropped
    with engine.connect() as conn, conn.begin():
        bridge.dispatch(Notify(post_id=3), transaction=conn)
        assert pending(bridge.driver(), "mail") == 1
    assert pending(bridge.driver(), "mail") == 2


def test_transaction_must_be_sqlalchemy(bridge: JobBridge) -> None:
    with pytest.raises(TypeError, match="Connection or Session"):
        bridge.dispatch(Notify(post_id=1), transaction=object())


def test_envelope_round_trip() -> None:
    env = Envelope(id="x", name="n", queue="q", payload={"a": 1}, tries=2, timeout=3.0,
                   available_at=1.0, created_at=1.0, unique_key="n:1", unique_for=9.0, headers={"h": 1})
    assert Envelope.decode(env.encode()) == env
