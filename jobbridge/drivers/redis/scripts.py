"""The Lua scripts beside this module, registered on a client.

redis-py's `Script` runs EVALSHA and, on NOSCRIPT (a restarted server forgot
its script cache), loads the text and runs it again, so a restart needs
nothing from us here.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import redis
from redis.commands.core import Script

NAMES = (
    "push", "reserve", "acknowledge", "release", "fail", "extend", "reclaim", "hand_back", "retry",
    "lock_acquire", "lock_release", "purge",
)


def source(name: str) -> str:
    """The text of ``<name>.lua``, shipped as package data."""
    return resources.files(__package__ or __name__).joinpath(f"{name}.lua").read_text(encoding="utf-8")


@dataclass(frozen=True, slots=True)
class Scripts:
    """One `Script` per file; each file's header names the keys it touches and its ARGV."""

    push: Script
    reserve: Script
    acknowledge: Script
    release: Script
    fail: Script
    extend: Script
    reclaim: Script
    hand_back: Script
    retry: Script
    lock_acquire: Script
    lock_release: Script
    purge: Script

    @classmethod
    def register(cls, client: redis.Redis) -> Scripts:
        return cls(**{name: client.register_script(source(name)) for name in NAMES})
