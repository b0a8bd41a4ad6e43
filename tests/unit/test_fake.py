"""QueueFake wraps a bridge and records instead of queueing; a real bridge is refused as a fake."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from jobbridge import JobBridge, NotAFake, UnknownJob
from jobbridge.testing import QueueFake, as_fake
from jobbridge.testing.contract import pending
from tests.unit.jobs import Flaky, Notify, Unique


def test_fake_records_and_asserts(queue_fake: QueueFake) -> None:
    queue_fake.register(Notify, Unique)
    queue_fake.dispatch(Notify(post_id=4))
    queue_fake.dispatch(Notify(post_id=5), queue="high")
    queue_fake.assert_pushed(Notify)
    queue_fake.assert_pushed(Notify, lambda j: j.post_id == 5)
    queue_fake.assert_pushed_times(Notify, 2)
    queue_fake.assert_pushed_on(Notify, "high")
    queue_fake.assert_not_pushed(Unique)
    assert [j.post_id for j in queue_fake.pushed(Notify)] == [4, 5]
    with pytest.raises(AssertionError, match="pushed 3 time"):
        queue_fake.assert_pushed_times(Notify, 3)
    with pytest.raises(AssertionError, match="none matching"):
        queue_fake.assert_pushed(Notify, lambda j: j.post_id == 6)
    with pytest.raises(AssertionError, match="expected nothing pushed"):
        queue_fake.assert_nothing_pushed()
    queue_fake.clear()
    queue_fake.assert_nothing_pushed()


def test_fake_is_as_strict_as_the_real_queue(queue_fake: QueueFake) -> None:
    with pytest.raises(UnknownJob):
        queue_fake.dispatch(Flaky(fail_times=1))
    queue_fake.register(Unique)
    assert queue_fake.dispatch(Unique(invoice_id=1))
    assert queue_fake.dispatch(Unique(invoice_id=1)) is None


def test_fake_records_a_transactional_dispatch_only_on_commit(queue_fake: QueueFake, tmp_path: Path) -> None:
    queue_fake.register(Notify)
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'a.db'}")
    with Session(engine) as session:
        session.begin()
        queue_fake.dispatch(Notify(post_id=1), transaction=session)
        queue_fake.assert_nothing_pushed()
        session.rollback()
    queue_fake.assert_nothing_pushed()
    with Session(engine) as session, session.begin():
        queue_fake.dispatch(Notify(post_id=2), transaction=session)
    queue_fake.assert_pushed_times(Notify, 1)


def test_assertions_raise_on_a_real_queue(jobbridge_memory: JobBridge) -> None:
    with pytest.raises(NotAFake, match="would pass without checking"):
        as_fake(jobbridge_memory).assert_pushed(Notify)
    with pytest.raises(NotAFake):
        as_fake(jobbridge_memory).assert_nothing_pushed()
    with pytest.raises(AttributeError):  # a real bridge has no assertions at all
        jobbridge_memory.assert_nothing_pushed()  # type: ignore[attr-defined]


def test_bridge_fake_shares_the_registry(jobbridge_memory: JobBridge) -> None:
    jobbridge_memory.register(Notify)
    fake = QueueFake(jobbridge_memory)
    fake.dispatch(Notify(post_id=1))
    as_fake(fake).assert_pushed(Notify)
    assert pending(jobbridge_memory.driver(), "mail") == 0
