"""Celery's own source distribution, downloaded once, for running real Celery code on jobbridge.

Celery's sdist on PyPI carries ``examples/`` and ``t/integration/``: code nobody
here wrote, written for Celery. `celery_source()` fetches it with pip
(``pip download --no-binary :all: --no-deps celery==CELERY_VERSION``) into a
cache outside the repository (``/tmp/jb-srv/celery-<version>/``, where
tests/services.py keeps the servers it installs) and unpacks it there; nothing
of it is ever copied into this repository. `shim_env()` is the environment of a
process that runs that code on jobbridge: ``tests/compat/celery_shim`` first on
``PYTHONPATH``, whose ``sitecustomize`` calls ``install_as_celery()`` before
anything imports celery — the one change the code gets.

The version is the one the committed tables of real Celery's behaviour were
made with (tests/compat/parity/config_table.json).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.services import SRV, unavailable

CELERY_VERSION = "5.5.3"
SHIM = Path(__file__).resolve().parent / "celery_shim"


def celery_source(version: str = CELERY_VERSION) -> Path:
    """The unpacked sdist (``examples/``, ``t/``), downloaded on first use; skipped (failed under CI) offline."""
    root = SRV / f"celery-{version}"
    tree = root / f"celery-{version}"
    if (root / ".unpacked").exists():
        return tree
    root.mkdir(parents=True, exist_ok=True)
    archive = root / f"celery-{version}.tar.gz"
    if not archive.exists():
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
                               "-q", "-d", str(root), f"celery=={version}"],
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0 or not archive.exists():
            unavailable(f"Celery {version}'s source distribution", f"pip download failed: {done.stderr[-500:]}")
    shutil.rmtree(tree, ignore_errors=True)
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="data")
    (root / ".unpacked").touch()
    return tree


def copy_example(name: str, into: Path) -> Path:
    """A fresh copy of ``examples/<name>`` under ``into`` (outside the repo): the examples write files beside them."""
    target = into / name
    shutil.copytree(celery_source() / "examples" / name, target)
    return target


def shim_env(**extra: str) -> dict[str, str]:
    """This process's environment without JOBBRIDGE_*/CELERY_* variables, the shim first on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBBRIDGE_", "CELERY_", "DJANGO_"))}
    env.update(PYTHONPATH=str(SHIM), PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


def jobbridge_command() -> list[str]:
    """How to run the ``jobbridge`` command of this environment."""
    script = Path(sys.executable).with_name("jobbridge")
    return [str(script)] if script.exists() else [sys.executable, "-m", "jobbridge.cli"]
