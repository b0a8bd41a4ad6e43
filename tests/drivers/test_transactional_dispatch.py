"""Transactional dispatch through the app on each database: an order and its job commit together.

A rollback leaves neither the order, the job, nor the unique job's lock behind,
and on SQLite a unique job in the caller's transaction does not wait on the
caller's own write lock.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from jobbridge import JobBridge, Settings
from jobbridge.drivers.database.engine import parse_url
from jobbridge.testing.contract import pending
from tests.drivers.database_servers import DIALECTS, fresh_database
from tests.unit.jobs import Notify, Unique

orders = sa.Table("shop_orders", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True))


@pytest.fixture(params=DIALECTS)
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[JobBridge, sa.Engine]]:
    with fresh_database(request.param, tmp_path) as url:
        bridge = JobBridge(Settings.from_mapping({"database_url": url}), jobs=[Notify, Unique])
        engine = sa.create_engine(parse_url(url))
        orders.metadata.create_all(engine)
        bridge.driver().migrate()
        yield bridge, engine
        bridge.close()
        engine.dispose()


def count_orders(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(orders)).scalar_one())


def test_order_and_job_commit_together(setup: tuple[JobBridge, sa.Engine]) -> None:
    bridge, engine = setup
    with Session(engine) as session, session.begin():
        session.execute(orders.insert().values(id=1))
        assert bridge.dispatch(Notify(post_id=1), transaction=session)
        assert bridge.dispatch(Unique(invoice_id=1), transaction=session)
    assert count_orders(engine) == 1
    assert pending(bridge.driver(), "mail") == 1
    assert bridge.dispatch(Unique(invoice_id=1)) is None  # its lock committed too


def test_a_rollback_leaves_neither_order_job_nor_lock(setup: tuple[JobBridge, sa.Engine]) -> None:
    bridge, engine = setup
    with engine.connect() as conn:
        tx = conn.begin()
        conn.execute(orders.insert().values(id=2))
        assert bridge.dispatch(Notify(post_id=2), transaction=conn)
        assert bridge.dispatch(Unique(invoice_id=2), transaction=conn)
        tx.rollback()
    assert count_orders(engine) == 0
    assert pending(bridge.driver(), "mail") == 0
    assert pending(bridge.driver(), "default") == 0
    assert bridge.dispatch(Unique(invoice_id=2)) is not None  # no lock left behind


def test_workers_do_not_see_the_job_before_commit(setup: tuple[JobBridge, sa.Engine]) -> None:
    bridge, engine = setup
    with Session(engine) as session, session.begin():
        session.execute(orders.insert().values(id=3))
        bridge.dispatch(Notify(post_id=3), transaction=session)
        # a read from another connection; on SQLite a claim would wait for this writer to commit
        assert pending(bridge.driver(), "mail") == 0
        if engine.dialect.name != "sqlite":
            assert bridge.driver().reserve(["mail"], 5) == []
    assert len(bridge.driver().reserve(["mail"], 5)) == 1
