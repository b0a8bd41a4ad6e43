"""The package's metadata keeps its promises: the licence it names is the one shipped, and the extras add up.

An `all` extra that misses a driver added later, or a `mariadb` alias that
drifts from `mysql`, would install something other than what its name says.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
#: extras that are tools for working on jobbridge, or aliases, rather than a driver or the facade
NOT_FEATURES = {"all", "dev", "docs", "mariadb"}


def _self_extras(requirements: list[str]) -> set[str]:
    """The extras named by ``jobbridge[a,b]`` requirements."""
    found = [re.fullmatch(r"jobbridge\[([\w,-]+)\]", r.replace(" ", "")) for r in requirements]
    return {extra for match in found if match for extra in match[1].split(",")}


def test_the_licence_file_is_the_one_the_metadata_names() -> None:
    assert PROJECT["license"] == "MIT" and PROJECT["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n") and "Copyright (c)" in text and "the jobbridge authors" in text
    assert not any(c.startswith("License ::") for c in PROJECT["classifiers"])  # the expression says it once


def test_all_installs_every_driver_and_the_facade_and_mariadb_is_mysql() -> None:
    extras: dict[str, list[str]] = PROJECT["optional-dependencies"]
    features = set(extras) - NOT_FEATURES
    assert {"postgres", "mysql", "redis", "sqs", "kafka", "celery"} <= features
    assert _self_extras(extras["all"]) == features
    assert extras["mariadb"] == ["jobbridge[mysql]"]
    assert any(r.startswith("mkdocs-material") for r in extras["docs"])
