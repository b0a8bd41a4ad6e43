"""A missing psycopg or PyMySQL is one line naming the extra to install, as a missing redis, boto3 or kafka client is.

The commands run in a subprocess whose import system cannot find the client
library: a meta path finder placed first hides it, as a venv without the
extra would (this venv has every extra installed, and one built with
``--system-site-packages`` would still see them). Nothing connects: the URLs
name this host only, and the error comes before any connection is tried.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.support import APP, REPO, environment

#: hides the modules named in argv[1] (comma-separated), then runs the jobbridge command with the rest
HIDING = """
import sys
from importlib.abc import MetaPathFinder

hidden = set(sys.argv.pop(1).split(","))

class Hide(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in hidden:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Hide())
from jobbridge.cli import main
sys.argv[0] = "jobbridge"
main()
"""

CASES = [
    ("psycopg", "postgresql://postgres@127.0.0.1:5432/test", "'psycopg'", "pip install 'jobbridge[postgres]'"),
    ("pymysql", "mysql://root@127.0.0.1:3306/test", "'pymysql'", "pip install 'jobbridge[mysql]'"),
    ("pymysql", "mariadb://root@127.0.0.1:3306/test", "'pymysql'", "pip install 'jobbridge[mysql]'"),
]


def run_hiding(module: str, *args: str, url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", HIDING, module, *args], cwd=cwd, capture_output=True, text=True,
                          env=environment({"JOBBRIDGE_DATABASE_URL": url, "PYTHONPATH": str(REPO)}), timeout=60,
                          check=False)


RUNS = [(case, args) for case in CASES for args in (["status"], ["migrate"], ["worker", "-A", APP, "--once"])
        if case[1].startswith("postgresql") or args == ["status"]]


@pytest.mark.parametrize(("case", "args"), RUNS, ids=[f"{c[1].split(':')[0]}-{a[0]}" for c, a in RUNS])
def test_a_missing_sql_client_is_one_line_naming_the_extra(case: tuple[str, str, str, str], args: list[str],
                                                           tmp_path: Path) -> None:
    module, url, names, fix = case
    ran = run_hiding(module, *args, url=url, cwd=REPO if args[0] == "worker" else tmp_path)
    assert ran.returncode == 1, ran
    assert "Traceback" not in ran.stderr, ran.stderr
    (line,) = [line for line in ran.stderr.splitlines() if not line.startswith("store: ")]
    backend = url.split(":")[0].replace("mariadb", "mysql")
    assert line.startswith(f"Error: the database driver needs {names} for {backend} at {backend}://") and \
        line.endswith(f": {fix}"), ran.stderr


def test_the_hiding_itself_works(tmp_path: Path) -> None:
    """Without the hook the same command reaches the server: the test above tests the missing library."""
    ran = run_hiding("nothing_at_all", "status", url="postgresql://postgres@127.0.0.1:5432/test", cwd=tmp_path)
    assert "needs 'psycopg'" not in ran.stderr
