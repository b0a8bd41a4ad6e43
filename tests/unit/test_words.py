"""The words a user reads say what jobbridge does, never which design an idea came from.

A user has never heard of the projects jobbridge's ideas were taken from, so a
sentence like "what Rainier calls --once" explains nothing to them. The manual
(docs/, README.md), every command's ``--help`` and the refusal messages are
checked for those names. Naming Celery, RQ or Dramatiq is fine: users migrate
from them, and the benchmarks measure them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
from click.testing import CliRunner

from jobbridge import drivers, setting_checks
from jobbridge.cli import CELERY_REFUSED, cli

ROOT = Path(__file__).resolve().parents[2]
#: the origins of ideas that a user cannot look up, and the phrases that point at one
ORIGINS = re.compile(
    r"\b(rainier|navree|laravel)\b|\bthe seeds\b|\bseeds'|\bthis library comes from\b",
    re.IGNORECASE,
)


def _origins(text: str) -> list[str]:
    return [match.group(0) for match in ORIGINS.finditer(text)]


def _manual() -> list[Path]:
    return [ROOT / "README.md", ROOT / "mkdocs.yml", *sorted((ROOT / "docs").rglob("*.md"))]


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command's argument path, nested groups included, so a new command is checked too."""
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        yield (*path, name)
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))


def test_the_pattern_catches_the_sentences_it_was_written_for() -> None:
    assert _origins("Run every job available now (a drain; what Rainier calls --once).") == ["Rainier"]
    assert _origins("`--once` is Laravel's: one job") == ["Laravel"]
    assert _origins("| `workers` | anywhere | Navree's name for jobs |") == ["Navree"]
    assert _origins('the seeds\' "never both" applied where the seeds did not') == ["the seeds", "the seeds"]
    assert _origins("Celery, RQ, Dramatiq, arq and Huey; seed the database") == []


def test_the_manual_names_no_origin() -> None:
    pages = _manual()
    assert len(pages) > 20, pages  # the docs directory was found
    found = {
        f"{page.relative_to(ROOT)}:{number}": _origins(line)
        for page in pages
        for number, line in enumerate(page.read_text().splitlines(), start=1)
        if _origins(line)
    }
    assert not found, found


def test_no_help_text_names_an_origin() -> None:
    paths = list(_commands(cli))
    assert {("worker",), ("status",), ("failed",)} <= set(paths), paths
    runner = CliRunner()
    found: dict[str, list[str]] = {}
    for path in [(), *paths]:
        result = runner.invoke(cli, [*path, "--help"], prog_name="jobbridge")
        assert result.exit_code == 0, (path, result.output)
        assert "Usage: jobbridge" in result.output, result.output
        if _origins(result.output):
            found[" ".join(("jobbridge", *path, "--help"))] = _origins(result.output)
    assert not found, found


def test_no_refusal_names_an_origin() -> None:
    tables = [setting_checks.GENERAL, setting_checks.TOP_LEVEL,
              *(drivers.schema_of(driver).refused for driver in drivers.DRIVERS)]
    texts = {f"setting {key}": " ".join(filter(None, refusal)) for table in tables for key, refusal in table.items()}
    texts.update({f"worker option {'/'.join(names)}": why for names, _, why in CELERY_REFUSED})
    assert len(texts) > 30, texts
    found = {where: _origins(text) for where, text in texts.items() if _origins(text)}
    assert not found, found
