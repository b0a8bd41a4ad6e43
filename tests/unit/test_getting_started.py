"""docs/getting-started.md runs as written: its blocks, in order, in an empty directory.

The page is the first thing a new user runs, so an example that calls a function
it never defines fails them in their first minute. Here every python block is
saved under the path its first line names (``# myapp/jobs.py``) or else run, and
every shell block that runs jobbridge is run line by line in real subprocesses,
with nothing configured: the embedded SQLite store in the directory. The install
blocks (pip, build) are only recognised, not run: they would install from the
network, and the suite already runs on the installed checkout.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "getting-started.md"
BLOCK = re.compile(r"^```(?P<lang>[\w-]*)\n(?P<body>.*?)^```", re.DOTALL | re.MULTILINE)
FILE_LINE = re.compile(r"#\s*(?P<path>[\w./-]+\.py)\s*$")
INSTALL = ("pip ", "python -m build", "python3 -m venv ", ". .venv/")
RUN = ("python ", "jobbridge ", "echo ", "cat ")
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}"

pytestmark = pytest.mark.slow


def _blocks() -> list[tuple[str, str]]:
    return [(m["lang"], m["body"]) for m in BLOCK.finditer(PAGE.read_text())]


def _environment() -> dict[str, str]:
    """Nothing configured, the installed jobbridge first on PATH (as in an activated virtualenv)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBBRIDGE_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _commands(body: str) -> list[str] | None:
    """A run block's command lines; None for an install block. A line of neither kind fails the test."""
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    if all(line.startswith(INSTALL) for line in lines):
        return None
    unknown = [line for line in lines if not line.startswith(RUN)]
    assert not unknown, f"{PAGE.name}: a shell block mixes install steps or unknown commands: {unknown}"
    return lines


def _run(command: str | list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    shell = isinstance(command, str)
    result = subprocess.run(command, shell=shell, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{command!r} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result


def _run_page(cwd: Path) -> list[tuple[str, subprocess.CompletedProcess[str]]]:
    env, ran = _environment(), []
    python = str(Path(sys.executable).parent / "python")
    for lang, body in _blocks():
        if lang == "python":
            first = FILE_LINE.fullmatch(body.splitlines()[0].strip())
            if first:
                (cwd / first["path"]).parent.mkdir(parents=True, exist_ok=True)
                (cwd / first["path"]).write_text(body)
            else:
                ran.append(("<python block>", _run([python, "-c", body], cwd, env)))
        elif lang == "sh":
            for command in _commands(body) or []:
                ran.append((command, _run(command, cwd, env)))
        else:  # a block of no language, or another one, would be skipped without a word
            assert lang == "text", f"{PAGE.name}: a block tagged {lang!r}; tag it python, sh or text"
    return ran


def _output(ran: list[tuple[str, subprocess.CompletedProcess[str]]], start: str, index: int = 0) -> str:
    matches = [result.stdout + result.stderr for command, result in ran if command.startswith(start)]
    assert len(matches) > index, f"the page no longer runs {start!r} ({len(matches)} time(s))"
    return matches[index]


def test_every_block_runs_as_written_and_the_jobs_really_run(tmp_path: Path) -> None:
    ran = _run_page(tmp_path)
    assert (tmp_path / "myapp" / "jobs.py").is_file() and (tmp_path / "dispatch.py").is_file()
    assert re.search(f"queued {UUID}", _output(ran, "python dispatch.py")), ran
    assert "mail" in _output(ran, "jobbridge status")
    worker = "jobbridge worker"
    first = _output(ran, worker, 0)
    assert "mail to ada@example.com: your post 42 is live" in first, f"NotifyAuthor did not run:\n{first}"
    failed = _output(ran, "jobbridge failed")
    assert "reports.monthly" in failed and "FileNotFoundError" in failed, failed
    assert "mail to" not in _output(ran, worker, 1)  # the first job ran once, and only once
    assert (tmp_path / "report-2024-05.txt").read_text() == "Report for 2024-05\n"
    assert _output(ran, "cat report-2024-05.txt") == "Report for 2024-05\n"
    assert (tmp_path / "jobbridge.sqlite3").is_file()  # the default store, in the working directory


def test_the_page_installs_from_the_checkout_or_a_built_wheel() -> None:
    install = [line.split("#")[0].strip() for lang, body in _blocks() if lang == "sh" and _commands(body) is None
               for line in body.splitlines()]
    assert "pip install ." in install and "python -m build" in install, install
    version = tomllib.loads((PAGE.parents[1] / "pyproject.toml").read_text())["project"]["version"]
    wheel = f"pip install 'dist/jobbridge-{version}-py3-none-any.whl[postgres]'"
    assert wheel in install, f"the wheel's name on the page is not this version's: {wheel}"
    assert not [line for line in install if re.match(r"pip install '?jobbridge\b", line)], "jobbridge is not on PyPI"
