"""Bytecode for the repository's modules, written beside them before any measured worker starts.

pip compiles every package it installs, so the peers' modules and every
dependency load from bytecode. jobbridge is installed editable from this tree,
and where ``PYTHONDONTWRITEBYTECODE`` is set (this machine's environment sets
it) every worker the harness spawns would compile jobbridge, the facade and the
benchmark apps from source at its start: about 0.6 billion instructions, 90 ms,
of a start that a user's installed jobbridge never pays (docs/benchmarks.md,
"Start-up"). A module edited since is compiled again from its source, as
always: bytecode records its source's mtime.
"""

from __future__ import annotations

import compileall
from pathlib import Path

#: the source trees the measured workers import from the repository
SOURCES = ("jobbridge", "compat", "benchmarks")
ROOT = Path(__file__).resolve().parent.parent


def compile_sources() -> None:
    """Write the bytecode of `SOURCES` (quietly; a file that does not compile is left to fail where it is run)."""
    for name in SOURCES:
        compileall.compile_dir(ROOT / name, quiet=1)
