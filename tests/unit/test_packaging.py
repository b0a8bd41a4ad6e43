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


def _listed_packages() -> tuple[list[str], dict[str, str], dict[str, list[str]]]:
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return tool["packages"], tool["package-dir"], tool["package-data"]


def test_every_package_on_disk_is_in_the_wheel() -> None:
    """An editable install finds a package the list forgets; a wheel built from the list would not have it."""
    packages, package_dir, _ = _listed_packages()
    on_disk = {".".join(("jobbridge", *init.parent.relative_to(ROOT / "jobbridge").parts))
               for init in (ROOT / "jobbridge").rglob("__init__.py")}
    on_disk |= {".".join(("jobbridge.compat", *init.parent.relative_to(ROOT / "compat").parts))
                for init in (ROOT / "compat").rglob("__init__.py")}
    assert package_dir == {"jobbridge.compat": "compat"}
    assert on_disk == set(packages)


def test_every_file_a_package_reads_is_package_data() -> None:
    """The SQL, Lua and templates beside the code: each matched by a package-data pattern of its package."""
    packages, _, data = _listed_packages()
    for package in packages:
        if package.startswith("jobbridge.compat"):
            continue
        folder = ROOT.joinpath(*package.split("."))
        patterns = data.get(package, [])
        for path in folder.rglob("*"):
            if path.is_dir() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts:
                continue
            relative = path.relative_to(folder)
            if len(relative.parts) > 1 and (folder / relative.parts[0] / "__init__.py").exists():
                continue  # a subpackage's own file, checked with that package
            assert any(relative.match(p) for p in patterns), f"{package}: {relative} is not package data"
