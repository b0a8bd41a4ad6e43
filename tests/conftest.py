"""Shared fixtures: each test gets its own SQLite file and a fixed clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobbridge.testing.clock import FixedClock


@pytest.fixture
def fixed_clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'jobs.sqlite3'}"
