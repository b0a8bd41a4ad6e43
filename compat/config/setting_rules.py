"""The shape of the setting tables: a `Rule` per setting, filed by its new and its old name.

compat/config/setting_table.py holds the rules for most settings, compat/config/setting_results.py those
of the result backend; both file them here with `add`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["honour", "accept", "refuse"]


@dataclass(frozen=True)
class Rule:
    """What one setting does on jobbridge; ``ok(value)`` flips accept to refuse (or back) by value."""

    kind: Kind
    why: str
    instead: str = ""
    ok: Callable[[Any], bool] | None = None

    def refuses(self, value: Any) -> bool:
        if self.kind == "refuse":
            return self.ok is None or not self.ok(value)
        return self.kind == "accept" and self.ok is not None and not self.ok(value)


def empty(value: Any) -> bool:
    """A setting's harmless default: unset, off or empty."""
    return value is None or value is False or value in ("", {}, [], ())



RULES: dict[str, Rule] = {}
OLD_NAMES: dict[str, str] = {}


def add(rule: Rule, names: str) -> None:
    """File ``rule`` under each ``new_name OLD_NAME`` line of ``names``."""
    for line in names.strip().splitlines():
        new, old = line.split()
        RULES[new] = rule
        OLD_NAMES[old] = new
