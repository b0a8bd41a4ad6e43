"""The public API and the import rules of design.md §1, checked on the source."""

from __future__ import annotations

import ast
from pathlib import Path

import jobbridge

ROOT = Path(jobbridge.__file__).parent


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_public_api_is_all_and_importable() -> None:
    assert sorted(jobbridge.__all__) == jobbridge.__all__
    for name in jobbridge.__all__:
        assert hasattr(jobbridge, name), name
    assert (ROOT / "py.typed").exists()


def test_the_core_never_imports_compat() -> None:
    for path in ROOT.rglob("*.py"):
        assert not any(m.startswith("jobbridge.compat") for m in imports_of(path)), path


def test_drivers_never_import_the_worker_or_the_app() -> None:
    forbidden = ("jobbridge.worker", "jobbridge.app", "jobbridge.execution", "jobbridge.cli", "jobbridge.supervisor")
    for path in (ROOT / "drivers").rglob("*.py"):
        assert not any(m.startswith(forbidden) for m in imports_of(path)), path


def test_no_client_exceptions_outside_drivers() -> None:
    clients = ("redis", "botocore", "boto3", "confluent_kafka", "psycopg", "pymysql")
    for name in ("worker.py", "execution.py", "supervisor.py", "cli.py"):
        path = ROOT / name
        if path.exists():
            assert not any(m.split(".")[0] in clients for m in imports_of(path)), path
