"""docs/compat.md lists every Celery setting (under both names) and every signal."""

from __future__ import annotations

from pathlib import Path

from jobbridge.compat import signals
from jobbridge.compat.config.setting_table import NEW_NAMES, RULES

DOC = Path(__file__).resolve().parents[2] / "docs" / "compat.md"


def test_every_setting_has_a_row_with_its_old_name_and_kind() -> None:
    text = DOC.read_text()
    for name, rule in RULES.items():
        row = f"| `{name}` (`{NEW_NAMES[name]}`) |"
        assert row in text, name
        line = next(line for line in text.splitlines() if line.startswith(row))
        assert {"honour": "honoured", "accept": "accepted", "refuse": "refused"}[rule.kind] in line, name


def test_every_signal_is_documented() -> None:
    text = DOC.read_text()
    for name, value in vars(signals).items():
        if isinstance(value, signals.Signal):
            assert f"`{name}`" in text or name.startswith("eventlet_pool_"), name
