"""The app builds a kafka connection on the lock store its settings name."""

from __future__ import annotations

import uuid

import pytest

from jobbridge import ConfigurationError, JobBridge, Settings
from jobbridge.testing.contract import pending
from tests.services import ensure_kafka
from tests.unit.jobs import Notify


def test_a_kafka_connection_gets_the_lock_store_its_settings_name(sqlite_url: str) -> None:
    brokers = ensure_kafka()
    prefix = f"jb{uuid.uuid4().hex[:8]}."
    settings = Settings.from_mapping({"connections": {
        "default": "events",
        "events": {"driver": "kafka", "brokers": brokers, "group": prefix + "g", "topic_prefix": prefix,
                   "locks": "store"},
        "store": {"driver": "database", "url": sqlite_url},
    }})
    bridge = JobBridge(settings, jobs=[Notify])
    try:
        driver = bridge.driver()
        assert driver.locks.shared
        assert bridge.dispatch(Notify(post_id=1)) is not None
        assert pending(driver, "mail") == 1
    finally:
        bridge.close()


def test_kafka_without_a_lock_store_is_refused_at_boot() -> None:
    with pytest.raises(ConfigurationError, match="locks"):
        JobBridge(Settings.from_mapping({"driver": "kafka", "kafka_brokers": "127.0.0.1:9092"})).driver()
