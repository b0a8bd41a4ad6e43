"""`jobbridge demo` on a small job count: it finishes, drains the store, and its summary adds up."""

from __future__ import annotations

import io
from pathlib import Path

from jobbridge import demo


def test_the_demo_drains_and_its_summary_adds_up(tmp_path: Path) -> None:
    out = io.StringIO()
    file = tmp_path / "demo.sqlite3"
    file.write_text("an earlier run's file: the demo starts from a fresh store")

    result = demo.run(file, jobs=40, out=out)

    assert result.adds_up, out.getvalue()
    assert result.path == file.resolve()
    assert result.processed == result.succeeded + result.released + result.failed
    assert result.succeeded == 40 + len(demo.CHARGE_FAILURES) + 2
    assert result.released == sum(demo.CHARGE_FAILURES) + 1
    assert (result.failed, result.failed_in_store, result.pending_left) == (1, 1, 0)
    assert result.duplicate_dropped
    text = out.getvalue()
    assert "second -> None" in text
    assert f"JOBBRIDGE_DATABASE_URL=sqlite:///{file.resolve()} {demo._command()} failed" in text
    assert "the summary adds up" in text


def test_main_returns_zero_when_everything_adds_up(tmp_path: Path, capsys: object) -> None:
    assert demo.main(str(tmp_path / "d.sqlite3"), jobs=5) == 0
