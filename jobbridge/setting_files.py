"""Finding and reading the configuration file: jobbridge.toml, or pyproject.toml's ``[tool.jobbridge]``.

Kept apart from `jobbridge.settings`, which turns what is read here into checked
settings: this module only finds the file and parses its TOML, so a file that
cannot be read or parsed fails naming the path, before any key is judged.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jobbridge.errors import ConfigurationError

__all__ = ["base_dir", "discover", "read_file"]


def base_dir(cwd: Path | None) -> Path:
    """The directory settings are read relative to: ``cwd``, else the working directory, resolved."""
    return (Path.cwd() if cwd is None else Path(cwd)).resolve()


def discover(cwd: Path | None = None) -> Path | None:
    """The configuration file in ``cwd``: jobbridge.toml, or a pyproject.toml with [tool.jobbridge]."""
    base = base_dir(cwd)
    own, pyproject = base / "jobbridge.toml", base / "pyproject.toml"
    in_pyproject = pyproject.is_file() and "jobbridge" in _read_toml(pyproject).get("tool", {})
    if own.is_file() and in_pyproject:
        raise ConfigurationError(
            f"both {own} and the [tool.jobbridge] table of {pyproject} configure jobbridge; keep one, "
            "since whichever lost would be a configuration that reads as in force and is not")
    return own if own.is_file() else (pyproject if in_pyproject else None)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"{path} is not valid TOML: {exc}") from exc
    except OSError as exc:
        raise ConfigurationError(f"cannot read the configuration file {path}: {exc}") from exc


def read_file(path: Path) -> Mapping[str, Any]:
    """A file's jobbridge table: the whole of a jobbridge.toml, or pyproject.toml's [tool.jobbridge]."""
    document = _read_toml(path)
    if path.name != "pyproject.toml":
        return document
    table = document.get("tool", {}).get("jobbridge")
    if not isinstance(table, Mapping):
        raise ConfigurationError(f"{path} has no [tool.jobbridge] table")
    return table
